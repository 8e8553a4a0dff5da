# numamove (test_numamove.py): compaction against /proc/vmstat and an ftrace oracle here;
# numa_misplaced needs two NUMA nodes (skipped on one, run by the VM harness).
foreach(scenario
        compaction_matches_vmstat
        pid_matches_ftrace
        fallbacks_agree
        fallbacks_agree_old_kernel
        fallbacks_agree_no_kernel_btf
        no_start_tracepoint
        perf_sees_tracepoints
        default_view
        numa_misplaced
        bad_input)
    memlat_runtime_test(test_numamove.py numamove_${scenario})
endforeach()
