#!/usr/bin/env python3
"""Runtime tests of where the tools get BTF (lib/kernel/btf.h), for every tool:
a --btf file that is missing (usage error) or not BTF (runtime error), no BTF at all (the
kernel's hidden with MEMLAT_DISABLE_FEATURES=kernel_btf, nothing embedded for this kernel),
and the embedded index, which that error lists. The same scenarios as normal runs with a BTF
file are the tools' own, run with --btf-file (see btf.cmake)."""
from __future__ import annotations

import os
import platform
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memlat_test import (Test, binary, check_bad_arguments, check_help, main, run,  # noqa: E402
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


if __name__ == "__main__":
    sys.exit(main())
