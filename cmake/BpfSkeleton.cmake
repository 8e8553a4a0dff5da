# BPF programs: bpf/NAME.bpf.c -> BPF object (debug info stripped, BTF kept) -> libbpf
# skeleton header bpf/NAME.skel.h in the build tree.

find_program(MEMLAT_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(MEMLAT_LLVM_STRIP NAMES llvm-strip llvm-strip-16 llvm-strip-15 llvm-strip-14 REQUIRED)
find_program(MEMLAT_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

# The skeleton embeds an object that bpftool's own libbpf has seen; the loader that runs it is
# libbpf-dev's. If the two disagree on the minor version, generated skeletons can reference
# symbols or struct layouts the linked libbpf lacks, so refuse to configure.
function(memlat_check_bpftool_libbpf libbpf_version)
    execute_process(COMMAND ${MEMLAT_BPFTOOL} version OUTPUT_VARIABLE out ERROR_VARIABLE err
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "'${MEMLAT_BPFTOOL} version' failed (${err}); install Debian's bpftool.")
    endif()
    if(NOT out MATCHES "using libbpf v([0-9]+)\\.([0-9]+)")
        message(FATAL_ERROR "Cannot tell which libbpf ${MEMLAT_BPFTOOL} uses; it printed:\n${out}")
    endif()
    set(tool_version "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
    string(REGEX MATCH "^[0-9]+\\.[0-9]+" dev_version "${libbpf_version}")
    if(NOT tool_version VERSION_EQUAL dev_version)
        message(FATAL_ERROR
            "bpftool generates skeletons with libbpf ${tool_version} but libbpf-dev is "
            "${libbpf_version}. Install a bpftool and a libbpf-dev of the same libbpf "
            "version (Debian's packages of one release match).")
    endif()
    message(STATUS "bpftool uses libbpf ${tool_version}, libbpf-dev is ${libbpf_version}: they agree")
endfunction()

set(MEMLAT_BPF_CPU v3 CACHE STRING "BPF instruction set passed to clang as -mcpu")

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|amd64")
    set(MEMLAT_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(MEMLAT_BPF_ARCH arm64)
else()
    set(MEMLAT_BPF_ARCH ${CMAKE_SYSTEM_PROCESSOR})
endif()
set(MEMLAT_VMLINUX_DIR ${PROJECT_SOURCE_DIR}/vmlinux/${MEMLAT_BPF_ARCH})
if(NOT EXISTS ${MEMLAT_VMLINUX_DIR}/vmlinux.h)
    message(FATAL_ERROR "No ${MEMLAT_VMLINUX_DIR}/vmlinux.h; generate it with "
                        "'make -f Makefile.btf ARCH=${MEMLAT_BPF_ARCH}' on a kernel of that arch.")
endif()

# memlat_bpf_skeleton(NAME) defines the custom commands and returns the skeleton path in
# NAME_SKELETON; add that path to a target's sources so it is generated first.
function(memlat_bpf_skeleton name)
    set(src ${PROJECT_SOURCE_DIR}/bpf/${name}.bpf.c)
    set(outdir ${CMAKE_BINARY_DIR}/bpf)
    set(obj ${outdir}/${name}.bpf.o)
    set(skel ${outdir}/${name}.skel.h)
    file(MAKE_DIRECTORY ${outdir})
    add_custom_command(
        OUTPUT ${obj}
        COMMAND ${MEMLAT_CLANG} -target bpf -mcpu=${MEMLAT_BPF_CPU} -g -O2 -Wall -Werror
                -D__TARGET_ARCH_${MEMLAT_BPF_ARCH} -I${MEMLAT_VMLINUX_DIR}
                -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/bpf
                -MD -MT ${obj} -MF ${obj}.d -c ${src} -o ${obj}.tmp
        # The relocations of .BTF.ext are never read (libbpf applies relocations only to
        # sections of instructions) but are as large as .BTF.ext itself: a fifth of drsnoop's
        # object, which every binary embeds.
        COMMAND ${MEMLAT_LLVM_STRIP} -g --remove-section=.rel.BTF.ext ${obj}.tmp
        COMMAND ${CMAKE_COMMAND} -E rename ${obj}.tmp ${obj}
        DEPENDS ${src}
        DEPFILE ${obj}.d
        COMMENT "BPF ${name}.bpf.c"
        VERBATIM)
    # Write to a temporary file and rename, so a failing bpftool leaves no truncated header.
    add_custom_command(
        OUTPUT ${skel}
        COMMAND sh -c "'${MEMLAT_BPFTOOL}' gen skeleton '${obj}' name ${name}_bpf > '${skel}.tmp' || { rm -f '${skel}.tmp'; exit 1; }"
        COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
        DEPENDS ${obj}
        COMMENT "skeleton ${name}.skel.h"
        VERBATIM)
    set(${name}_SKELETON ${skel} PARENT_SCOPE)
endfunction()
