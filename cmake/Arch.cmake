# The target architecture under each name the build needs, decided once from
# CMAKE_SYSTEM_PROCESSOR (cmake/aarch64-linux-gnu.cmake sets it for the cross build):
#   MEMLAT_ARCH      as uname -m prints it: the release tarballs' names (x86_64, aarch64)
#   MEMLAT_BPF_ARCH  as the kernel's arch/ directory names it: vmlinux/ARCH/vmlinux.h and
#                    bpf_tracing.h's __TARGET_ARCH_ARCH (x86, arm64)
#   MEMLAT_DEB_ARCH  as Debian names it: the .deb and the kernels whose BTF is embedded
#                    (amd64, arm64)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|amd64")
    set(MEMLAT_ARCH x86_64)
    set(MEMLAT_BPF_ARCH x86)
    set(MEMLAT_DEB_ARCH amd64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(MEMLAT_ARCH aarch64)
    set(MEMLAT_BPF_ARCH arm64)
    set(MEMLAT_DEB_ARCH arm64)
else()
    set(MEMLAT_ARCH ${CMAKE_SYSTEM_PROCESSOR})
    set(MEMLAT_BPF_ARCH ${CMAKE_SYSTEM_PROCESSOR})
    set(MEMLAT_DEB_ARCH ${CMAKE_SYSTEM_PROCESSOR})
endif()
