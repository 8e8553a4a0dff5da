#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the whole test suite: unit tests, the build
# checks (static binaries under 2 MB) and the runtime tests, which load the real tools into
# the running kernel and need root. Tests that cannot run here report "skipped: reason".
set -euo pipefail
cd "$(dirname "$0")"
./build.sh
# tracefs is where classic tracepoints are attached; mount it if the machine has not.
if [ ! -d /sys/kernel/tracing/events ] && [ "$(id -u)" -eq 0 ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
ctest --test-dir build --output-on-failure "$@"
