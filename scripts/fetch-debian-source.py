#!/usr/bin/env python3
"""Fetches one file of a pinned Debian source package into a machine-wide cache, checks its
sha256 and prints its path; the build uses it to build libbpf from Debian's source package
(cmake/Libbpf.cmake):

    scripts/fetch-debian-source.py --package libbpf --version 1.7.0-1 --suites sid,forky \\
        --file libbpf_1.7.0.orig.tar.gz --sha256 HEX [--cache DIR]
        -> DIR/libbpf_1.7.0.orig.tar.gz

A cached file with the right checksum is used as is: no network. Otherwise apt downloads the
source package through the VM tests' scratch configuration (tests/vm/vmkernel.py, ScratchApt:
its own sources.list with deb-src lines for --suites, its own lists and cache, under
DIR/apt), so neither /etc/apt nor the package database change; apt checks the files against
the suite's signed Sources index, and this script checks --sha256 on top, so the pin decides.
The cache is --cache, else MEMLAT_SRC_CACHE, else /var/cache/memlat/src when it can be written
(root), else the build directory's src-cache (--build-dir).
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "vm"))
from vmkernel import KernelError, ScratchApt, writable_directory  # noqa: E402

MACHINE_CACHE = "/var/cache/memlat/src"


def fail(message: str) -> None:
    sys.exit(f"fetch-debian-source: {message}")


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_dir(arg: str | None, build_dir: str | None) -> str:
    if arg:
        return os.path.abspath(arg)
    env = os.environ.get("MEMLAT_SRC_CACHE")
    if env:
        return os.path.abspath(env)
    if writable_directory(MACHINE_CACHE):
        return MACHINE_CACHE
    if not build_dir:
        fail(f"{MACHINE_CACHE} is not writable (not root?): give --cache or --build-dir")
    return os.path.join(os.path.abspath(build_dir), "src-cache")


def fetch(args: argparse.Namespace, cache: str, target: str) -> None:
    apt = ScratchApt(os.path.join(cache, "apt"), args.suites.split(","), kinds=("deb-src",))
    # Lists left by an earlier fetch may be stale (the version moved on, a file left the
    # pool): on failure, update and try once more.
    for attempt in range(2):
        try:
            if attempt == 1 or not apt.has_source_lists():
                print(f"fetch-debian-source: apt-get update ({args.suites}, deb-src)",
                      file=sys.stderr)
                apt.update()
            files = apt.source(args.package, args.version, cache)
            break
        except KernelError as e:
            error = e
    else:
        fail(f"cannot download source package {args.package} {args.version} from "
             f"{args.suites}: {error}\nIf the archive has moved past it, put {args.file} "
             f"(sha256 {args.sha256}) into {cache}, or pin a newer version (cmake/Libbpf.cmake).")
    wanted = os.path.join(cache, args.file)
    for path in files:
        if path != wanted:
            os.unlink(path)  # the .dsc and Debian's packaging: the build needs neither
    if not os.path.exists(wanted):
        fail(f"source package {args.package} {args.version} has no {args.file}")
    os.replace(wanted, target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package", required=True)
    parser.add_argument("--version", required=True, help="Debian version, e.g. 1.7.0-1")
    parser.add_argument("--suites", required=True, help="comma-separated, e.g. sid,forky")
    parser.add_argument("--file", required=True, help="the file wanted, e.g. the .orig.tar.gz")
    parser.add_argument("--sha256", required=True)
    parser.add_argument("--cache")
    parser.add_argument("--build-dir")
    args = parser.parse_args()
    cache = cache_dir(args.cache, args.build_dir)
    os.makedirs(cache, exist_ok=True)
    target = os.path.join(cache, args.file)
    # Builds in several directories may fetch at once: one downloads, the others wait.
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(target):
            fetch(args, cache, target)
        actual = sha256(target)
        if actual != args.sha256.lower():
            bad = target + ".bad"
            os.replace(target, bad)
            fail(f"{target}: sha256 {actual}, expected {args.sha256} (moved to {bad}); the "
                 f"pin and the archive disagree")
    print(target)


if __name__ == "__main__":
    main()
