#!/usr/bin/env python3
"""Downloads one Debian kernel image package (and, with --dbg, its -dbg package) without
touching the machine's apt configuration, and leaves what Makefile.btf needs:

    scripts/fetch-debian-kernel.py --suites bullseye,bullseye-security \
        --image 'linux-image-5.10.0-*-amd64' DIR
        -> DIR/<package>.deb, DIR/<release>/vmlinux (ELF extracted from the bzImage),
           DIR/<release>/release (e.g. "5.10.0-46-amd64")
    scripts/fetch-debian-kernel.py --arch arm64 --suites bookworm,bookworm-security \
        --image 'linux-image-6.1.0-*-arm64' DIR
        -> the same with DIR/<release>/vmlinux.btf instead of vmlinux: arm64's Image is no ELF
           file, so its BTF (the raw .BTF section) is cut out of it

apt runs with the VM tests' scratch configuration (tests/vm/vmkernel.py, ScratchApt) under
DIR/apt: its own sources.list holding only the given suites, its own lists, cache and an
empty dpkg status, so neither /etc/apt nor the package database change.
The image package is the newest that matches --image (a glob), the one the suite's
linux-image-amd64 metapackage depends on when it matches.

The VM tests fetch their pinned kernels with the same ScratchApt (tests/vm/kernels.txt).
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
from vmkernel import KernelError, ScratchApt, extract_image_btf, extract_vmlinux  # noqa: E402

def fail(message: str) -> None:
    sys.exit(f"fetch-debian-kernel: {message}")


def image_name(apt: ScratchApt, pattern: str) -> str:
    """The image the suites' linux-image-ARCH depends on when it matches, else the newest
    image that matches."""
    meta = apt.show(f"linux-image-{apt.arch}") or {}
    for name in re.findall(r"(linux-image-[^\s,(]+)", meta.get("Depends", "")):
        if fnmatch.fnmatch(name, pattern):
            return name
    names = [n for n in apt.images() if fnmatch.fnmatch(n, pattern)]
    if not names:
        fail(f"no package matches {pattern}")
    return max(names, key=lambda n: [int(x) for x in re.findall(r"\d+", n)])


def download(apt: ScratchApt, name: str, out: str) -> str:
    have = glob.glob(os.path.join(out, f"{name}_*.deb"))
    return have[0] if have else apt.download([name], out)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suites", required=True, help="Debian suites, e.g. bullseye,bullseye-security")
    ap.add_argument("--image", required=True, help="package glob, e.g. 'linux-image-6.1.0-*-amd64'")
    ap.add_argument("--arch", default="amd64", choices=["amd64", "arm64"],
                    help="Debian architecture of the kernel (default amd64)")
    ap.add_argument("--dbg", action="store_true", help="also fetch PACKAGE-dbg (DWARF vmlinux)")
    ap.add_argument("dir")
    a = ap.parse_args()
    out = os.path.abspath(a.dir)
    os.makedirs(out, exist_ok=True)
    apt = ScratchApt(os.path.join(out, "apt", a.arch), a.suites.split(","), a.arch)
    try:
        apt.update()
    except KernelError as e:
        fail(str(e))
    name = image_name(apt, a.image)
    deb = download(apt, name, out)
    release = name[len("linux-image-"):]
    root = os.path.join(out, release)
    wanted = os.path.join(root, "vmlinux" if a.arch == "amd64" else "vmlinux.btf")
    if not os.path.isfile(wanted):
        unpack = root + ".unpack"
        shutil.rmtree(unpack, ignore_errors=True)
        subprocess.run(["dpkg-deb", "-x", deb, unpack], check=True)
        os.makedirs(root, exist_ok=True)
        extract = extract_vmlinux if a.arch == "amd64" else extract_image_btf
        try:
            extract(os.path.join(unpack, "boot", f"vmlinuz-{release}"), wanted)
        except KernelError as e:
            fail(str(e))
        shutil.rmtree(unpack)
    if a.dbg:
        dbg = download(apt, name + "-dbg", out)
        if not os.path.isfile(os.path.join(root, "vmlinux.dwarf")):
            # Only the vmlinux of the package's 1 GB: streamed through tar, never unpacked.
            subprocess.run(["sh", "-c", f"dpkg-deb --fsys-tarfile '{dbg}' | tar -x -C '{root}' "
                            f"--wildcards --transform='s,.*/,,' "
                            f"'./usr/lib/debug/boot/vmlinux-{release}'"], check=True)
            os.replace(os.path.join(root, f"vmlinux-{release}"), os.path.join(root, "vmlinux.dwarf"))
    with open(os.path.join(root, "release"), "w") as f:
        f.write(release + "\n")
    print(root)


if __name__ == "__main__":
    main()
