#!/usr/bin/env python3
"""Downloads one Debian kernel image package (and, with --dbg, its -dbg package) without
touching the machine's apt configuration, and leaves what Makefile.btf needs:

    scripts/fetch-debian-kernel.py --suites bullseye,bullseye-security \
        --image 'linux-image-5.10.0-*-amd64' DIR
        -> DIR/<package>.deb, DIR/<release>/vmlinux (ELF extracted from the bzImage),
           DIR/<release>/release (e.g. "5.10.0-46-amd64")

apt runs with a scratch APT_CONFIG under DIR/apt: its own sources.list holding only
`deb http://deb.debian.org/debian SUITE main` per suite (debian-security for -security
suites; signed by the Debian archive keyring), its own
lists, cache and an empty dpkg status, so neither /etc/apt nor the package database change.
The image package is the newest that matches --image (a glob), the one the suite's
linux-image-amd64 metapackage depends on when it matches.

(The VM tests' tests/vm/vmkernel.py has a 6.1-only fetch through the machine's own sources;
this one takes any suite. Both extract vmlinux with vmkernel.extract_vmlinux.)
"""
from __future__ import annotations

import argparse
import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "vm"))
from vmkernel import extract_vmlinux  # noqa: E402

MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def scratch_apt(root: str, suites: list[str]) -> dict[str, str]:
    """An environment whose APT_CONFIG points apt at a private state under root."""
    for d in ("etc/sources.list.d", "etc/preferences.d", "lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with open(os.path.join(root, "etc/sources.list"), "w") as f:
        for suite in suites:
            mirror = MIRROR + "-security" if suite.endswith("-security") else MIRROR
            f.write(f"deb [signed-by={KEYRING}] {mirror} {suite} main\n")
    open(os.path.join(root, "status"), "a").close()
    conf = os.path.join(root, "apt.conf")
    with open(conf, "w") as f:
        f.write(f'''Dir::Etc::sourcelist "{root}/etc/sources.list";
Dir::Etc::sourceparts "{root}/etc/sources.list.d";
Dir::Etc::preferencesparts "{root}/etc/preferences.d";
Dir::State::lists "{root}/lists";
Dir::State::status "{root}/status";
Dir::Cache "{root}/cache";
Dir::Cache::archives "{root}/cache/archives";
APT::Sandbox::User "root";
Acquire::Languages "none";
''')
    env = dict(os.environ)
    env["APT_CONFIG"] = conf
    return env


def run(argv: list[str], env: dict[str, str], cwd: str | None = None) -> str:
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"fetch-debian-kernel: {' '.join(argv)} failed: {(r.stderr or r.stdout)[-800:]}")
    return r.stdout


def image_name(env: dict[str, str], pattern: str) -> str:
    depends = run(["apt-cache", "depends", "linux-image-amd64"], env)
    for name in re.findall(r"Depends:\s*(linux-image-\S+)", depends):
        if fnmatch.fnmatch(name, pattern):
            return name
    names = [line.split()[0] for line in
             run(["apt-cache", "pkgnames", "linux-image-"], env).splitlines()
             if fnmatch.fnmatch(line.strip(), pattern)]
    if not names:
        sys.exit(f"fetch-debian-kernel: no package matches {pattern}")
    numbers = lambda n: [int(x) for x in re.findall(r"\d+", n)]  # noqa: E731
    return max(names, key=numbers)


def download(env: dict[str, str], name: str, out: str) -> str:
    have = glob.glob(os.path.join(out, f"{name}_*.deb"))
    if have:
        return have[0]
    run(["apt-get", "download", "-q", name], env, cwd=out)
    got = glob.glob(os.path.join(out, f"{name}_*.deb"))
    if not got:
        sys.exit(f"fetch-debian-kernel: apt-get download {name} left no .deb")
    return got[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suites", required=True, help="Debian suites, e.g. bullseye,bullseye-security")
    ap.add_argument("--image", required=True, help="package glob, e.g. 'linux-image-6.1.0-*-amd64'")
    ap.add_argument("--dbg", action="store_true", help="also fetch PACKAGE-dbg (DWARF vmlinux)")
    ap.add_argument("dir")
    a = ap.parse_args()
    out = os.path.abspath(a.dir)
    os.makedirs(out, exist_ok=True)
    env = scratch_apt(os.path.join(out, "apt"), a.suites.split(","))
    run(["apt-get", "update", "-q"], env)
    name = image_name(env, a.image)
    deb = download(env, name, out)
    release = name[len("linux-image-"):]
    root = os.path.join(out, release)
    if not os.path.isfile(os.path.join(root, "vmlinux")):
        unpack = root + ".unpack"
        shutil.rmtree(unpack, ignore_errors=True)
        run(["dpkg-deb", "-x", deb, unpack], env)
        os.makedirs(root, exist_ok=True)
        extract_vmlinux(os.path.join(unpack, "boot", f"vmlinuz-{release}"),
                        os.path.join(root, "vmlinux"))
        shutil.rmtree(unpack)
    if a.dbg:
        dbg = download(env, name + "-dbg", out)
        if not os.path.isfile(os.path.join(root, "vmlinux.dwarf")):
            # Only the vmlinux of the package's 1 GB: streamed through tar, never unpacked.
            run(["sh", "-c", f"dpkg-deb --fsys-tarfile '{dbg}' | tar -x -C '{root}' "
                 f"--wildcards --transform='s,.*/,,' './usr/lib/debug/boot/vmlinux-{release}'"],
                env)
            os.replace(os.path.join(root, f"vmlinux-{release}"), os.path.join(root, "vmlinux.dwarf"))
    with open(os.path.join(root, "release"), "w") as f:
        f.write(release + "\n")
    print(root)


if __name__ == "__main__":
    main()
