# --prometheus (test_prometheus.py): the tools scraped by a real Prometheus (Debian's package).
foreach(scenario tlbflush_matches_interrupts drsnoop_matches_ftrace series_bounded bad_input)
    memlat_runtime_test(test_prometheus.py prometheus_${scenario})
endforeach()
