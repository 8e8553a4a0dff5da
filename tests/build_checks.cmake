# Build checks (label: build): every tool binary is static, under 2 MB, of the build's
# architecture, and its --help runs (a cross build's through CMAKE_CROSSCOMPILING_EMULATOR,
# qemu-user; without one that part is skipped and says so). build.tarball: the release tarball
# holds the tools, README and license.
set(memlat_check_binary_args --machine ${MEMLAT_RELEASE_ARCH})
if(CMAKE_CROSSCOMPILING)
    list(APPEND memlat_check_binary_args "--emulator=${CMAKE_CROSSCOMPILING_EMULATOR}")
endif()
foreach(tool ${MEMLAT_TOOLS})
    add_test(NAME build.${tool}.static_and_help
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/runtime/check_binary.py
                     ${memlat_check_binary_args} $<TARGET_FILE:${tool}> ${MEMLAT_STATIC})
    set_tests_properties(build.${tool}.static_and_help PROPERTIES LABELS build
                         SKIP_RETURN_CODE 77)
endforeach()
add_test(NAME build.tarball
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/runtime/check_tarball.py
                 ${CMAKE_COMMAND} ${CMAKE_BINARY_DIR} ${MEMLAT_TARBALL} ${MEMLAT_TOOLS})
set_tests_properties(build.tarball PROPERTIES LABELS build)
# build.common_layers: tools/common stays layered (no unit needs a header of a unit that needs
# its own) and no file there grows past 500 lines (docs/developing.md, "Layout").
add_test(NAME build.common_layers
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/build/check_layers.py
                 ${PROJECT_SOURCE_DIR}/tools/common)
set_tests_properties(build.common_layers PROPERTIES LABELS build)
