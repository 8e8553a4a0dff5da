#!/usr/bin/env python3
"""Build check: `cmake --build BUILD --target tarball` makes the release tarball, and it holds
exactly the multi-call binary memlat (this build's), a symbolic link to it named after each
tool, README.md and the license when the tree has one, under one top directory named like the
archive.

usage: check_tarball.py CMAKE BUILD_DIR TARBALL TOOL..."""
import filecmp
import os
import subprocess
import sys
import tarfile
import tempfile

LICENSES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING")


def main() -> int:
    cmake, build, tarball, tools = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    r = subprocess.run([cmake, "--build", build, "--target", "tarball"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        print(f"FAIL: cmake --build {build} --target tarball exited {r.returncode}:\n"
              f"{r.stdout}{r.stderr}")
        return 1
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    top = os.path.basename(tarball)[:-len(".tar.gz")]
    expected = {"memlat", "README.md"} | {n for n in LICENSES
                                          if os.path.isfile(os.path.join(source, n))}
    for folder in ("docs", "docs/tools"):
        expected |= {f"{folder}/{page}" for page in os.listdir(os.path.join(source, folder))
                     if page.endswith(".md")}
    failures = []
    with tarfile.open(tarball) as t, tempfile.TemporaryDirectory() as tmp:
        members = [m for m in t.getmembers() if not m.isdir()]
        names = [m.name for m in members]
        inside = {m.name.split("/", 1)[1]: m for m in members if m.name.startswith(top + "/")}
        if len(inside) != len(names):
            failures.append(f"entries outside {top}/: {sorted(names)}")
        got = {n for n, m in inside.items() if m.isfile()}
        links = {n: m.linkname for n, m in inside.items() if m.issym()}
        if got != expected:
            failures.append(f"holds the files {sorted(got)}, expected {sorted(expected)}")
        if links != {tool: "memlat" for tool in tools}:
            failures.append(f"holds the links {links}, expected one to memlat per tool "
                            f"{sorted(tools)}")
        t.extractall(tmp)
        path = os.path.join(tmp, top, "memlat")
        if "memlat" in got and not filecmp.cmp(path, os.path.join(build, "memlat"), shallow=False):
            failures.append(f"memlat in the tarball differs from {build}/memlat")
        if "memlat" in got and not os.access(path, os.X_OK):
            failures.append("memlat in the tarball is not executable")
    print(f"{tarball}: {os.path.getsize(tarball)} bytes, {sorted(got)}, links {sorted(links)}")
    if not any(os.path.isfile(os.path.join(source, n)) for n in LICENSES):
        print("note: the source tree has no LICENSE file, so the tarball has none")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
