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

memstall_high memstall.high.tp_btf ""
memstall_high memstall.high.raw_tp tp_btf

vm_choices memstall "" "-C"
