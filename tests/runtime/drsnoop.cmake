foreach(scenario memcg_matches_ftrace memcg_matches_ftrace_old_kernel
        memcg_matches_ftrace_no_kernel_btf hist_matches_lines extended_text direct_reclaim perf_sees_tracepoints hist_process_storm
        bad_input)
    memlat_runtime_test(test_drsnoop.py drsnoop_${scenario})
endforeach()
