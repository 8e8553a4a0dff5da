"""The kernels of the VM tests: Debian's kernel image packages pinned in kernels.txt, fetched with
`apt-get download` through a scratch apt configuration (never the machine's sources, never
installed), unpacked with `dpkg-deb -x` into a machine-wide cache, their bzImage decompressed to
the ELF vmlinux that qemu boots through PVH (about twice as fast as the bzImage under TCG: no
decompression in emulated code), their modules decompressed for busybox's insmod.

    kernel = fetch_kernel("6.1", cache_dir(build), log)   # Kernel(version, vmlinux, ...)

Only the standard library (and the zstd command for .zst payloads); no root needed except to
write the default cache /var/cache/memlat/vm.
"""
from __future__ import annotations

import fcntl
import glob
import json
import lzma
import os
import re
import shutil
import struct
import subprocess
import zlib
from dataclasses import dataclass
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS_TXT = os.path.join(HERE, "kernels.txt")
MACHINE_CACHE = "/var/cache/memlat/vm"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
# linux-image-5.10.0-46-amd64, linux-image-6.12.117+deb13-amd64, linux-image-6.1.0-56-arm64:
# (major, minor, patch or ABI), then the Debian architecture.
IMAGE_RE = re.compile(r"^linux-image-(\d+)\.(\d+)\.(\d+)(?:-(\d+)|\+deb\d+)-(amd64|arm64)$")
# Debian's architecture names, and the machines' (uname -m) they run on.
ARCHES = {"amd64": "x86_64", "arm64": "aarch64"}
# From 7.x the image package is a metapackage over these (same VERSION-ARCH suffix).
SPLIT_PARTS = ("binary", "modules", "base")
CACHE_LAYOUT = 1        # bump when the cached tree's layout changes: trees are redone


class KernelError(Exception):
    """The kernel could not be fetched or prepared (the runner reports it as the reason)."""


@dataclass
class Kernel:
    key: str            # kernels.txt key: "5.10", "6.1", "6.12", "newest", "arm64.6.1"
    version: str        # e.g. "6.1.0-56-amd64" (the modules directory's name)
    package: str        # the .deb files it came from
    vmlinux: str        # uncompressed ELF (amd64); arm64: "" (qemu boots the Image.gz)
    bzimage: str        # boot/vmlinuz-VERSION: a bzImage (amd64) or a gzip'ed Image (arm64)
    pvh: bool           # vmlinux has the PVH entry note (else qemu boots the bzImage)
    modules: str        # lib/modules/VERSION inside the unpacked package
    config: str         # boot/config-VERSION
    root: str           # the unpacked tree
    arch: str = "amd64"  # Debian's name of the kernel's architecture

    @property
    def boot_image(self) -> str:
        return self.vmlinux if self.pvh else self.bzimage


def _run(argv: list[str], cwd: Optional[str] = None, timeout: float = 300,
         env: Optional[dict] = None) -> str:
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise KernelError(f"{' '.join(argv)} failed (exit {r.returncode}): "
                          f"{(r.stderr or r.stdout).strip()[-800:]}")
    return r.stdout


def cache_dir(build: str) -> str:
    """MEMLAT_VM_CACHE, else the machine-wide /var/cache/memlat/vm when it can be written (root),
    else BUILD/vm-cache. Machine-wide, every build directory and clean clone shares one copy
    of each kernel (about 400 MB unpacked each)."""
    env = os.environ.get("MEMLAT_VM_CACHE")
    if env:
        return os.path.abspath(env)
    return writable_directory(MACHINE_CACHE) or os.path.join(build, "vm-cache")


def writable_directory(path: str) -> Optional[str]:
    """`path`, made if missing, when this process can write there (root); else None."""
    try:
        os.makedirs(path, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    return None


def image_arch(package: str) -> str:
    """The Debian architecture an image package is built for (its name's last part)."""
    m = IMAGE_RE.match(package)
    return m.group(5) if m else "amd64"


def kernel_table() -> dict[str, tuple[list[str], str]]:
    """kernels.txt as {key: (suites, pinned package)}, in file order."""
    table: dict[str, tuple[list[str], str]] = {}
    with open(KERNELS_TXT) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) != 3:
                raise KernelError(f"{KERNELS_TXT}: expected KEY SUITES PACKAGE: {line.strip()}")
            table[words[0]] = (words[1].split(","), words[2])
    return table


# ---------------------------------------------------------------- scratch apt

class ScratchApt:
    """apt-get/apt-cache with their own sources, lists, cache and an empty dpkg status (so
    nothing of the machine's configuration is read or changed), for one kernel's suites."""

    def __init__(self, directory: str, suites: list[str], arch: str = "amd64",
                 kinds: tuple[str, ...] = ("deb",)):
        """`arch`: the packages' architecture; `kinds`: the index kinds to fetch, "deb"
        (binary packages) and/or "deb-src" (source packages, for source())."""
        self.dir = directory
        self.suites = suites
        self.arch = arch
        for d in ("lists/partial", "archives/partial", "etc/apt.conf.d", "etc/preferences.d"):
            os.makedirs(os.path.join(directory, d), exist_ok=True)
        lines = []
        for s in suites:
            url = SECURITY_MIRROR if s.endswith("-security") else MIRROR
            for kind in kinds:
                lines.append(f"{kind} [signed-by={KEYRING}] {url} {s} main\n")
        self._write("sources.list", "".join(lines))
        if not os.path.exists(os.path.join(directory, "status")):
            self._write("status", "")
        d = directory
        self._write("apt.conf", "\n".join([
            f'Dir::Etc::SourceList "{d}/sources.list";',
            'Dir::Etc::SourceParts "/nonexistent";',
            f'Dir::Etc::Parts "{d}/etc/apt.conf.d";',
            f'Dir::Etc::Preferences "{d}/etc/preferences";',
            f'Dir::Etc::PreferencesParts "{d}/etc/preferences.d";',
            f'Dir::State::Lists "{d}/lists";',
            f'Dir::State::status "{d}/status";',
            f'Dir::Cache "{d}/cache";',
            f'APT::Architecture "{arch}";',
            f'APT::Architectures {{ "{arch}"; }};',
            'Acquire::Languages "none";',
            # The mirror's sid Release was past its Valid-Until (a stale mirror); signatures
            # are still checked, and these packages are only booted in a throw-away guest.
            'Acquire::Check-Valid-Until "false";',
            "",
        ]))
        self.env = dict(os.environ, APT_CONFIG=os.path.join(directory, "apt.conf"),
                        LC_ALL="C")

    def _write(self, name: str, text: str) -> None:
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def update(self) -> None:
        _run(["apt-get", "update", "-q"], env=self.env, timeout=900)

    def has_lists(self) -> bool:
        return bool(glob.glob(os.path.join(self.dir, "lists", "*_Packages*")))

    def show(self, package: str) -> Optional[dict[str, str]]:
        """The candidate's fields (apt-cache show's first record), None when unknown."""
        r = subprocess.run(["apt-cache", "show", "--no-all-versions", package],
                           capture_output=True, text=True, env=self.env, timeout=120)
        if r.returncode != 0 or not r.stdout.strip():
            return None
        fields: dict[str, str] = {}
        for line in r.stdout.split("\n\n")[0].splitlines():
            if line and not line[0].isspace() and ":" in line:
                k, _, v = line.partition(":")
                fields[k] = v.strip()
        return fields

    def images(self) -> list[str]:
        out = _run(["apt-cache", "search", "--names-only", rf"^linux-image-[0-9].*-{self.arch}$"],
                   env=self.env, timeout=120)
        return [line.split()[0] for line in out.splitlines()
                if line.split() and IMAGE_RE.match(line.split()[0])]

    def has_source_lists(self) -> bool:
        return bool(glob.glob(os.path.join(self.dir, "lists", "*_Sources*")))

    def source(self, package: str, version: str, dest: str) -> list[str]:
        """Downloads (never unpacks or builds) the files of source package PACKAGE=VERSION
        into DEST; apt checks them against the signed Sources index. Their paths."""
        tmp = os.path.join(dest, "source.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        os.chmod(tmp, 0o777)  # apt downloads as _apt (see download())
        _run(["apt-get", "source", "--download-only", "-q", f"{package}={version}"], cwd=tmp,
             env=self.env, timeout=1800)
        got = []
        for name in sorted(os.listdir(tmp)):
            target = os.path.join(dest, name)
            os.replace(os.path.join(tmp, name), target)
            got.append(target)
        shutil.rmtree(tmp, ignore_errors=True)
        return got

    def download(self, packages: list[str], dest: str) -> list[str]:
        # apt drops privileges to _apt, which cannot write the cache directory: download
        # into a private temporary directory apt may write, then move the files.
        tmp = os.path.join(dest, "download.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        os.chmod(tmp, 0o777)
        _run(["apt-get", "download", "-q"] + packages, cwd=tmp, env=self.env, timeout=1800)
        got = []
        for p in packages:
            files = glob.glob(os.path.join(tmp, f"{p}_*.deb"))
            if not files:
                raise KernelError(f"apt-get download {p} produced no .deb")
            target = os.path.join(dest, os.path.basename(files[0]))
            os.replace(files[0], target)
            got.append(target)
        shutil.rmtree(tmp, ignore_errors=True)
        return got


def _image_order(name: str) -> tuple[int, ...]:
    m = IMAGE_RE.match(name)
    return tuple(int(x) for x in m.groups()[:4] if x is not None) if m else ()


def resolve_packages(key: str, suites: list[str], pinned: str, apt: ScratchApt,
                     log) -> tuple[str, list[str]]:
    """(the image package to use, every package to download for it). The pinned one when the
    archive still has it, else the newest image of the same series (of any series for
    "newest") in the suites."""
    name = pinned
    if apt.show(pinned) is None:
        want = IMAGE_RE.match(pinned)
        cands = [n for n in apt.images() if key == "newest"
                 or (want and IMAGE_RE.match(n).groups()[:2] == want.groups()[:2])]
        if not cands:
            raise KernelError(f"the pinned {pinned} is not in {','.join(suites)}, and no other "
                              f"image of that series is")
        name = max(cands, key=_image_order)
        log(f"vm: NOTE: the pinned {pinned} (tests/vm/kernels.txt) is gone from "
            f"{','.join(suites)}: using the newest of that series, {name}; update the pin "
            f"(and the embedded BTF made for it)")
    fields = apt.show(name) or {}
    depends = fields.get("Depends", "")
    abi = name[len("linux-image-"):]
    parts = [f"linux-{p}-{abi}" for p in SPLIT_PARTS if re.search(
        rf"(^|[ ,|])linux-{p}-{re.escape(abi)}([ (,]|$)", depends)]
    # A split image (7.x) is a metapackage: the kernel is in linux-binary-*, whose Depends
    # pulls linux-base-*; both are needed, as are the modules.
    if parts and f"linux-binary-{abi}" in parts and f"linux-base-{abi}" not in parts:
        parts.append(f"linux-base-{abi}")
    return name, [name] + parts


# ---------------------------------------------------------------- vmlinux from bzImage

_MAGICS = [  # (name, magic bytes) as in the kernel's scripts/extract-vmlinux
    ("xz", b"\xfd7zXZ\x00"),
    ("gzip", b"\x1f\x8b\x08"),
    ("zstd", b"\x28\xb5\x2f\xfd"),
]


def _zstd(data: bytes) -> Optional[bytes]:
    r = subprocess.run(["zstd", "-dcq"], input=data, capture_output=True, timeout=120)
    return r.stdout if r.stdout else None


def _decompress(kind: str, data: bytes) -> Optional[bytes]:
    try:
        if kind == "xz":
            d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
            return d.decompress(data)
        if kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
        if kind == "zstd":
            return _zstd(data)
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


def _kernel_image(path: str) -> bytes:
    """The uncompressed kernel image of a vmlinuz (gzip'ed on arm64), or the file itself."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:3] == b"\x1f\x8b\x08":
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data)
    return data


def extract_image_btf(vmlinuz: str, out: str) -> None:
    """Writes the raw BTF (.BTF section) of a kernel image that is not an ELF file (arm64's
    Image has no section headers): the BTF header (magic 0xeB9F, version 1, 24-byte header)
    gives its size; of the candidates, the largest is the kernel's (the others are stray
    bytes that happen to match)."""
    data = _kernel_image(vmlinuz)
    best = b""
    start = data.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00")
    while start != -1:
        _, _, _, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from(
            "<HBBIIIII", data, start)
        size = hdr_len + max(type_off + type_len, str_off + str_len)
        if (type_off == 0 and str_off == type_len and start + size <= len(data)
                and size > len(best)):
            best = data[start:start + size]
        start = data.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00", start + 1)
    if len(best) < 1 << 20:
        raise KernelError(f"no kernel BTF found in {vmlinuz} (CONFIG_DEBUG_INFO_BTF unset?)")
    with open(out + ".tmp", "wb") as f:
        f.write(best)
    os.replace(out + ".tmp", out)


def has_pvh_note(vmlinux: str) -> bool:
    """Whether the ELF has the Xen PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY, type 18) that
    qemu's -kernel needs to boot an ELF directly."""
    with open(vmlinux, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return False
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data,
                                                                 phoff + i * phentsize)
        if p_type != 4:  # PT_NOTE
            continue
        off, end = p_offset, p_offset + p_filesz
        while off + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, off)
            name = data[off + 12:off + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and ntype == 18:
                return True
            off += 12 + ((namesz + 3) & ~3) + ((descsz + 3) & ~3)
    return False


# ---------------------------------------------------------------- fetch and unpack

def _record_path(cache: str, key: str) -> str:
    return os.path.join(cache, f"kernel-{key}.json")


def _load_kernel(cache: str, key: str, pinned: str, log) -> Optional[Kernel]:
    """The cached kernel of `key`, when it was fetched for the current pin; no network."""
    try:
        with open(_record_path(cache, key)) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    if rec.get("pinned") != pinned or rec.get("layout") != CACHE_LAYOUT:
        return None
    root = rec["root"]
    if not os.path.isfile(os.path.join(root, ".complete")):
        return None
    if rec["image"] != pinned:
        log(f"vm: NOTE: the pinned {pinned} was gone from the archive when it was fetched: "
            f"using {rec['image']} (cached)")
    arch = rec.get("arch", "amd64")
    return Kernel(key=key, version=rec["version"], package=" ".join(rec["debs"]),
                  vmlinux=os.path.join(root, "vmlinux") if arch == "amd64" else "",
                  bzimage=rec["bzimage"], pvh=rec["pvh"], modules=rec["modules"],
                  config=rec["config"], root=root, arch=arch)


def fetch_kernel(key: str, cache: str, log=print) -> Kernel:
    """Downloads (once per pin) and unpacks kernel `key` of kernels.txt into the cache."""
    table = kernel_table()
    if key not in table:
        raise KernelError(f"no kernel {key!r} in tests/vm/kernels.txt (have {', '.join(table)})")
    suites, pinned = table[key]
    os.makedirs(cache, exist_ok=True)
    kernel = _load_kernel(cache, key, pinned, log)
    if kernel:
        return kernel
    # One fetch at a time per kernel across build directories (ctest runs, developers).
    with open(os.path.join(cache, f"kernel-{key}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        kernel = _load_kernel(cache, key, pinned, log)
        if kernel:
            return kernel
        return _fetch(key, suites, pinned, cache, log)


def _fetch(key: str, suites: list[str], pinned: str, cache: str, log) -> Kernel:
    arch = image_arch(pinned)
    apt = ScratchApt(os.path.join(cache, "apt", key), suites, arch)
    log(f"vm: apt-get update of {','.join(suites)} (scratch configuration {apt.dir})")
    apt.update()
    image, packages = resolve_packages(key, suites, pinned, apt, log)
    debdir = os.path.join(cache, "debs")
    os.makedirs(debdir, exist_ok=True)
    debs = []
    missing = []
    for p in packages:
        have = sorted(glob.glob(os.path.join(debdir, f"{p}_*.deb")))
        if have:
            debs.append(have[-1])
        else:
            missing.append(p)
    if missing:
        log(f"vm: downloading {' '.join(missing)} into {debdir}")
        debs += apt.download(missing, debdir)
    image_deb = next(d for d in debs if os.path.basename(d).startswith(image + "_"))
    root = os.path.join(cache, "trees", os.path.basename(image_deb)[:-4])
    if not os.path.isfile(os.path.join(root, ".complete")):
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(root + ".tmp", ignore_errors=True)
        os.makedirs(root + ".tmp")
        for deb in debs:
            log(f"vm: unpacking {os.path.basename(deb)}")
            _run(["dpkg-deb", "-x", deb, root + ".tmp"])
        os.replace(root + ".tmp", root)
    # Up to 6.x: boot/vmlinuz-VERSION, boot/config-VERSION, lib/modules/VERSION (6.12:
    # usr/lib/modules). The split 7.x packages keep everything in usr/lib/modules/VERSION/
    # (vmlinuz, config, System.map) and ship no modules.dep (depmod makes it on install).
    bz = glob.glob(os.path.join(root, "boot", "vmlinuz-*"))
    if bz:
        version = os.path.basename(bz[0])[len("vmlinuz-"):]
        config = os.path.join(root, "boot", f"config-{version}")
    else:
        bz = glob.glob(os.path.join(root, "usr", "lib", "modules", "*", "vmlinuz"))
        version = os.path.basename(os.path.dirname(bz[0])) if bz else ""
        config = os.path.join(os.path.dirname(bz[0]), "config") if bz else ""
    if len(bz) != 1:
        raise KernelError(f"expected one boot/vmlinuz-* or usr/lib/modules/*/vmlinuz in "
                          f"{' '.join(debs)}, found {bz}")
    modules = next((d for d in (os.path.join(root, "lib", "modules", version),
                                os.path.join(root, "usr", "lib", "modules", version))
                    if os.path.isdir(d)), None)
    if modules is None:
        raise KernelError(f"no lib/modules/{version} in {' '.join(debs)}")
    if not os.path.isfile(config):
        raise KernelError(f"no kernel config ({config}) in {' '.join(debs)}")
    pvh = False
    if arch == "amd64":
        vmlinux = os.path.join(root, "vmlinux")
        if not os.path.isfile(vmlinux):
            log(f"vm: extracting vmlinux from {os.path.basename(bz[0])}")
            extract_vmlinux(bz[0], vmlinux)
        pvh = has_pvh_note(vmlinux)
        if not pvh:
            log(f"vm: NOTE: {version}'s vmlinux has no PVH note: qemu boots the bzImage")
    else:
        # qemu's arm64 loader takes the gzip'ed Image as it is. Its BTF is kept beside it
        # (vmlinux.btf) for Makefile.btf (vmlinux/arm64/vmlinux.h) and tools' --btf.
        btf = os.path.join(root, "vmlinux.btf")
        if not os.path.isfile(btf):
            log(f"vm: extracting the BTF of {os.path.basename(bz[0])}")
            extract_image_btf(bz[0], btf)
    with open(os.path.join(root, ".complete"), "w") as f:
        f.write(f"{image}\n")
    rec = {"layout": CACHE_LAYOUT, "pinned": pinned, "image": image, "suites": suites,
           "debs": [os.path.basename(d) for d in debs], "root": root, "version": version,
           "bzimage": bz[0], "pvh": pvh, "modules": modules, "config": config, "arch": arch}
    tmp = _record_path(cache, key) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f, indent=1)
    os.replace(tmp, _record_path(cache, key))
    return _load_kernel(cache, key, pinned, log)


# ---------------------------------------------------------------- a foreign busybox

def fetch_busybox(kernel: Kernel, cache: str, log) -> str:
    """The static busybox of the kernel's architecture when that is not the machine's: Debian's
    busybox-static of the kernel's suites, downloaded through the kernel's scratch apt
    configuration and unpacked into the cache (installing busybox-static:arm64 would replace
    the machine's amd64 busybox: the two packages share their files)."""
    table = kernel_table()
    suites, _ = table[kernel.key]
    root = os.path.join(cache, "trees", f"busybox-static-{kernel.arch}")
    binary = os.path.join(root, "bin", "busybox")
    if os.path.isfile(binary):
        return binary
    with open(os.path.join(cache, f"busybox-{kernel.arch}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(binary):
            return binary
        apt = ScratchApt(os.path.join(cache, "apt", kernel.key), suites, kernel.arch)
        if not apt.has_lists():
            apt.update()
        debdir = os.path.join(cache, "debs")
        os.makedirs(debdir, exist_ok=True)
        have = sorted(glob.glob(os.path.join(debdir, f"busybox-static_*_{kernel.arch}.deb")))
        if not have:
            log(f"vm: downloading busybox-static ({kernel.arch}) into {debdir}")
            have = apt.download(["busybox-static"], debdir)
        shutil.rmtree(root + ".tmp", ignore_errors=True)
        _run(["dpkg-deb", "-x", have[-1], root + ".tmp"])
        shutil.rmtree(root, ignore_errors=True)
        os.replace(root + ".tmp", root)
    if not os.path.isfile(binary):
        raise KernelError(f"no bin/busybox in {have[-1]}")
    return binary


# tmux and the packages of what it loads (memlat top's screen scenario), for a guest whose
# architecture is not the machine's; the C.UTF-8 locale (tmux needs one) is in libc-bin.
TMUX_PACKAGES = ["tmux", "libevent-core-2.1-7", "libutempter0", "libtinfo6", "libc6", "libc-bin"]


def fetch_tmux(kernel: Kernel, cache: str, log) -> str:
    """A tree with Debian's tmux of the kernel's architecture and suites and the libraries it
    loads (TMUX_PACKAGES unpacked, downloaded through the kernel's scratch apt configuration:
    installing them would replace the machine's own); returns the tree's root."""
    table = kernel_table()
    suites, _ = table[kernel.key]
    root = os.path.join(cache, "trees", f"tmux-{kernel.arch}")
    if os.path.isfile(os.path.join(root, "usr", "bin", "tmux")):
        return root
    with open(os.path.join(cache, f"tmux-{kernel.arch}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(os.path.join(root, "usr", "bin", "tmux")):
            return root
        apt = ScratchApt(os.path.join(cache, "apt", kernel.key), suites, kernel.arch)
        if not apt.has_lists():
            apt.update()
        debdir = os.path.join(cache, "debs", f"tmux-{kernel.arch}")
        os.makedirs(debdir, exist_ok=True)
        log(f"vm: downloading {', '.join(TMUX_PACKAGES)} ({kernel.arch}) into {debdir}")
        debs = apt.download(TMUX_PACKAGES, debdir)
        shutil.rmtree(root + ".tmp", ignore_errors=True)
        for deb in debs:
            _run(["dpkg-deb", "-x", deb, root + ".tmp"])
        shutil.rmtree(root, ignore_errors=True)
        os.replace(root + ".tmp", root)
    return root


# ---------------------------------------------------------------- modules

def find_module(kernel: Kernel, name: str) -> Optional[str]:
    """NAME.ko of the package, decompressed: Debian compresses modules (.ko.xz from 6.x on
    some builds, .ko.zst later) and busybox's insmod loads only plain ELF reliably, so the
    module is decompressed once into the cached tree (plain-modules/)."""
    paths = glob.glob(os.path.join(kernel.modules, "kernel", "**", name + ".ko*"), recursive=True)
    if not paths:
        return None
    src = paths[0]
    if src.endswith(".ko"):
        return src
    out = os.path.join(kernel.root, "plain-modules", name + ".ko")
    if os.path.isfile(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(src, "rb") as f:
        data = f.read()
    if src.endswith(".xz"):
        plain = lzma.decompress(data)
    elif src.endswith(".zst"):
        plain = _zstd(data)
    elif src.endswith(".gz"):
        plain = zlib.decompress(data, 16 + zlib.MAX_WBITS)
    else:
        raise KernelError(f"{src}: unknown module compression")
    if not plain or plain[:4] != b"\x7fELF":
        raise KernelError(f"{src}: decompressing did not give an ELF module")
    with open(out + ".tmp", "wb") as f:
        f.write(plain)
    os.replace(out + ".tmp", out)
    return out


def module_deps(kernel: Kernel, name: str) -> list[str]:
    """The modules NAME.ko needs loaded first, by name: its own .modinfo "depends=" (7.x
    packages have no modules.dep)."""
    path = find_module(kernel, name)
    if path is None:
        return []
    with open(path, "rb") as f:
        m = re.search(rb"\0depends=([^\0]*)\0", f.read())
    return [d.decode() for d in m.group(1).split(b",") if d] if m else []


def config_value(kernel: Kernel, option: str) -> Optional[str]:
    """CONFIG_OPTION's value in the kernel's config ("y", "m", a string), None if unset."""
    with open(kernel.config) as f:
        for line in f:
            if line.startswith(option + "="):
                return line.split("=", 1)[1].strip()
    return None
