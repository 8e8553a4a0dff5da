#!/usr/bin/env bash
# Installs memlat's build and test dependencies from Debian's archive (Debian 12 or later).
set -euo pipefail
packages=(
    clang llvm                  # BPF programs (clang -target bpf, llvm-strip)
    bpftool libbpf-dev          # skeletons (bpftool) and the BPF headers; the loader is built from Debian's source (cmake/Libbpf.cmake)
    libelf-dev zlib1g-dev libzstd-dev   # libbpf's and our ELF reading, static archives included
    cmake make g++ pkg-config patch  # patch: our fixes to libbpf's source (cmake/libbpf)
    nlohmann-json3-dev libfmt-dev       # JSON output, formatting (header-only)
    libgtest-dev                # unit tests
    python3 binutils            # runtime tests and the static-binary check (readelf)
    strace                      # runtime test: libbpf leaves sysfs BTF alone with --btf
    xz-utils                    # the kernels' BTF (btf/*/*.btf.xz), unpacked by the build
    dwarves                     # pahole: BTF from DWARF (Makefile.btf kernel-btf-dwarf)
    qemu-system-x86 busybox-static      # VM tests (tests/vm): Debian's kernels in a guest
    zstd                        # VM tests: newer kernels' zstd-compressed modules
)
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps.sh: run as root (sudo) to install packages" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Waits for another apt run (a second build, unattended upgrades) instead of failing.
apt_lock=(-o DPkg::Lock::Timeout=900)
apt-get "${apt_lock[@]}" update -qq
apt-get "${apt_lock[@]}" install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
