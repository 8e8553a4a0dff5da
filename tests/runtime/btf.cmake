# Where the tools get BTF (tools/common/kernel_btf.h): test_btf.py's scenarios, and one
# scenario of each tool run again as on a kernel without BTF of its own (--btf-file: --btf
# with a copy of /sys/kernel/btf/vmlinux, MEMLAT_DISABLE_FEATURES=kernel_btf), which must pass
# the same oracle checks.
foreach(scenario missing_file not_btf none_found embedded_index libbpf_leaves_sysfs read_once)
    memlat_runtime_test(test_btf.py btf_${scenario})
endforeach()

foreach(run
        test_tlbflush.py:tlbflush_count_matches_interrupts
        test_drsnoop.py:drsnoop_memcg_matches_ftrace
        test_compactsnoop.py:compactsnoop_manual_matches_ftrace
        test_numamove.py:numamove_compaction_matches_vmstat
        test_cachestat.py:cachestat_cold_read)
    string(REPLACE ":" ";" parts ${run})
    list(GET parts 0 script)
    list(GET parts 1 scenario)
    memlat_runtime_test(${script} ${scenario} --btf-file)
endforeach()
