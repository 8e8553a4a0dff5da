# Robustness tests (label: robustness): the tools under hostile names, failing output, badly
# timed signals and full tables. Run as root like the runtime tests, one at a time.
function(memlat_robustness_test script scenario)
    add_test(NAME robustness.${scenario}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/${script} ${scenario})
    set_tests_properties(robustness.${scenario} PROPERTIES
        LABELS robustness RUN_SERIAL TRUE SKIP_RETURN_CODE 77 TIMEOUT 180
        ENVIRONMENT "${MEMLAT_RUNTIME_ENV}")
endfunction()

# Names that are not UTF-8, output that cannot be written, signals while blocked.
foreach(scenario
        non_utf8_comm
        non_utf8_path
        write_errors
        sigint_while_blocked
        sigterm_while_blocked
        json_skipped_runs
        thread_id_as_pid)
    memlat_robustness_test(test_output.py ${scenario})
endforeach()

# Tables that fill up, inode reuse and signals at start-up.
foreach(scenario
        cachestat_inode_reuse
        table_full_cachestat
        table_full_tlbflush
        table_full_drsnoop
        signals_at_startup)
    memlat_robustness_test(test_tables.py ${scenario})
endforeach()

memlat_robustness_test(test_arguments.py bad_arguments)
memlat_robustness_test(test_arguments.py bad_btf)
