#!/usr/bin/env bash
# Installs the build dependencies (as root), then configures and builds memlat in ./build.
# Extra arguments go to cmake, e.g. ./build.sh -DMEMLAT_STATIC=OFF for a dynamic developer build.
#   --arch arm64   also cross-build the arm64 (aarch64) binaries into ./build-arm64
#                  (cmake/aarch64-linux-gnu.cmake; the native build comes first: its btfgen
#                  runs on this machine for both)
#   --tls          also build memlat with --web.config.file (TLS and basic auth, -DMEMLAT_TLS=ON)
#                  into ./build-tls: the binary and its links only, for the tests of TLS
#   --release      also make the release tarballs, BUILD/memlat-VERSION-ARCH.tar.gz, and the
#                  Debian packages, BUILD/memlat_VERSION_DEBARCH.deb (amd64, arm64)
set -euo pipefail
cd "$(dirname "$0")"
arches=()
release=0
tls=0
cmake_args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --arch) arches+=("${2:?--arch needs arm64}"); shift 2 ;;
    --arch=*) arches+=("${1#--arch=}"); shift ;;
    --release) release=1; shift ;;
    --tls) tls=1; shift ;;
    *) cmake_args+=("$1"); shift ;;
    esac
done
for arch in "${arches[@]+"${arches[@]}"}"; do
    case "$arch" in
    arm64 | aarch64) ;;
    *) echo "build.sh: --arch $arch: only arm64 can be cross-built (x86_64 is the native build)" >&2
       exit 2 ;;
    esac
done
if [ "$(id -u)" -eq 0 ]; then
    scripts/install-deps.sh
else
    echo "build.sh: not root, so not installing packages; building with what is installed" >&2
fi
# ccache, when installed (install-deps.sh installs it): a build of sources compiled before,
# such as CI's build of a clean checkout, takes the objects from its cache instead of six
# minutes of compiling three trees on two CPUs. Its key is the compiler, its arguments and the
# preprocessed source, so a changed header or flag compiles again. The cache is machine-wide
# under root, like the VM tests' kernels; paths below this tree are hashed relative to it, so
# that every checkout shares it. MEMLAT_NO_CCACHE=1 builds without it.
if command -v ccache >/dev/null && [ -z "${MEMLAT_NO_CCACHE:-}" ]; then
    cmake_args=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                "${cmake_args[@]+"${cmake_args[@]}"}")
    export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
    if [ -z "${CCACHE_DIR:-}" ] && [ "$(id -u)" -eq 0 ]; then
        export CCACHE_DIR=/var/cache/memlat/ccache
    fi
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]+"${cmake_args[@]}"}" >/dev/null
cmake --build build -j "$(nproc)"
[ "$release" = 1 ] && cmake --build build --target tarball deb
if [ "$tls" = 1 ]; then
    cmake -S . -B build-tls -DCMAKE_BUILD_TYPE=Release -DMEMLAT_TLS=ON \
        "${cmake_args[@]+"${cmake_args[@]}"}" >/dev/null
    cmake --build build-tls -j "$(nproc)" --target memlat
fi
if [ ${#arches[@]} -gt 0 ]; then
    cmake -S . -B build-arm64 --toolchain cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
        -DMEMLAT_HOST_BTFGEN="$PWD/build/btfgen" "${cmake_args[@]+"${cmake_args[@]}"}" >/dev/null
    cmake --build build-arm64 -j "$(nproc)"
    [ "$release" = 1 ] && cmake --build build-arm64 --target tarball deb
fi
exit 0
