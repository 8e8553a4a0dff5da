# Robustness tests (label: robustness): the tools under hostile names, failing output and
# badly timed signals. Run as root like the runtime tests, one at a time.
foreach(scenario
        non_utf8_comm
        non_utf8_path
        write_errors
        sigint_while_blocked
        sigterm_while_blocked
        thread_id_as_pid)
    add_test(NAME robustness.${scenario}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_output.py ${scenario})
    set_tests_properties(robustness.${scenario} PROPERTIES
        LABELS robustness RUN_SERIAL TRUE SKIP_RETURN_CODE 77 TIMEOUT 120
        ENVIRONMENT "${MEMLAT_RUNTIME_ENV}")
endforeach()

# Tables that fill up, inode reuse and signals at start-up (test_tables.py).
foreach(scenario
        cachestat_inode_reuse
        table_full_cachestat
        table_full_tlbflush
        table_full_drsnoop
        signals_at_startup)
    add_test(NAME robustness.${scenario}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_tables.py ${scenario})
    set_tests_properties(robustness.${scenario} PROPERTIES
        LABELS robustness RUN_SERIAL TRUE SKIP_RETURN_CODE 77 TIMEOUT 180
        ENVIRONMENT "${MEMLAT_RUNTIME_ENV}")
endforeach()

add_test(NAME robustness.bad_arguments
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_arguments.py bad_arguments)
set_tests_properties(robustness.bad_arguments PROPERTIES
    LABELS robustness SKIP_RETURN_CODE 77 TIMEOUT 120 ENVIRONMENT "${MEMLAT_RUNTIME_ENV}")
