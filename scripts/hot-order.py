#!/usr/bin/env python3
"""Writes the order in which the static memlat binary's linker lays out its functions and
read-only data: what the tools touch when they start and run, first, together.

    scripts/hot-order.py [--build-dir build] [--out cmake/memlat-x86_64.order]

Why: the kernel maps a file's pages around each page a process faults on (fault-around, 64
KiB), so every page of a binary whose hot code is spread over all of it ends up counted in the
process's RSS: 1.55 MiB of memlat's 1.58 MiB of code in drsnoop's default mode, of which it
touches 0.73. With the touched functions and data laid out together (lld's
--symbol-ordering-file, CMakeLists.txt), the pages mapped around them are mostly hot ones.

How: the binary is relinked without -s (the same layout, with a symbol table). Functions:
each tool runs under valgrind's callgrind in the modes below until it has started, traced a
while and exited on SIGINT; every function it executed is listed, those used by more runs
first, then grouped by the first run that used them (a tool's own code together). Read-only
data: the binary is copied onto a small ext4 image mounted from a loop device whose
read-ahead is 0, so that a page of the file is in the page cache only if a process touched
it; the same runs, then mincore() tells which pages are cached, and every data symbol that
overlaps one follows the functions. Symbols gone from a later build are ignored by the linker
(--no-warn-symbol-ordering); new ones land among the cold code: rerun this script when
start-up code has changed a lot (bench/README.md says how much RSS the order saves).
Needs root (loop mount, BPF) and valgrind.
"""
from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import re
import time

# The modes measured: each tool's default and its counting or alternative views.
RUNS = [
    ["tlbflush"], ["tlbflush", "-t"], ["tlbflush", "-L"],
    ["drsnoop"], ["drsnoop", "-H"],
    ["compactsnoop"], ["compactsnoop", "-H"],
    ["numamove"],
    ["cachestat"], ["cachestat", "-P"],
    ["memstall"],
]
READY = b"memlat: ready"


def relink_with_symbols(build_dir: str, out: str) -> None:
    """memlat's own link command without -s: the same layout, with a symbol table."""
    with open(os.path.join(build_dir, "CMakeFiles/memlat.dir/link.txt")) as f:
        argv = shlex.split(f.readline())
    argv = [a for a in argv if a != "-s"]
    argv[argv.index("-o") + 1] = out
    subprocess.run(argv, cwd=build_dir, check=True)


def run_until_ready(argv: list[str], hold: float) -> None:
    env = dict(os.environ, MEMLAT_READY="1")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    seen = b""
    while READY not in seen and time.monotonic() < deadline and p.poll() is None:
        seen += os.read(p.stderr.fileno(), 4096)
    if READY not in seen:
        p.kill()
        p.wait()
        sys.exit(f"hot-order: {' '.join(argv)} did not get ready: {seen.decode()[-300:]}")
    time.sleep(hold)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=600)  # under valgrind, draining a busy ring buffer takes long


def executed_functions(binary: str, run: list[str], hold: float, scratch: str) -> list[str]:
    """The functions of BINARY that RUN executed, by callgrind (mangled names as nm prints
    them; valgrind's own string functions stand in for glibc's, named without the variant
    that IFUNC picks: see with_variants)."""
    out = os.path.join(scratch, "callgrind.out")
    run_until_ready(["valgrind", "--tool=callgrind", "--demangle=no", "--compress-strings=no",
                     f"--callgrind-out-file={out}", binary, *run], hold)
    names = []
    with open(out) as f:
        for line in f:
            if line.startswith(("fn=", "cfn=")):
                name = line.split("=", 1)[1].strip()
                names.append(re.sub(r"'\d+$", "", name))  # recursion levels: f'2
    os.unlink(out)
    return names


def cached_pages(path: str) -> list[bool]:
    """Whether each page of PATH is in the page cache (mincore on a read-only mapping)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            sys.exit(f"hot-order: mmap {path}: {os.strerror(ctypes.get_errno())}")
        vec = ctypes.create_string_buffer(pages)
        if libc.mincore(addr, size, vec) != 0:
            sys.exit(f"hot-order: mincore: {os.strerror(ctypes.get_errno())}")
        libc.munmap(addr, size)
    finally:
        os.close(fd)
    return [bool(b & 1) for b in vec.raw]


def load_segments(binary: str) -> list[tuple[int, int, int]]:
    """(file offset, virtual address, file size) of each PT_LOAD segment."""
    out = subprocess.run(["readelf", "-lW", binary], check=True, capture_output=True,
                         text=True).stdout
    segments = []
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] == "LOAD":
            segments.append((int(fields[1], 16), int(fields[2], 16), int(fields[4], 16)))
    return segments


def page_of_address(binary: str):
    """A function from a virtual address of BINARY to the page of the file holding it."""
    segments = load_segments(binary)

    def file_page(vaddr: int) -> int | None:
        for offset, start, size in segments:
            if start <= vaddr < start + size:
                return (offset + vaddr - start) // mmap.PAGESIZE
        return None
    return file_page


def symbols(binary: str) -> list[tuple[int, int, str, str]]:
    """(address, size, nm type, name) of the defined symbols, by address."""
    out = subprocess.run(["nm", "-n", "-S", "--defined-only", binary], check=True,
                         capture_output=True, text=True).stdout
    table = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4:
            table.append((int(fields[0], 16), max(int(fields[1], 16), 1), fields[2], fields[3]))
    return table


def hot_functions(runs: list[list[str]], table) -> list[str]:
    """The executed functions, those more runs used first, then by the first run using them."""
    text = [(a, sz, name) for a, sz, kind, name in table if kind in "tTW"]
    by_name = {name for _, _, name in text}
    used: dict[str, list[int]] = {}
    for index, names in enumerate(runs):
        for name in with_variants(names, by_name, text):
            used.setdefault(name, [])
            if not used[name] or used[name][-1] != index:
                used[name].append(index)
    return by_use(used)


def with_variants(names: list[str], by_name: set[str], text) -> list[str]:
    """NAMES as symbols of the binary: an address (code callgrind could not name) becomes the
    function holding it; a glibc string function (memcpy) becomes its IFUNC variants
    (__memcpy_avx_unaligned_erms...), since valgrind ran its own in their place."""
    out = []
    for name in names:
        if name in by_name:
            out.append(name)
        elif name.startswith("0x"):
            address = int(name, 16)
            out += [n for a, sz, n in text if a <= address < a + sz]
        else:
            out += [n for n in by_name if n.startswith(f"__{name}_")]
    return out


def symbol_pages(binary: str, table, kinds: str):
    """(name, first page, last page) of the file for each symbol of a type in KINDS."""
    file_page = page_of_address(binary)
    for address, size, kind, name in table:
        if kind in kinds:
            first, last = file_page(address), file_page(address + size - 1)
            if first is not None and last is not None:
                yield name, first, last


def by_use(used: dict[str, list[int]]) -> list[str]:
    """Names used by more runs first, then by the first run that used them."""
    return sorted(used, key=lambda n: (-len(used[n]), used[n][0], n))


def unexplained_functions(binary: str, per_run: list[list[bool]], table,
                          functions: list[str]) -> list[str]:
    """Functions on code pages a run touched where callgrind saw nothing run (code that runs
    differently under valgrind, e.g. glibc's start-up): page by page, every function on it."""
    known = set(functions)
    pages: dict[int, list[tuple[str, bool]]] = {}
    for name, first, last in symbol_pages(binary, table, "tTW"):
        for p in range(first, last + 1):
            pages.setdefault(p, []).append((name, name in known))
    extra: dict[str, list[int]] = {}
    for index, touched in enumerate(per_run):
        for p, names in pages.items():
            if p < len(touched) and touched[p] and not any(k for _, k in names):
                for name, _ in names:
                    extra.setdefault(name, []).append(index)
    return by_use(extra)


def hot_data(binary: str, per_run: list[list[bool]], table) -> list[str]:
    """Read-only data symbols on pages the runs touched, ordered like the functions."""
    used: dict[str, list[int]] = {}
    for name, first, last in symbol_pages(binary, table, "rRvV"):
        for index, touched in enumerate(per_run):
            if any(touched[p] for p in range(first, min(last, len(touched) - 1) + 1)):
                used.setdefault(name, []).append(index)
    return by_use(used)


def touched_pages(linked: str, hold: float, scratch: str) -> list[list[bool]]:
    """Which pages of the file each run touched: each runs from a cold copy on a file system
    without read-ahead (remounted between runs, which empties its page cache)."""
    image, mnt = os.path.join(scratch, "fs.img"), os.path.join(scratch, "mnt")
    os.mkdir(mnt)
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
    loop = subprocess.run(["losetup", "--find", "--show", image], check=True,
                          capture_output=True, text=True).stdout.strip()
    binary = os.path.join(mnt, "memlat")
    per_run = []
    try:
        with open(f"/sys/block/{os.path.basename(loop)}/queue/read_ahead_kb", "w") as f:
            f.write("0")
        subprocess.run(["mount", loop, mnt], check=True)
        subprocess.run(["cp", linked, binary], check=True)
        subprocess.run(["umount", mnt], check=True)
        for run in RUNS:
            subprocess.run(["mount", loop, mnt], check=True)
            try:
                run_until_ready([binary, *run], hold)
                per_run.append(cached_pages(binary))
            finally:
                subprocess.run(["umount", mnt], check=False)
    finally:
        subprocess.run(["losetup", "-d", loop], check=False)
    return per_run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "cmake",
                                                   "memlat-x86_64.order"))
    ap.add_argument("--hold", type=float, default=1.0, help="seconds each run traces")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("hot-order: needs root (a loop mount, and the tools load BPF programs)")
    build_dir = os.path.abspath(args.build_dir)
    with tempfile.TemporaryDirectory(prefix="memlat-hot-") as scratch:
        linked = os.path.join(scratch, "memlat")
        relink_with_symbols(build_dir, linked)
        table = symbols(linked)
        runs = []
        for run in RUNS:
            runs.append(executed_functions(linked, run, args.hold, scratch))
            print(f"hot-order: {' '.join(run)}: {len(set(runs[-1]))} functions", flush=True)
        functions = hot_functions(runs, table)
        per_run = touched_pages(linked, args.hold, scratch)
        functions += unexplained_functions(linked, per_run, table, functions)
        data = hot_data(linked, per_run, table)
    names, seen = [], set()
    for name in functions + data:  # a name defined twice (static functions) is listed once
        if name not in seen:
            seen.add(name)
            names.append(name)
    with open(args.out, "w") as f:
        f.write("\n".join(names) + "\n")
    sizes = {name: size for _, size, _, name in table}
    print(f"hot-order: {len(functions)} functions ({sum(sizes[n] for n in functions)} bytes), "
          f"{len(data)} data symbols ({sum(sizes[n] for n in data)} bytes) written to "
          f"{os.path.normpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
