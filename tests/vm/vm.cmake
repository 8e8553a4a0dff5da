# VM tests (label: vm): every tool on a second kernel (Debian's 6.1) in a qemu guest with two
# NUMA nodes. Included by tests/CMakeLists.txt; see tests/vm/README.md.
#
# The guest has no libc: the workloads are linked statically for it into BUILD/tests/vm/
# (every tests/workloads/NAME.cpp, and the guest-only tests/vm/guest/NAME.cpp).
file(GLOB memlat_vm_workloads CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/../workloads/*.cpp
     ${CMAKE_CURRENT_LIST_DIR}/guest/*.cpp)
foreach(source ${memlat_vm_workloads})
    get_filename_component(workload ${source} NAME_WE)
    add_executable(vm_${workload} ${source})
    set_target_properties(vm_${workload} PROPERTIES OUTPUT_NAME ${workload}
                          RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/vm)
    target_compile_options(vm_${workload} PRIVATE -O2 -g -fno-omit-frame-pointer)
    target_link_options(vm_${workload} PRIVATE -static -pthread)
endforeach()

# vm.kernel fetches and unpacks the kernel package once (BUILD/vm-cache); then one test per
# tool boots a guest that runs that tool's scenarios (tests/vm/scenarios/TOOL.sh), each
# reported as PASS/FAIL/SKIP on its own line. They keep both CPUs busy: RUN_SERIAL, and CI
# runs them after the other tests (ctest -LE vm, then ctest -L vm).
set(memlat_vm_runner ${CMAKE_CURRENT_LIST_DIR}/run_vm_tests.py)
add_test(NAME vm.kernel
         COMMAND ${Python3_EXECUTABLE} ${memlat_vm_runner} --build-dir ${CMAKE_BINARY_DIR} --prepare)
set_tests_properties(vm.kernel PROPERTIES LABELS vm RUN_SERIAL TRUE SKIP_RETURN_CODE 77
                     TIMEOUT 900 FIXTURES_SETUP memlat_vm_kernel)
foreach(tool ${MEMLAT_TOOLS})
    add_test(NAME vm.${tool}
             COMMAND ${Python3_EXECUTABLE} ${memlat_vm_runner} --build-dir ${CMAKE_BINARY_DIR}
                     --tools ${tool})
    set_tests_properties(vm.${tool} PROPERTIES LABELS vm RUN_SERIAL TRUE SKIP_RETURN_CODE 77
                         TIMEOUT 900 FIXTURES_REQUIRED memlat_vm_kernel)
endforeach()
