# Runtime test scenarios (label: runtime), included by tests/CMakeLists.txt.
# One ctest per scenario: memlat_runtime_test(<script in tests/runtime> <scenario>).

# tlbflush (test_tlbflush.py)
foreach(scenario
        count_matches_interrupts
        lazy_tlb_matches_interrupts
        per_process_storm
        culprits
        stacks
        latency
        latency_raw_tp
        latency_tp_btf
        latency_tracepoint
        latency_no_csd
        latency_idle
        trace
        trace_old_kernel
        trace_no_kernel_btf
        trace_perf_buffer_lost
        sigint_summary
        no_link_left
        fallback_raw_tp
        fallback_tracepoint
        fallback_csd
        perf_sees_tracepoint
        bad_input
        interval)
    memlat_runtime_test(test_tlbflush.py tlbflush_${scenario})
endforeach()
