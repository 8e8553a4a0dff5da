foreach(scenario memcg_vs_taskstats thrashing_vs_taskstats dirty_vs_ftrace interval_text
        bad_input)
    memlat_runtime_test(test_memstall.py memstall_${scenario})
endforeach()
