# memstall on the guest kernel. Checked by tests/vm/check_memstall.py.
#
# high.HOOK: memory.high throttling on cgroup v2, which the host (cgroup v1) cannot show: one
# task in a cgroup whose memory.high is 16 MiB touches 18 MiB of anonymous memory. The guest
# has no swap, so reclaim frees nothing and each return to user space over the limit sleeps
# in mem_cgroup_handle_over_high (a memstall). Oracles: the cgroup's memory.pressure "some"
# total (PSI; the task is the cgroup's only one, so "some" is its memstall time) and
# memory.events "high". The guest boots with psi=1 (Debian builds PSI disabled by default).

CG=/sys/fs/cgroup/memlat_memstall

memstall_high() { # NAME DISABLE
    vm_begin "$1"
    if vm_have memstall && vm_btf_for "${1##*.}"; then
        if [ ! -e /proc/pressure/memory ]; then
            vm_skip "PSI is disabled in the guest (no /proc/pressure/memory)"
        else
            echo +memory > /sys/fs/cgroup/cgroup.subtree_control
            mkdir -p $CG
            echo $((16 << 20)) > $CG/memory.high
            vm_held toucher anon_toucher --mb 18 --cgroup $CG
            vm_meta toucher_pid "$VM_PID"
            vm_snap pressure.before $CG/memory.pressure
            vm_snap events.before $CG/memory.events
            if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" memstall -v -j -p "$VM_PID"; then
                vm_release toucher
                vm_bg_wait toucher
                sleep 1
            fi
            vm_snap pressure.after $CG/memory.pressure
            vm_snap events.after $CG/memory.events
            vm_stop tool
            vm_bg_wait toucher 5
            rmdir $CG
        fi
    fi
    vm_end
}

# dirty.HOOK: dirty throttling, where the raw tracepoint's arguments differ before 5.18 (the
# pause is the 11th of 12 there): a writer of 64 MiB to a ram disk past a 256 KiB dirty limit
# (the guest's own, set for the scenario), against an ftrace instance of its
# balance_dirty_pages events with a positive pause.
memstall_dirty() { # NAME DISABLE
    vm_begin "$1"
    if vm_have memstall && vm_btf_for "${1##*.}" && vm_ramdisk; then
        old_bytes=$(cat /proc/sys/vm/dirty_bytes)
        old_ratio=$(cat /proc/sys/vm/dirty_ratio)
        old_bg_bytes=$(cat /proc/sys/vm/dirty_background_bytes)
        old_bg_ratio=$(cat /proc/sys/vm/dirty_background_ratio)
        echo $((64 << 10)) > /proc/sys/vm/dirty_background_bytes
        echo $((256 << 10)) > /proc/sys/vm/dirty_bytes
        vm_held writer dd if=/dev/zero of=/dev/ram1 bs=64k count=1024
        vm_meta writer_pid "$VM_PID"
        inst=/sys/kernel/tracing/instances/memlat_vm
        mkdir -p $inst
        echo 8192 > $inst/buffer_size_kb
        echo "common_pid == $VM_PID" > $inst/events/writeback/balance_dirty_pages/filter
        echo 1 > $inst/events/writeback/balance_dirty_pages/enable
        if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" memstall -v -j -p "$VM_PID"; then
            vm_release writer
            vm_bg_wait writer
            sleep 1
        fi
        vm_stop tool
        vm_bg_wait writer 5
        echo 0 > $inst/events/writeback/balance_dirty_pages/enable
        cat $inst/trace > "$RUN/ftrace"
        rmdir $inst
        if [ "$old_bytes" != 0 ]; then echo "$old_bytes" > /proc/sys/vm/dirty_bytes
        else echo "$old_ratio" > /proc/sys/vm/dirty_ratio; fi
        if [ "$old_bg_bytes" != 0 ]; then echo "$old_bg_bytes" > /proc/sys/vm/dirty_background_bytes
        else echo "$old_bg_ratio" > /proc/sys/vm/dirty_background_ratio; fi
    fi
    vm_end
}

memstall_high memstall.high.tp_btf ""
memstall_high memstall.high.raw_tp tp_btf
memstall_dirty memstall.dirty.tp_btf ""
memstall_dirty memstall.dirty.raw_tp tp_btf

vm_choices memstall "" "-C"
