# numamove on the guest kernel's two real NUMA nodes. Checked by tests/vm/check_numamove.py.
#
# numamove.misplaced.A+B: numa_toucher allocates MIB on node 0 (from CPU 0), then writes it
# from CPU 1; with kernel.numa_balancing=1 the hinting faults migrate the pages to node 1
# (reason numa_misplaced). Two numamove instances watch the same run: one with --reasons on the
# migrate tracepoints through hook path A, one with -c (per-call view of
# migrate_misplaced_page/_folio) through path B; both are compared with /proc/vmstat
# numa_pages_migrated and pgmigrate_success over a window inside both tools' windows.

MIB=32
SECONDS_RUN=8
DBG=/sys/kernel/debug/sched/numa_balancing

# The scan knobs: debugfs from Linux 5.13, sysctls (kernel.numa_balancing_scan_*) before.
numa_knob() { # NAME
    if [ -d $DBG ]; then echo "$DBG/$1"; else echo "/proc/sys/kernel/numa_balancing_$1"; fi
}

# Every tool's scenarios share one boot, so numa_restore puts NUMA balancing and its scan
# rate back as they were (Debian's kernels turn it on for a 2-node machine): left fast, the
# scanner's PTE changes in the workloads of later scenarios send TLB-shootdown IPIs of their
# own (tlbflush counts IPIs per munmap: 6.1 failed with 609 IPIs from 576 munmaps).
NUMA_KNOBS="scan_delay_ms scan_period_min_ms scan_period_max_ms"
numa_setup() {
    numa_saved=$(cat /proc/sys/kernel/numa_balancing)
    for k in $NUMA_KNOBS; do
        numa_saved="$numa_saved $(cat "$(numa_knob $k)" 2>/dev/null)"
    done
    sysctl -qw kernel.numa_balancing=1
    # Scan sooner and more often than the defaults (1 s delay, 1 s..60 s period), so that the
    # misplaced pages are found within the run under TCG.
    echo 100 > "$(numa_knob scan_delay_ms)"
    echo 100 > "$(numa_knob scan_period_min_ms)"
    echo 400 > "$(numa_knob scan_period_max_ms)"
    # Let NUMA balancing settle the guest's own processes before anything is measured.
    [ -f /tmp/numa_settled ] || { sleep 3; : > /tmp/numa_settled; }
}

numa_restore() {
    set -- $numa_saved
    sysctl -qw kernel.numa_balancing="$1"
    shift
    for k in $NUMA_KNOBS; do
        [ -n "$1" ] && echo "$1" > "$(numa_knob $k)"
        shift
    done
}

numamove_misplaced() { # NAME DISABLE_A DISABLE_B
    vm_begin "$1"
    if vm_have numamove && vm_btf_for "${1##*.}"; then
        numa_setup
        # Balancing runs only between the two vmstat snapshots: a tool touches megabytes while
        # it starts and stops (BTF, its binary), and balancing migrated those pages inside
        # the tools' window but outside vmstat's (+492 pages, 6%, once on 5.10).
        sysctl -qw kernel.numa_balancing=0
        if vm_tool tracepoints MEMLAT_DISABLE_HOOKS="$2" numamove -v -j --reasons -P 1000 &&
            vm_tool per_call MEMLAT_DISABLE_HOOKS="$3" numamove -v -j --per-call 1000; then
            sysctl -qw kernel.numa_balancing=1
            vm_snap numa_balancing /proc/sys/kernel/numa_balancing
            vm_snap vmstat.before /proc/vmstat
            vm_run workload numa_toucher --mib $MIB --from-cpu 0 --to-cpu 1 \
                --seconds $SECONDS_RUN
            vm_snap vmstat.after /proc/vmstat
            sysctl -qw kernel.numa_balancing=0
        fi
        vm_stop tracepoints
        vm_stop per_call
        numa_restore
    fi
    vm_end
}

numamove_misplaced numamove.misplaced.tp_btf+fentry "" ""
numamove_misplaced numamove.misplaced.raw_tp+kprobe tp_btf fentry
numamove_misplaced numamove.misplaced.tracepoint+migrate_tracepoints tp_btf,raw_tp fentry,kprobe

vm_choices numamove "" "--reasons" "--per-call"
