# tlbflush on the guest kernel: the count scenario once per hook path of tlb:tlb_flush, and
# culprits + latency with and without the csd family (Linux 6.1 has no csd tracepoints, so
# there the irq_vectors / remote_send_ipi fall-backs are what runs either way).
# Checked by tests/vm/check_tlbflush.py against the guest's /proc/interrupts TLB row.
# latency.HOOKPATH: -L in the same run as an ftrace instance recording the call-function IPI
# handler and tlb_flush on CPU 1 (tracing_cpumask), in the x86-tsc trace clock; two marks
# written on CPU 1 carry CLOCK_MONOTONIC ns (/proc/timer_list) to convert the ticks to ns.

# arm64 (every scenario after this one counts x86 shootdown IPIs): tlb_workload unmaps on CPU 0
# while its worker runs on CPU 1, traced by an ftrace instance on tlb:tlb_flush and ipi:*
# (the premise: the kernel reports no TLB flush and sends no TLB IPI); tlbflush, started
# with and without options, must exit 1 with its one-line explanation and print nothing on
# stdout (no empty table). Checked by check_tlbflush.py (tlbflush.arm64).
ARM_INST=/sys/kernel/tracing/instances/memlat_tlb_arm64
if [ "$(uname -m)" = aarch64 ]; then
    vm_begin tlbflush.arm64.refuses
    if vm_have tlbflush; then
        vm_run plain tlbflush -d 1
        vm_run options tlbflush --culprits -L -c 1 -j 1 1
        mkdir $ARM_INST
        echo 4096 > $ARM_INST/buffer_size_kb
        for e in tlb/tlb_flush ipi/ipi_raise; do
            [ -d $ARM_INST/events/$e ] && echo 1 > $ARM_INST/events/$e/enable &&
                vm_meta "traced_$(basename $e)" 1
        done
        vm_snap interrupts.before /proc/interrupts
        vm_run workload tlb_workload --seconds 3 --main-cpu 0 --worker-cpu 1
        vm_snap interrupts.after /proc/interrupts
        echo 0 > $ARM_INST/tracing_on
        cat $ARM_INST/trace > "$RUN/ftrace"
        for e in tlb/tlb_flush ipi/ipi_raise; do
            [ -d $ARM_INST/events/$e ] && echo 0 > $ARM_INST/events/$e/enable
        done
        rmdir $ARM_INST
    fi
    vm_end
    return 0
fi

tlb_count() { # NAME DISABLE ARGS...
    name=$1
    disable=$2
    shift 2
    vm_begin "$name"
    if vm_have tlbflush && vm_btf_for "${name##*.}"; then
        vm_tool tool MEMLAT_DISABLE_HOOKS="$disable" tlbflush -v "$@" &&
            vm_snap interrupts.before /proc/interrupts &&
            vm_run workload tlb_workload --seconds 3 --main-cpu 0 --worker-cpu 1 &&
            vm_snap interrupts.after /proc/interrupts
        vm_stop tool
    fi
    vm_end
}

tlb_count tlbflush.count.tp_btf "" -c 1 -j
# raw_tp with -P: the per-process table and the CPUs' counters by epoch on every kernel.
tlb_count tlbflush.count.raw_tp tp_btf -c 1 -P -j
tlb_count tlbflush.count.tracepoint tp_btf,raw_tp -c 1 -j
tlb_count tlbflush.culprits_latency.default "" --culprits -L -c 1 -j
tlb_count tlbflush.culprits_latency.no_csd csd --culprits -L -c 1 -j

IPI_INST=/sys/kernel/tracing/instances/memlat_tlb_ipi
IPI_EVENTS="irq_vectors/call_function_entry irq_vectors/call_function_exit
irq_vectors/call_function_single_entry irq_vectors/call_function_single_exit tlb/tlb_flush"

ipi_mark() { # written on CPU 1: the instance traces only that CPU
    taskset 2 sh -c "echo memlat_clock \$(awk '/^now at/ {print \$3; exit}' /proc/timer_list) \
        > $IPI_INST/trace_marker"
}

tlb_latency() { # NAME DISABLE
    vm_begin "$1"
    if vm_have tlbflush && vm_btf_for "${1##*.}"; then
        if mkdir $IPI_INST && echo x86-tsc > $IPI_INST/trace_clock &&
            echo 2 > $IPI_INST/tracing_cpumask && echo 4096 > $IPI_INST/buffer_size_kb; then
            for e in $IPI_EVENTS; do
                [ -d $IPI_INST/events/$e ] && echo 1 > $IPI_INST/events/$e/enable
            done
            # The marks bracket the workload, inside the tool's window.
            vm_tool tool MEMLAT_DISABLE_HOOKS="$2" tlbflush -v -L -c 1 -j && ipi_mark &&
                vm_snap interrupts.before /proc/interrupts &&
                vm_run workload tlb_workload --seconds 3 --main-cpu 0 --worker-cpu 1 &&
                vm_snap interrupts.after /proc/interrupts && ipi_mark
            vm_stop tool
            echo 0 > $IPI_INST/tracing_on
            cat $IPI_INST/trace > "$RUN/ftrace"
            for e in $IPI_EVENTS; do
                [ -d $IPI_INST/events/$e ] && echo 0 > $IPI_INST/events/$e/enable
            done
            rmdir $IPI_INST
        else
            vm_skip "no ftrace instance with the x86-tsc clock on CPU 1"
            rmdir $IPI_INST 2>/dev/null
        fi
    fi
    vm_end
}

tlb_latency tlbflush.latency.tp_btf ""
tlb_latency tlbflush.latency.raw_tp tp_btf
tlb_latency tlbflush.latency.tracepoint tp_btf,raw_tp

vm_choices tlbflush "" "--culprits -L" "--trace"

# path_log_cleared: the kernel log emptied first (dmesg -c), as weeks of uptime or the
# suite's own OOM tests rotate it away: tlbflush must still name how remote flushes reach
# their CPUs, from what the running kernel installed (5.16+) or else CPUID and the run.
# Checked against the TLB IPIs /proc/interrupts counted (check_tlbflush.py). The oomwhy
# scenarios mark their own lines in the log and read what follows the marks.
vm_begin tlbflush.path_log_cleared.default
if vm_have tlbflush; then
    dmesg -c > /dev/null
    vm_meta log_lines "$(dmesg | wc -l)"
    vm_tool tool tlbflush -v -j &&
        vm_snap interrupts.before /proc/interrupts &&
        vm_run workload tlb_workload --seconds 3 --main-cpu 0 --worker-cpu 1 &&
        vm_snap interrupts.after /proc/interrupts
    vm_stop tool
fi
vm_end
