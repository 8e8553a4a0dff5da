# Cross build for arm64 (aarch64) on a Debian amd64 machine, from Debian's packages alone:
# g++-aarch64-linux-gnu and the arm64 multiarch -dev packages (libbpf-dev:arm64,
# libelf-dev:arm64, zlib1g-dev:arm64, libzstd-dev:arm64, libncurses-dev:arm64;
# scripts/install-deps.sh --arch arm64).
#
#   cmake -S . -B build-arm64 --toolchain cmake/aarch64-linux-gnu.cmake \
#         -DMEMLAT_HOST_BTFGEN=build/btfgen          # ./build.sh --arch arm64 does this
#
# The BPF objects are the same clang -target bpf build, with -D__TARGET_ARCH_arm64 and
# vmlinux/arm64/vmlinux.h (cmake/Arch.cmake names the architecture from CMAKE_SYSTEM_PROCESSOR);
# bpftool and btfgen run on the build machine.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(MEMLAT_CROSS_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${MEMLAT_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${MEMLAT_CROSS_TRIPLE}-g++)
# Debian's multiarch layout: the arm64 archives are in /usr/lib/aarch64-linux-gnu, the headers
# (arch-independent ones shared with amd64) in /usr/include.
set(CMAKE_LIBRARY_ARCHITECTURE ${MEMLAT_CROSS_TRIPLE})
# Never link an amd64 archive into an arm64 binary.
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu)
# pkg-config must describe the arm64 libbpf, not the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${MEMLAT_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# The build tests run the arm64 binaries (--help) through qemu's user-mode emulator when the
# machine has it (package qemu-user-static).
find_program(MEMLAT_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(MEMLAT_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${MEMLAT_QEMU_AARCH64})
endif()
