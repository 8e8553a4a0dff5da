# VM tests (label: vm): every tool on Debian's kernels (tests/vm/kernels.txt: 5.10, 6.1, 6.12,
# the newest) in a qemu guest with two NUMA nodes. Included by tests/CMakeLists.txt; see
# tests/vm/README.md.
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
    target_include_directories(vm_${workload} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../workloads)
    target_link_options(vm_${workload} PRIVATE -static -pthread)
endforeach()

# Per kernel K of tests/vm/kernels.txt: vm.kernel.K fetches and unpacks it once into the
# machine-wide cache (a fixture), vm.K boots one guest that runs every tool's scenarios
# (tests/vm/scenarios/*.sh), each reported as PASS/FAIL/SKIP on its own line. A guest runs
# on one host CPU (TCG, thread=single), so test.sh runs as many boots at a time as the machine
# has CPUs (ctest -L vm -j $(nproc), after the other tests): on CI's two, 1,121 s against
# 2,237 s one at a time. COST (the seconds each took one at a time) makes ctest start the
# longest first.
# Timeouts: one boot with every tool took 100-170 s per kernel on this 2-CPU machine under
# other builds' load (README.md has the measurements); 720 s is about 4x the slowest. 5.10
# gets no less although it fails fast today: with the old-kernel fall-backs it runs as 6.1.
set(memlat_vm_runner ${CMAKE_CURRENT_LIST_DIR}/run_vm_tests.py)
set(memlat_vm_kernels 5.10 6.1 6.12 newest)
set(memlat_vm_timeout_5.10 720)
set(memlat_vm_timeout_6.1 720)
set(memlat_vm_timeout_6.12 720)
set(memlat_vm_timeout_newest 720)
set(memlat_vm_cost_5.10 330)
set(memlat_vm_cost_6.1 330)
set(memlat_vm_cost_6.12 455)
set(memlat_vm_cost_newest 520)
set(memlat_vm_cost_arm64.6.1 565)
set(memlat_vm_cost_nobtf 240)
set(memlat_vm_cost_psi0 125)
# An arm64 build (the cross build, build-arm64/) boots its binaries on Debian's arm64 kernel
# under qemu-system-aarch64 (ctest vm.arm64.6.1) instead. One boot took 137-198 s; 900 s
# leaves room for a machine much busier than that.
if(MEMLAT_BPF_ARCH STREQUAL "arm64")
    set(memlat_vm_kernels arm64.6.1)
    set(memlat_vm_timeout_arm64.6.1 900)
endif()
# vm.K.nobtf: the same boot with the kernel's BTF hidden (--hide-btf): the tools run from the
# BTF embedded for exactly these kernels (btf/kernels.txt). -DMEMLAT_VM_NOBTF=OFF leaves them
# out (developers' quick runs; CI keeps them).
option(MEMLAT_VM_NOBTF "Register the vm.K.nobtf tests (kernel BTF hidden in the guest)" ON)
set(memlat_vm_nobtf_kernels 5.10 6.1)   # amd64 only: arm64 embeds no BTF (README)
# vm.K.psi0: memstall's scenarios of the causes PSI changes (swap-in, thrashing, memory.high)
# again in a boot with psi=0, against the same oracles (PSI's own aside): about a minute. On
# Debian 13's 6.12, the kernel most users of Debian run with PSI off. 6.1 and 7.3 pass too
# (run_vm_tests.py --kernel K --tools memstall --psi-off); CI keeps one for its time budget.
set(memlat_vm_psi0_kernels 6.12)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${CMAKE_CURRENT_LIST_DIR}/kernels.txt)
foreach(kernel ${memlat_vm_kernels})
    add_test(NAME vm.kernel.${kernel}
             COMMAND ${Python3_EXECUTABLE} ${memlat_vm_runner} --build-dir ${CMAKE_BINARY_DIR}
                     --kernel ${kernel} --prepare)
    set_tests_properties(vm.kernel.${kernel} PROPERTIES LABELS vm SKIP_RETURN_CODE 77
                         TIMEOUT 1800
                         FIXTURES_SETUP memlat_vm_kernel_${kernel})
    set(variants "")
    if(MEMLAT_VM_NOBTF AND kernel IN_LIST memlat_vm_nobtf_kernels)
        list(APPEND variants nobtf)
    endif()
    if(kernel IN_LIST memlat_vm_psi0_kernels)
        list(APPEND variants psi0)
    endif()
    foreach(variant "" ${variants})
        set(name vm.${kernel})
        set(extra --tools all)
        if(nobtf IN_LIST variants)
            # The hook paths that need no kernel BTF run once, in the nobtf boot (with the
            # BTF the tools embed); this boot runs those that need it.
            set(extra --tools all --btf-paths-only)
        endif()
        if(variant STREQUAL "nobtf")
            set(name vm.${kernel}.nobtf)
            set(extra --tools all --hide-btf)
        elseif(variant STREQUAL "psi0")
            set(name vm.${kernel}.psi0)
            set(extra --tools memstall --psi-off)
        endif()
        add_test(NAME ${name}
                 COMMAND ${Python3_EXECUTABLE} ${memlat_vm_runner} --build-dir ${CMAKE_BINARY_DIR}
                         --kernel ${kernel} ${extra}
                         --timeout ${memlat_vm_timeout_${kernel}})
        # ctest's own timeout is above the runner's, so that the runner kills the guest and
        # still prints what the guest reported.
        math(EXPR ctest_timeout "${memlat_vm_timeout_${kernel}} + 120")
        set(cost ${memlat_vm_cost_${kernel}})
        if(variant)
            set(cost ${memlat_vm_cost_${variant}})
        endif()
        set_tests_properties(${name} PROPERTIES LABELS vm SKIP_RETURN_CODE 77 COST ${cost}
                             TIMEOUT ${ctest_timeout}
                             FIXTURES_REQUIRED memlat_vm_kernel_${kernel})
    endforeach()
endforeach()

# vm.support_table: docs/kernels.md's table of what each tool chose, per kernel, against the
# TOOL.choices runs of the boots above (support_table.py --check): the table is generated from
# the VM runs (--write), and this fails when a tool's choices change and the page does not.
if(NOT MEMLAT_BPF_ARCH STREQUAL "arm64")
    set(memlat_vm_table_boots ${memlat_vm_kernels})
    list(TRANSFORM memlat_vm_table_boots PREPEND vm.)
    add_test(NAME vm.support_table
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/support_table.py
                     --build-dir ${CMAKE_BINARY_DIR} --check ${PROJECT_SOURCE_DIR}/docs/kernels.md)
    set_tests_properties(vm.support_table PROPERTIES LABELS vm SKIP_RETURN_CODE 77
                         DEPENDS "${memlat_vm_table_boots}")
endif()
