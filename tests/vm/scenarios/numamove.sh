# numamove on the guest kernel's two real NUMA nodes. Checked by tests/vm/check_numamove.py.
#
# numamove.misplaced.A+B: numa_toucher allocates MIB on node 0 (from CPU 0), then writes it
# from CPU 1; with kernel.numa_balancing=1 the hinting faults migrate the pages to node 1
# (reason numa_misplaced). Two numamove instances watch the same run: one with -r on the
# migrate tracepoints through hook path A, one with -c (per-call view of
# migrate_misplaced_page/_folio) through path B; both are compared with /proc/vmstat
# numa_pages_migrated and pgmigrate_success over a window inside both tools' windows.

MIB=32
SECONDS_RUN=8
DBG=/sys/kernel/debug/sched/numa_balancing

numa_setup() {
    sysctl -qw kernel.numa_balancing=1
    # Scan sooner and more often than the defaults (1 s delay, 1 s..60 s period), so that the
    # misplaced pages are found within the run under TCG.
    if [ -d $DBG ]; then
        echo 100 > $DBG/scan_delay_ms
        echo 100 > $DBG/scan_period_min_ms
        echo 400 > $DBG/scan_period_max_ms
    fi
    # Let NUMA balancing settle the guest's own processes before anything is measured.
    [ -f /tmp/numa_settled ] || { sleep 3; : > /tmp/numa_settled; }
}

numamove_misplaced() { # NAME DISABLE_A DISABLE_B
    vm_begin "$1"
    if vm_have numamove; then
        numa_setup
        vm_snap numa_balancing /proc/sys/kernel/numa_balancing
        if vm_tool tracepoints MEMLAT_DISABLE_HOOKS="$2" numamove -v -j -r 1000 &&
            vm_tool per_call MEMLAT_DISABLE_HOOKS="$3" numamove -v -j -c 1000; then
            vm_snap vmstat.before /proc/vmstat
            vm_run workload numa_toucher --mib $MIB --from-cpu 0 --to-cpu 1 \
                --seconds $SECONDS_RUN
            vm_snap vmstat.after /proc/vmstat
        fi
        vm_stop tracepoints
        vm_stop per_call
    fi
    vm_end
}

numamove_misplaced numamove.misplaced.tp_btf+fentry "" ""
numamove_misplaced numamove.misplaced.raw_tp+kprobe tp_btf fentry
numamove_misplaced numamove.misplaced.tracepoint+migrate_tracepoints tp_btf,raw_tp fentry,kprobe
