# tlbflush on the guest kernel: the count scenario once per hook path of tlb:tlb_flush, and
# culprits + latency with and without the csd family (Linux 6.1 has no csd tracepoints, so
# there the irq_vectors / remote_send_ipi fall-backs are what runs either way).
# Checked by tests/vm/check_tlbflush.py against the guest's /proc/interrupts TLB row.

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
tlb_count tlbflush.count.raw_tp tp_btf -c 1 -j
tlb_count tlbflush.count.tracepoint tp_btf,raw_tp -c 1 -j
tlb_count tlbflush.culprits_latency.default "" --culprits -L -c 1 -j
tlb_count tlbflush.culprits_latency.no_csd csd --culprits -L -c 1 -j
