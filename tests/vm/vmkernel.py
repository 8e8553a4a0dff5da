"""The second kernel of the VM tests: Debian's linux-image-6.1.0-*-amd64, fetched with
`apt-get download` into a cache directory (never installed), unpacked with `dpkg -x`, and its
bzImage decompressed to the ELF vmlinux that qemu boots through PVH (about twice as fast as the
bzImage under TCG: no decompression in emulated code).

    kernel = fetch_kernel(cache_dir)      # Kernel(version, vmlinux, modules, config)

Only the standard library; no root needed except where apt-get needs it.
"""
from __future__ import annotations

import glob
import lzma
import os
import re
import shutil
import subprocess
import zlib
from dataclasses import dataclass
from typing import Optional

# The metapackage whose dependency names Debian's current 6.1 kernel image.
METAPACKAGE = "linux-image-amd64"
IMAGE_RE = re.compile(r"^linux-image-(6\.1\.0-\d+)-amd64$")


class KernelError(Exception):
    """The kernel could not be fetched or prepared (the runner reports it as the reason)."""


@dataclass
class Kernel:
    version: str        # e.g. "6.1.0-56-amd64" (the modules directory's name)
    package: str        # the .deb it came from
    vmlinux: str        # uncompressed ELF with the PVH note
    bzimage: str
    modules: str        # lib/modules/VERSION inside the unpacked package
    config: str         # boot/config-VERSION


def _run(argv: list[str], cwd: Optional[str] = None, timeout: float = 300) -> str:
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise KernelError(f"{' '.join(argv)} failed (exit {r.returncode}): "
                          f"{(r.stderr or r.stdout).strip()[-500:]}")
    return r.stdout


def image_package_name() -> str:
    """linux-image-6.1.0-N-amd64: the 6.1 image the archive's metapackage depends on now, or
    else the highest-numbered 6.1 image apt knows about."""
    names: list[str] = []
    try:
        out = _run(["apt-cache", "depends", METAPACKAGE], timeout=60)
        names = [m.group(1) for m in re.finditer(r"Depends:\s*(linux-image-\S+)", out)]
    except (KernelError, OSError):
        pass
    names = [n for n in names if IMAGE_RE.match(n)]
    if not names:
        out = _run(["apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-amd64$"],
                   timeout=60)
        names = [line.split()[0] for line in out.splitlines() if line.split()
                 and IMAGE_RE.match(line.split()[0])]
    if not names:
        raise KernelError("apt knows no linux-image-6.1.0-*-amd64 package (is the Debian 12 "
                          "archive in the sources, and has apt-get update run?)")
    return max(names, key=lambda n: int(IMAGE_RE.match(n).group(1).split("-")[1]))


# ---------------------------------------------------------------- vmlinux from bzImage

_MAGICS = [  # (name, magic bytes) as in the kernel's scripts/extract-vmlinux
    ("xz", b"\xfd7zXZ\x00"),
    ("gzip", b"\x1f\x8b\x08"),
    ("zstd", b"\x28\xb5\x2f\xfd"),
]


def _decompress(kind: str, data: bytes) -> Optional[bytes]:
    try:
        if kind == "xz":
            d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
            return d.decompress(data)
        if kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
        if kind == "zstd":
            r = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, timeout=120)
            return r.stdout if r.stdout else None
    except (lzma.LZMAError, zlib.error, OSError):
        return None
    return None


def extract_vmlinux(bzimage: str, out: str) -> None:
    """Finds the compressed payload in a bzImage and writes the ELF it holds (the approach of
    the kernel's scripts/extract-vmlinux: try every offset of every known magic)."""
    with open(bzimage, "rb") as f:
        data = f.read()
    for kind, magic in _MAGICS:
        start = data.find(magic)
        while start != -1:
            payload = _decompress(kind, data[start:])
            if payload and payload[:4] == b"\x7fELF":
                tmp = out + ".tmp"
                with open(tmp, "wb") as f:
                    f.write(payload)
                os.replace(tmp, out)
                return
            start = data.find(magic, start + 1)
    raise KernelError(f"no compressed ELF kernel found in {bzimage}")


# ---------------------------------------------------------------- fetch and unpack

def fetch_kernel(cache_dir: str, log=print) -> Kernel:
    """Downloads (once) and unpacks Debian's 6.1 kernel into cache_dir/<package>/."""
    os.makedirs(cache_dir, exist_ok=True)
    name = image_package_name()
    debs = sorted(glob.glob(os.path.join(cache_dir, f"{name}_*.deb")))
    if not debs:
        log(f"vm: downloading {name} into {cache_dir}")
        # apt drops privileges to _apt, which cannot write the cache directory: download
        # into a private temporary directory apt may write, then move the file.
        tmp = os.path.join(cache_dir, "download.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        os.chmod(tmp, 0o777)
        _run(["apt-get", "download", "-q", name], cwd=tmp, timeout=600)
        got = glob.glob(os.path.join(tmp, f"{name}_*.deb"))
        if not got:
            raise KernelError(f"apt-get download {name} produced no .deb")
        shutil.move(got[0], cache_dir)
        shutil.rmtree(tmp, ignore_errors=True)
        debs = sorted(glob.glob(os.path.join(cache_dir, f"{name}_*.deb")))
    deb = debs[-1]
    root = os.path.join(cache_dir, os.path.basename(deb)[:-4])
    if not os.path.isdir(os.path.join(root, "boot")):
        log(f"vm: unpacking {os.path.basename(deb)}")
        shutil.rmtree(root, ignore_errors=True)
        _run(["dpkg-deb", "-x", deb, root + ".tmp"])
        os.replace(root + ".tmp", root)
    bz = glob.glob(os.path.join(root, "boot", "vmlinuz-*"))
    if len(bz) != 1:
        raise KernelError(f"expected one boot/vmlinuz-* in {deb}, found {bz}")
    version = os.path.basename(bz[0])[len("vmlinuz-"):]
    vmlinux = os.path.join(root, "vmlinux")
    if not os.path.isfile(vmlinux):
        log(f"vm: extracting vmlinux from {os.path.basename(bz[0])}")
        extract_vmlinux(bz[0], vmlinux)
    return Kernel(version=version, package=os.path.basename(deb), vmlinux=vmlinux,
                  bzimage=bz[0], modules=os.path.join(root, "lib", "modules", version),
                  config=os.path.join(root, "boot", f"config-{version}"))


def find_module(kernel: Kernel, name: str) -> Optional[str]:
    """Path of NAME.ko (possibly .ko.xz/.ko.zst: returned as is) in the package's modules."""
    for path in glob.glob(os.path.join(kernel.modules, "kernel", "**", name + ".ko*"),
                          recursive=True):
        return path
    return None


def config_value(kernel: Kernel, option: str) -> Optional[str]:
    """CONFIG_OPTION's value in the kernel's config ("y", "m", a string), None if unset."""
    with open(kernel.config) as f:
        for line in f:
            if line.startswith(option + "="):
                return line.split("=", 1)[1].strip()
    return None
