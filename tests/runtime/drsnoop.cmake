foreach(scenario memcg_matches_ftrace hist_matches_lines extended_text direct_reclaim bad_input)
    memlat_runtime_test(test_drsnoop.py drsnoop_${scenario})
endforeach()
