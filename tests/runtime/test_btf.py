#!/usr/bin/env python3
"""Runtime tests of where the tools get BTF (lib/kernel/btf.h), for every tool:
a --btf file that is missing (usage error) or not BTF (runtime error), no BTF at all (the
kernel's hidden with MEMLAT_DISABLE_FEATURES=kernel_btf, nothing embedded for this kernel),
and the embedded index, which that error lists. The same scenarios as normal runs with a BTF
file are the tools' own, run with --btf-file (see btf.cmake)."""
from __future__ import annotations

import lzma
import os
import platform
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from libbpf_candidates import compare_candidates  # noqa: E402
from memlat_test import (Failure, Test, binary, check_bad_arguments, check_help, log, main, run,  # noqa: E402
                         scenario, skip, source_tools)

TOOLS = source_tools()  # every tools/NAME/NAME.bpf.c, so that no tool is left out
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# BPF objects a run loads, each with one parse of the BTF lent to libbpf and freed once it is
# attached: oomwhy loads memstall's counting beside its own for its lead-up (--lead-up).
OBJECTS = {"oomwhy": 2}


def expected_index() -> list[str]:
    """'Debian 11 5.10.0-46-amd64' for each line of btf/kernels.txt."""
    kernels = []
    with open(os.path.join(SOURCE, "btf", "kernels.txt")) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 3 and not line.startswith("#"):
                kernels.append(f"{fields[0].capitalize()} {fields[1]} {fields[2]}")
    return kernels


@scenario("btf_missing_file")
def missing_file(t: Test) -> None:
    for tool in TOOLS:
        check_bad_arguments(t, tool, [(["--btf", "/nonexistent/vmlinux.btf"],
                                       "--btf /nonexistent/vmlinux.btf: cannot read it "
                                       "(No such file or directory)")])
        check_help(t, tool, ["--btf=FILE", "MEMLAT_BTF"], width=None)


@scenario("btf_not_btf")
def not_btf(t: Test) -> None:
    garbage = os.path.join(os.environ["MEMLAT_BUILD_DIR"], "runtime-btf", "garbage.btf")
    os.makedirs(os.path.dirname(garbage), exist_ok=True)
    with open(garbage, "wb") as f:
        f.write(b"this is not BTF\n" * 100)
    for tool in TOOLS:
        for how, args, env in (("--btf", ["--btf", garbage], {}),
                               ("MEMLAT_BTF", [], {"MEMLAT_BTF": garbage})):
            res = run([binary(tool), *args, "-d", "1"], env=env)
            t.check_eq(f"{tool} with {how} garbage: exit status", 1, res.rc)
            t.check_in(f"{tool} with {how} garbage: message",
                       f"{tool}: Cannot read BTF from {garbage}: it is not a BTF file (raw "
                       f"BTF, or an ELF vmlinux with a .BTF section) (given with {how})",
                       res.stderr, "stderr")
            t.check_eq(f"{tool} with {how} garbage: nothing from libbpf on stderr", False,
                       "libbpf:" in res.stderr)


@scenario("btf_none_found")
def none_found(t: Test) -> None:
    release = platform.release()
    kernels = expected_index()
    t.require(release not in " ".join(kernels), f"this kernel ({release}) is not embedded",
              "not in btf/kernels.txt", release)
    for tool in TOOLS:
        res = run([binary(tool), "-d", "1"], env={"MEMLAT_DISABLE_FEATURES": "kernel_btf"})
        t.check_eq(f"{tool} without BTF: exit status", 1, res.rc)
        for needle in (f"{tool}: No BTF for this kernel ({release}, ",
                       "--btf FILE or MEMLAT_BTF=FILE: not given",
                       "/sys/kernel/btf/vmlinux: present, but ignored "
                       "(MEMLAT_DISABLE_FEATURES=kernel_btf)",
                       f"  pahole --btf_encode_detached={release}.btf "
                       f"/usr/lib/debug/boot/vmlinux-{release}\n",
                       f"then pass it with --btf {release}.btf"):
            t.check_in(f"{tool} without BTF: the error says", needle, res.stderr, "stderr")


@scenario("btf_embedded_index")
def embedded_index(t: Test) -> None:
    kernels = expected_index()
    t.require(len(kernels) >= 2, "btf/kernels.txt lists kernels", ">= 2", len(kernels))
    for tool in TOOLS:
        res = run([binary(tool), "-d", "1"], env={"MEMLAT_DISABLE_FEATURES": "kernel_btf"})
        t.check_in(f"{tool}: the embedded index (listed by the no-BTF error)",
                   f"BTF embedded in this tool: {', '.join(kernels)} (none for",
                   res.stderr, "stderr")


@scenario("btf_libbpf_leaves_sysfs")
def libbpf_leaves_sysfs(t: Test) -> None:
    """With btf_custom_path and no tp_btf/fentry program autoloaded, libbpf must not read the
    kernel's BTF: on a kernel without it that would fail the load."""
    strace = shutil.which("strace")
    if strace is None:
        skip("strace is not installed")
    copy = os.path.join(os.environ["MEMLAT_BUILD_DIR"], "runtime-btf", "vmlinux.btf")
    os.makedirs(os.path.dirname(copy), exist_ok=True)
    shutil.copyfile("/sys/kernel/btf/vmlinux", copy)
    for tool in TOOLS:
        res = run([strace, "-f", "-e", "trace=open,openat", "-o", "/dev/stderr", binary(tool),
                   "--btf", copy, "-d", "0.2"], env={"MEMLAT_DISABLE_FEATURES": "kernel_btf"})
        t.check_eq(f"{tool} --btf, kernel_btf disabled: exit status", 0, res.rc)
        opened = [line for line in res.stderr.splitlines() if "/sys/kernel/btf/vmlinux" in line]
        t.check_eq(f"{tool}: opens of /sys/kernel/btf/vmlinux", [], opened)
        # One parse for user space and libbpf (KernelBtf lends it to libbpf) per BPF object.
        t.check_eq(f"{tool}: opens of the --btf file (one parse a BPF object, shared with "
                   "libbpf)", OBJECTS.get(tool, 1),
                   sum(f'"{copy}"' in line for line in res.stderr.splitlines()))


# Bytes after each btf_type of a kind (include/uapi/linux/btf.h), by kind; vlen: its count.
KIND_EXTRA = {1: lambda v: 4, 2: lambda v: 0, 3: lambda v: 12, 4: lambda v: 12 * v,
              5: lambda v: 12 * v, 6: lambda v: 8 * v, 7: lambda v: 0, 8: lambda v: 0,
              9: lambda v: 0, 10: lambda v: 0, 11: lambda v: 0, 12: lambda v: 0,
              13: lambda v: 8 * v, 14: lambda v: 4, 15: lambda v: 12 * v, 16: lambda v: 0,
              17: lambda v: 4, 18: lambda v: 0, 19: lambda v: 12 * v}
UNKNOWN_KIND = 30


def broken_btf(good: bytes) -> dict[str, bytes]:
    """Two copies of a raw BTF that libbpf must refuse: one whose struct task_struct's member
    `pid` names a type past the last, one with a type of a kind no libbpf knows appended."""
    hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<IIIII", good, 4)
    strings = good[hdr_len + str_off:hdr_len + str_off + str_len]

    def name(off: int) -> bytes:
        return strings[off:strings.index(b"\0", off)]

    bad_ref = bytearray(good)
    pos, end, found = hdr_len + type_off, hdr_len + type_off + type_len, False
    while pos < end and not found:
        name_off, info, _ = struct.unpack_from("<III", good, pos)
        kind, vlen = (info >> 24) & 0x1f, info & 0xffff
        members = pos + 12
        if kind == 4 and name(name_off) == b"task_struct":
            for i in range(vlen):
                if name(struct.unpack_from("<I", good, members + 12 * i)[0]) == b"pid":
                    struct.pack_into("<I", bad_ref, members + 12 * i + 4, 0x7fffff0)
                    found = True
                    break
        pos = members + KIND_EXTRA[kind](vlen)
    if not found:
        raise Failure("no struct task_struct with a member pid in the kernel's BTF")
    new_kind = bytearray(good)
    at = hdr_len + type_off + type_len
    new_kind[at:at] = struct.pack("<III", 0, UNKNOWN_KIND << 24, 0)
    struct.pack_into("<I", new_kind, 12, type_len + 12)
    if str_off >= type_off + type_len:
        struct.pack_into("<I", new_kind, 16, str_off + 12)
    return {"a member naming a missing type": bytes(bad_ref),
            f"a type of kind {UNKNOWN_KIND}": bytes(new_kind)}


@scenario("btf_kernel_corrupt")
def kernel_corrupt(t: Test) -> None:
    """A kernel publishes /sys/kernel/btf/vmlinux whether or not it can use it. Each tool
    started where that file is broken BTF (a private mount namespace, a copy bound over it)
    exits 1 saying so, and never crashes: a build with libbpf's check of the kernel's BTF
    skipped (cmake/libbpf/0004) died of SIGSEGV here. The same files given with --btf are
    refused the same way."""
    sysfs = "/sys/kernel/btf/vmlinux"
    if not os.access(sysfs, os.R_OK):
        skip("the kernel has no /sys/kernel/btf/vmlinux")
    if shutil.which("unshare") is None:
        skip("unshare (util-linux) is not installed")
    with open(sysfs, "rb") as f:
        good = f.read()
    scratch = os.path.join(os.environ["MEMLAT_BUILD_DIR"], "runtime-btf")
    os.makedirs(scratch, exist_ok=True)
    for what, data in broken_btf(good).items():
        path = os.path.join(scratch, "broken-" + what.split()[-1] + ".btf")
        with open(path, "wb") as f:
            f.write(data)
        for tool in TOOLS:
            res = run(["unshare", "-m", "sh", "-c",
                       f'mount --bind "$1" {sysfs} && exec "$2" -d 1', "sh", path,
                       binary(tool)])
            t.check_eq(f"{tool}, {sysfs} with {what}: exit status (1, no signal)", 1, res.rc)
            t.check_in(f"{tool}, {sysfs} with {what}: the message",
                       f"{tool}: Cannot read BTF from {sysfs}: it is BTF, but libbpf",
                       res.stderr, "stderr")
            given = run([binary(tool), "--btf", path, "-d", "1"])
            t.check_eq(f"{tool} --btf with {what}: exit status", 1, given.rc)
            t.check_in(f"{tool} --btf with {what}: the message",
                       f"Cannot read BTF from {path}: it is BTF, but libbpf", given.stderr,
                       "stderr")


def libbpf_linked_dynamically(tool: str) -> bool:
    """A dynamically linked libbpf (-DMEMLAT_SYSTEM_LIBBPF=ON -DMEMLAT_STATIC=OFF) calls its own
    BTF loader, which the tools cannot lend their parse to."""
    out = run(["readelf", "-d", binary(tool)]).stdout
    return "libbpf.so" in out


@scenario("btf_read_once")
def read_once(t: Test) -> None:
    """The kernel's BTF is opened once per run, by user space and libbpf together (however
    many BPF objects the hook fall-back loads), and, where it is mapped, unmapped before the
    tool says it is ready: nothing of it stays for the steady state."""
    strace = shutil.which("strace")
    if strace is None:
        skip("strace is not installed")
    if not os.access("/sys/kernel/btf/vmlinux", os.R_OK):
        skip("the kernel has no /sys/kernel/btf/vmlinux")
    if libbpf_linked_dynamically(TOOLS[0]):
        skip("libbpf is linked dynamically: it loads the kernel's BTF itself")
    for tool in TOOLS:
        res = run([strace, "-f", "-e", "trace=openat,mmap,munmap,write", "-o", "/dev/stderr",
                   binary(tool), "-d", "0.2"], env={"MEMLAT_READY": "1"})
        t.check_eq(f"{tool}: exit status", 0, res.rc)
        lines = res.stderr.splitlines()
        opens = [line for line in lines if '"/sys/kernel/btf/vmlinux"' in line]
        t.check_eq(f"{tool}: opens of /sys/kernel/btf/vmlinux (one a BPF object)",
                   OBJECTS.get(tool, 1), len(opens))
        ready = next((i for i, line in enumerate(lines)
                      if "write(" in line and "memlat: ready" in line), None)
        for n, opened in enumerate(opens):
            if "= " not in opened:
                continue
            fd = opened.rsplit("= ", 1)[1].split()[0]
            at = lines.index(opened)
            # The mapping of this open (the fd number is reused by later opens).
            mapped = [line for line in lines[at:] if "mmap(" in line and f", {fd}, 0)" in line]
            if not mapped:
                continue  # read, not mapped (libbpf < 1.6 or Linux < 6.16): freed with the parse
            address = mapped[0].rsplit("= ", 1)[1].split()[0]
            unmapped = next((i for i, line in enumerate(lines)
                             if i > at and f"munmap({address}," in line), None)
            t.check_eq(f"{tool}: the mapped BTF (open {n + 1}) is unmapped before "
                       "'memlat: ready'", True,
                       unmapped is not None and ready is not None and unmapped < ready)


@scenario("libbpf_index_candidates")
def index_candidates(t: Test) -> None:
    """cmake/libbpf/0003 finds the CO-RE candidates of a relocation through an index of the
    target BTF's names instead of libbpf's scan of every type. Every tool's BPF object,
    relocated against each kernel's BTF memlat keeps (btf/kernels.txt's, recorded in btf/) and
    this host's, must resolve every relocation through the same candidates in the same order
    and end with the same instructions as with the scan: core_candidates built against
    memlat's libbpf and against the same libbpf without 0003 print both (tests/libbpf/). The
    VM matrix does the same on each x86 guest kernel's BTF (libbpf.core_candidates)."""
    if os.geteuid() != 0:
        skip("needs root: preparing an object creates its maps")
    build = os.environ["MEMLAT_BUILD_DIR"]
    objects = [os.path.join(build, "bpf", f"{tool}.bpf.o") for tool in TOOLS]
    with tempfile.TemporaryDirectory() as tmp:
        btfs = {}
        for kernel in expected_index():
            release = kernel.split()[-1]
            distro = kernel.split()[0].lower()
            packed = os.path.join(SOURCE, "btf", distro, f"{release}.btf.xz")
            t.require(os.path.isfile(packed), f"{release}: its BTF is recorded in {packed}",
                      "present", "absent")
            btfs[release] = os.path.join(tmp, f"{release}.btf")
            with lzma.open(packed) as src, open(btfs[release], "wb") as dst:
                shutil.copyfileobj(src, dst)
        if os.path.exists("/sys/kernel/btf/vmlinux"):
            btfs[f"this host ({platform.release()})"] = "/sys/kernel/btf/vmlinux"
        for what, btf in btfs.items():
            compare_candidates(t, what, btf, objects, os.path.join(build, "tests"))


if __name__ == "__main__":
    sys.exit(main())
