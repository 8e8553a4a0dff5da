#!/usr/bin/env bash
# Installs memlat's build and test dependencies from Debian's archive (Debian 12 or later).
set -euo pipefail
packages=(
    clang llvm                  # BPF programs (clang -target bpf, llvm-strip)
    lld                         # links the static x86_64 memlat with its hot code first (cmake/memlat-x86_64.order)
    bpftool libbpf-dev          # skeletons (bpftool) and the BPF headers; the loader is built from Debian's source (cmake/Libbpf.cmake)
    libelf-dev zlib1g-dev libzstd-dev   # libbpf's and our ELF reading, static archives included
    cmake make g++ pkg-config patch  # patch: our fixes to libbpf's source (cmake/libbpf)
    ccache                      # build.sh compiles through it: unchanged sources are not compiled again
    nlohmann-json3-dev libfmt-dev       # JSON output, formatting (header-only)
    libncurses-dev              # memlat top's screen (static archives of ncurses and tinfo)
    tmux                        # runtime tests: memlat top's screen driven in a real terminal
    libboost1.81-dev            # --prometheus: Boost.Beast, the HTTP server (header-only)
    libmbedtls-dev libcrypt-dev openssl   # --web.config.file in -DMEMLAT_TLS=ON builds: TLS, bcrypt; openssl makes the test's certificate
    prometheus                  # runtime tests: a real Prometheus scrapes the exporters
    prometheus-process-exporter # runtime test: a real monitor whose /proc reads lockstall names the root of convoys
    golang-go                   # runtime tests: go tool pprof reads every stall profile memlat writes
    libgtest-dev                # unit tests
    python3 binutils            # runtime tests and the static-binary check (readelf)
    lintian                     # build.deb: the Debian package is checked by lintian (dpkg-deb builds it)
    strace                      # runtime test: libbpf leaves sysfs BTF alone with --btf
    linux-perf                  # runtime tests: perf stat counts the tracepoints beside the tools
    stress-ng                   # runtime test: a lazy-TLB workload for tlbflush against /proc/interrupts
    podman runc docker.io       # runtime tests: real containers named by their runtime's records (docs/names.md); runc: Debian's crun refuses a hybrid cgroup layout
    xz-utils                    # the kernels' BTF (btf/*/*.btf.xz), unpacked by the build
    dwarves                     # pahole: BTF from DWARF (Makefile.btf kernel-btf-dwarf)
    qemu-system-x86 busybox-static      # VM tests (tests/vm): Debian's kernels in a guest
    zstd                        # VM tests: newer kernels' zstd-compressed modules
    # The arm64 cross build (./build.sh --arch arm64): Debian's cross compiler and the arm64
    # static archives (multiarch, beside the amd64 ones); qemu-user runs the arm64 binaries'
    # --help in the build checks, qemu-system-arm the arm64 VM tests. (The guest's arm64
    # busybox is fetched by the VM tests, not installed: busybox-static:arm64 would replace
    # the machine's amd64 one.)
    g++-aarch64-linux-gnu
    libbpf-dev:arm64 libelf-dev:arm64 zlib1g-dev:arm64 libzstd-dev:arm64 libncurses-dev:arm64
    qemu-user-static qemu-system-arm
)
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps.sh: run as root (sudo) to install packages" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Waits for another apt run (a second build, unattended upgrades) instead of failing.
apt_lock=(-o DPkg::Lock::Timeout=900)
# The :arm64 packages need the architecture in dpkg (not in the apt sources: Debian's mirrors
# serve every architecture from the same lines).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
fi
apt-get "${apt_lock[@]}" update -qq
# Debian's prometheus package starts its own server (port 9090) when installed. The tests start
# their own Prometheus; a policy-rc.d that refuses service starts keeps the package's from
# running, and goes again after the install when this script put it there.
policy=/usr/sbin/policy-rc.d
own_policy=false
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# memlat install-deps.sh: no service starts during its install\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    own_policy=true
fi
status=0
apt-get "${apt_lock[@]}" install -y -qq --no-install-recommends "${packages[@]}" >/dev/null || status=$?
if $own_policy; then
    rm -f "$policy"
fi
exit "$status"
