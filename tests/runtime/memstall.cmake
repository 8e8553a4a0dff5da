foreach(scenario memcg_vs_taskstats thrashing_vs_taskstats thrashing_vs_taskstats_raw_tp
        thrashing_vs_taskstats_no_kernel_btf dirty_vs_ftrace prometheus_memcg interval_text
        bad_input)
    memlat_runtime_test(test_memstall.py memstall_${scenario})
endforeach()
