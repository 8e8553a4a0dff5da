foreach(scenario manual_matches_ftrace fallbacks fallbacks_old_kernel fallbacks_no_kernel_btf
        hist_and_kinds direct_vs_compact_stall perf_sees_tracepoints bad_input)
    memlat_runtime_test(test_compactsnoop.py compactsnoop_${scenario})
endforeach()
