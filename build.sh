#!/usr/bin/env bash
# Installs the build dependencies (as root), then configures and builds memlat in ./build.
# Extra arguments go to cmake, e.g. ./build.sh -DMEMLAT_STATIC=OFF for a dynamic developer build.
set -euo pipefail
cd "$(dirname "$0")"
if [ "$(id -u)" -eq 0 ]; then
    scripts/install-deps.sh
else
    echo "build.sh: not root, so not installing packages; building with what is installed" >&2
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$(nproc)"
