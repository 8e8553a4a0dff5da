# cachestat (test_cachestat.py)
foreach(scenario
        cold_read
        warm_read
        mmap
        dirties
        per_process
        process_storm
        per_file
        cgroup
        hits_unavailable
        fallback_raw_tp
        fallback_raw_tp_old_kernel
        fallback_raw_tp_no_kernel_btf
        fallback_tracepoint
        perf_sees_tracepoints
        text_output
        bad_input)
    memlat_runtime_test(test_cachestat.py cachestat_${scenario})
endforeach()
