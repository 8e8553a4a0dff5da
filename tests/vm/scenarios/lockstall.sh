# lockstall on the guest kernel: the convoy of tests/workloads/lock_convoy.cpp (a child reading
# the parent's /proc/PID/smaps_rollup in a loop while threads map, unmap and mprotect) once per
# hook path of the mmap_lock tracepoints, beside an ftrace instance on the same three events in
# the mono clock (every process: the checker keeps the workload's). Checked by
# tests/vm/check_lockstall.py as the host checks it (tests/runtime/lock_oracle.py).
# On a kernel without the tracepoints (Debian's 5.10): lockstall must exit 1 saying so.
LS_INSTANCE=memlat_lockstall
LS_EVENTS="mmap_lock/mmap_lock_start_locking mmap_lock/mmap_lock_acquire_returned mmap_lock/mmap_lock_released"

lockstall_convoy() { # NAME DISABLE
    vm_begin "$1"
    if vm_have lockstall && vm_btf_for "${1##*.}"; then
        if [ ! -d /sys/kernel/tracing/events/mmap_lock ]; then
            vm_meta tracepoints none
            vm_run tool lockstall -d 1
        else
            # 16 MiB a CPU.
            vm_ftrace $LS_INSTANCE 16384 mono
            if vm_tool tool MEMLAT_DISABLE_HOOKS="$2" lockstall -v -j; then
                # shellcheck disable=SC2086
                vm_ftrace_events $LS_INSTANCE "common_pid != 0" $LS_EVENTS
                vm_run workload lock_convoy --map-mb 16 --seconds 1 --pause-us 500
            fi
            vm_ftrace_keep $LS_INSTANCE ftrace
            vm_stop tool
        fi
    fi
    vm_end
}

lockstall_convoy lockstall.convoy.tp_btf ""
lockstall_convoy lockstall.convoy.raw_tp tp_btf
lockstall_convoy lockstall.convoy.tracepoint tp_btf,raw_tp

# What it chooses by itself, where it can run at all (the convoy scenarios say why not).
if [ -d /sys/kernel/tracing/events/mmap_lock ]; then
    vm_choices lockstall "" "-s -m 5"
fi
