# Least privilege (README "Least privilege"): scenarios of every tool run again with each tool
# as user nobody holding only the capabilities README names for it (--unprivileged: setpriv,
# CAP_BPF + CAP_PERFMON, + CAP_SYSLOG where kernel addresses are symbolised, + CAP_SYS_PTRACE
# (and CAP_DAC_READ_SEARCH) where other users' processes are read); they must pass
# the same oracle checks, and the harness checks the uid and effective capabilities of every
# run. tlbflush_capabilities: a missing capability gets one line naming it.
foreach(run
        test_tlbflush.py:tlbflush_count_matches_interrupts
        test_tlbflush.py:tlbflush_culprits
        test_tlbflush.py:tlbflush_latency
        test_tlbflush.py:tlbflush_stacks
        test_drsnoop.py:drsnoop_memcg_matches_ftrace
        test_drsnoop.py:drsnoop_hist_matches_lines
        test_compactsnoop.py:compactsnoop_manual_matches_ftrace
        test_compactsnoop.py:compactsnoop_hist_and_kinds
        test_numamove.py:numamove_compaction_matches_vmstat
        test_numamove.py:numamove_pid_matches_ftrace
        test_cachestat.py:cachestat_cold_read
        test_cachestat.py:cachestat_per_process
        test_cachestat.py:cachestat_per_file
        test_prometheus.py:prometheus_tlbflush_matches_interrupts
        test_prometheus.py:prometheus_drsnoop_matches_ftrace
        test_prometheus.py:prometheus_cachestat_matches_ftrace)
    string(REPLACE ":" ";" parts ${run})
    list(GET parts 0 script)
    list(GET parts 1 scenario)
    memlat_runtime_test(${script} ${scenario} --unprivileged)
endforeach()
memlat_runtime_test(test_tlbflush.py tlbflush_capabilities)
