#!/usr/bin/env bash
# Installs the dependencies, builds (x86_64 and the arm64 cross build), and runs the whole test
# suite: unit tests, the build checks (the static memlat within its 3.5 MB budget, both
# architectures), the runtime tests, which load the real tools into the running kernel and
# need root, and the VM tests, which run them on four Debian x86 kernels and one arm64 kernel
# in qemu.
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
# The VM tests (label vm) run after the host tests, never beside them: a guest keeps one CPU
# busy, and they run as many at a time as the machine has CPUs. All runs always happen; the
# script fails if any did.
status=0
# Each run's whole output also goes to a log (ctest -O), so that what failed can be said once
# more at the very end: the part of a long run's output that a CI page keeps.
logs=()
run_ctest() { # BUILD LOG ARGS...
    local dir=$1 log=$1/ctest-$2.log
    shift 2
    logs+=("$log")
    ctest --test-dir "$dir" --output-on-failure -O "$log" "$@" || status=1
}
run_ctest build host -LE vm "$@"
run_ctest build-arm64 host -LE vm "$@"
# The TLS build: its size check and --web.config.file scraped by Prometheus over TLS.
run_ctest build-tls tls -R '^build\.memlat\.|tls_basic_auth' "$@"
run_ctest build vm -L vm -j "$(nproc)" "$@"
run_ctest build-arm64 vm -L vm "$@"
if [ $status -ne 0 ]; then
    echo
    echo "==== what failed, from ${logs[*]} ===="
    # ctest's failed tests, the runtime checks that failed (FAIL), the VM scenarios that failed
    # (FAILED, with their first failed check) and the unit tests' failures.
    grep -h -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(Failed|Timeout|Exception)|^FAIL|\[  FAILED  \]' \
        "${logs[@]}" 2>/dev/null | cut -c1-400 | head -80 || true
fi
exit $status
