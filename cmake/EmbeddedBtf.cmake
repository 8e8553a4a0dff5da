# The kernels' BTF each tool embeds, for hosts without /sys/kernel/btf/vmlinux (see
# lib/kernel/btf.h). For each kernel of btf/kernels.txt, from its checked-in full BTF
# btf/ID/RELEASE.btf.xz: bpftool gen min_core_btf keeps what the tool's BPF object relocates
# against, btfgen appends what its user space reads (btf/user-types.txt), and btfgen embed
# compresses the results into a generated source with their index. Everything is derived at
# build time, so it follows every change of the BPF code.

find_program(MEMLAT_XZ NAMES xz REQUIRED)

# The host tool of those steps (btf/btfgen.cpp). A cross build cannot run what it compiles:
# it takes the btfgen of a native build (MEMLAT_HOST_BTFGEN; ./build.sh --arch passes it).
if(CMAKE_CROSSCOMPILING)
    set(MEMLAT_HOST_BTFGEN "" CACHE FILEPATH "btfgen built for the build machine (a native build's BUILD/btfgen)")
    if(NOT EXISTS "${MEMLAT_HOST_BTFGEN}")
        message(FATAL_ERROR "A cross build needs -DMEMLAT_HOST_BTFGEN=NATIVE_BUILD/btfgen (a "
                            "native build's btfgen; ./build.sh --arch ${CMAKE_SYSTEM_PROCESSOR} "
                            "makes one first).")
    endif()
    set(MEMLAT_BTFGEN ${MEMLAT_HOST_BTFGEN})
else()
    add_executable(btfgen ${PROJECT_SOURCE_DIR}/btf/btfgen.cpp)
    target_include_directories(btfgen PRIVATE ${MEMLAT_LIBBPF_INCLUDE_DIRS})
    target_link_libraries(btfgen PRIVATE ${MEMLAT_BPF_LIBS})
    set(MEMLAT_BTFGEN btfgen)
endif()

set(MEMLAT_BTF_DIR ${CMAKE_BINARY_DIR}/btf)
set(MEMLAT_USER_TYPES ${PROJECT_SOURCE_DIR}/btf/user-types.txt)

# MEMLAT_KERNELS: one "ID;VERSION_ID;RELEASE" per kernel; each kernel's full BTF is
# decompressed once into the build tree. A release named for a Debian architecture
# (...-amd64, ...-arm64) is embedded only in the builds for that architecture.
set(MEMLAT_KERNELS "")
file(STRINGS ${PROJECT_SOURCE_DIR}/btf/kernels.txt kernel_lines REGEX "^[^#]")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/btf/kernels.txt)
foreach(line ${kernel_lines})
    separate_arguments(fields UNIX_COMMAND "${line}")
    list(LENGTH fields count)
    if(count LESS 3)
        continue()
    endif()
    list(GET fields 0 id)
    list(GET fields 1 version)
    list(GET fields 2 release)
    if(release MATCHES "-(amd64|arm64)$" AND NOT CMAKE_MATCH_1 STREQUAL MEMLAT_DEB_ARCH)
        continue()
    endif()
    set(packed ${PROJECT_SOURCE_DIR}/btf/${id}/${release}.btf.xz)
    if(NOT EXISTS ${packed})
        message(FATAL_ERROR "btf/kernels.txt lists ${release} but there is no ${packed}; make "
                            "it with 'make -f Makefile.btf kernel-btf RELEASE=${release}'.")
    endif()
    set(full ${MEMLAT_BTF_DIR}/${id}/${release}.btf)
    file(MAKE_DIRECTORY ${MEMLAT_BTF_DIR}/${id})
    add_custom_command(
        OUTPUT ${full}
        COMMAND sh -c "'${MEMLAT_XZ}' -dc '${packed}' > '${full}.tmp'"
        COMMAND ${CMAKE_COMMAND} -E rename ${full}.tmp ${full}
        DEPENDS ${packed}
        COMMENT "BTF of ${id} ${release}"
        VERBATIM)
    list(APPEND MEMLAT_KERNELS "${id}|${version}|${release}")
    list(APPEND kernel_files ${full})
endforeach()
# Every tool reads these files: one target makes them, so parallel builds never race on them.
add_custom_target(memlat_kernel_btf DEPENDS ${kernel_files})

# memlat_embedded_btf(NAME [OBJECT...]): the generated source with NAME's embedded BTF,
# returned in NAME_EMBEDDED_BTF, made for the BPF objects bpf/OBJECT.bpf.o (memlat_bpf_skeleton;
# none given: bpf/NAME.bpf.o). The target that compiles the source must depend on
# memlat_kernel_btf.
function(memlat_embedded_btf name)
    set(objects ${ARGN})
    if(NOT objects)
        set(objects ${name})
    endif()
    list(TRANSFORM objects PREPEND ${CMAKE_BINARY_DIR}/bpf/)
    list(TRANSFORM objects APPEND .bpf.o)
    set(obj ${objects})
    set(source ${MEMLAT_BTF_DIR}/${name}_btf.cpp)
    file(MAKE_DIRECTORY ${MEMLAT_BTF_DIR}/${name})
    set(entries "")
    set(files "")
    foreach(kernel ${MEMLAT_KERNELS})
        string(REPLACE "|" ";" fields "${kernel}")
        list(GET fields 0 id)
        list(GET fields 1 version)
        list(GET fields 2 release)
        set(full ${MEMLAT_BTF_DIR}/${id}/${release}.btf)
        set(core ${MEMLAT_BTF_DIR}/${name}/${release}.core.btf)
        set(out ${MEMLAT_BTF_DIR}/${name}/${release}.btf)
        add_custom_command(
            OUTPUT ${out}
            COMMAND ${MEMLAT_BPFTOOL} gen min_core_btf ${full} ${core} ${obj}
            COMMAND ${MEMLAT_BTFGEN} extend ${full} ${core} ${MEMLAT_USER_TYPES} ${out}
            DEPENDS ${full} ${obj} ${MEMLAT_USER_TYPES} ${MEMLAT_BTFGEN}
            COMMENT "BTF of ${id} ${release} for ${name}"
            VERBATIM)
        # "debian" -> "Debian 11"
        string(SUBSTRING ${id} 0 1 first)
        string(SUBSTRING ${id} 1 -1 rest)
        string(TOUPPER ${first} first)
        list(APPEND entries ${id} ${version} "${first}${rest} ${version}" ${release} ${out})
        list(APPEND files ${out})
    endforeach()
    add_custom_command(
        OUTPUT ${source}
        COMMAND ${MEMLAT_BTFGEN} embed ${source} ${entries}
        DEPENDS ${files} ${MEMLAT_BTFGEN}
        COMMENT "embedded BTF for ${name}"
        VERBATIM)
    set(${name}_EMBEDDED_BTF ${source} PARENT_SCOPE)
endfunction()
