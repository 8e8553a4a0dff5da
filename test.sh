#!/usr/bin/env bash
# Installs the dependencies, builds (x86_64 and the arm64 cross build), and runs the whole test
# suite: unit tests, the build checks (the static memlat under 2.5 MB, both architectures), the
# runtime tests, which load the real tools into the running kernel and need root, and the VM
# tests, which run them on four Debian x86 kernels and one arm64 kernel in qemu.
# Tests that cannot run here report "skipped: reason".
set -euo pipefail
cd "$(dirname "$0")"
# Both architectures: build/ (native) and the arm64 cross build, build-arm64/; and build-tls/,
# memlat with TLS and basic authentication (-DMEMLAT_TLS=ON, off by default for its size).
./build.sh --arch arm64 --tls
# tracefs is where classic tracepoints are attached; mount it if the machine has not.
if [ ! -d /sys/kernel/tracing/events ] && [ "$(id -u)" -eq 0 ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
# The VM tests (label vm) keep both CPUs busy, so they run after the host tests, never beside
# them. Both runs always happen; the script fails if either did.
status=0
ctest --test-dir build --output-on-failure -LE vm "$@" || status=1
ctest --test-dir build-arm64 --output-on-failure -LE vm "$@" || status=1
# The TLS build: its size check and --web.config.file scraped by Prometheus over TLS.
ctest --test-dir build-tls --output-on-failure -R '^build\.memlat\.|tls_basic_auth' "$@" || status=1
ctest --test-dir build --output-on-failure -L vm "$@" || status=1
ctest --test-dir build-arm64 --output-on-failure -L vm "$@" || status=1
exit $status
