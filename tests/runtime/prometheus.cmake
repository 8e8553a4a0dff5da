# --prometheus (test_prometheus.py): the tools scraped by a real Prometheus (Debian's package).
foreach(scenario tlbflush_matches_interrupts drsnoop_matches_ftrace cachestat_matches_ftrace
        compactsnoop_matches_ftrace numamove_matches_vmstat series_bounded cgroup_series metric_names
        bad_input no_stall)
    memlat_runtime_test(test_prometheus.py prometheus_${scenario})
endforeach()
