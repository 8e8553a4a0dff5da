#!/usr/bin/env python3
"""Shared harness of the runtime tests: real tools on the live kernel, as root.

A test script defines scenarios with @scenario and ends with `sys.exit(main())`; ctest runs
`python3 <script> <scenario>` (see tests/CMakeLists.txt). Exit status: 0 passed, 1 failed,
77 skipped (printed as "skipped: <reason>").

    from memlat_test import *

    @scenario("tlbflush_something")
    def _(t: Test):
        with Tool("tlbflush", "-j") as tool:      # started with MEMLAT_READY=1, waits for ready
            run_workload("tlb_workload", "--seconds", "1")
        res = tool.result                         # rc, stdout, stderr (stopped with SIGINT)
        t.check_close("events", expected=..., actual=..., rel_tol=0.02)

Every check prints what is compared, the expected and actual values and the tolerance, then
"ok" or "FAIL"; a scenario fails if any check failed. t.require() stops the scenario at once.

What several tools' tests need is here once: read_file/write_file (kernel knobs, cgroup and
tracefs files), vmstat() snapshots, TestFile (a file of our own in the build directory that
can be evicted from the page cache), MemoryCgroup (a cgroup of our own, with a memory limit if
asked), FtraceOracle (an ftrace instance recording tracepoints for one PID: the kernel's own
count to compare a tool with), snoop_events (the per-event JSON of drsnoop and compactsnoop),
check_bad_arguments, shared_bad_arguments and check_help (usage errors exit 2 with a message; -h
documents options).
Only the standard library is used (Python 3.8+).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Callable, Iterable, Optional, Sequence

SKIP_STATUS = 77
READY_LINE = "memlat: ready"
# What a tool prints for a stack its stack map had no room for (lib/loading/stacks.h).
STACK_NO_ROOM = "[stack lost: no room in the stack map]"
READY_TIMEOUT = 20.0      # seconds for a tool to print READY_LINE
STOP_TIMEOUT = 15.0       # seconds for a tool to exit after SIGINT
TRACEFS = "/sys/kernel/tracing"


class Skip(Exception):
    """Raised by skip(): the scenario cannot run here (exit status 77)."""


class Failure(Exception):
    """Raised by Test.require() and by harness errors: the scenario failed (exit status 1)."""


def log(msg: str = "") -> None:
    print(msg, flush=True)


def skip(reason: str) -> None:
    raise Skip(reason)


# ---------------------------------------------------------------- locating binaries

def build_dir() -> str:
    d = os.environ.get("MEMLAT_BUILD_DIR")
    if not d:
        raise Failure("MEMLAT_BUILD_DIR is not set (ctest sets it to the CMake build directory)")
    return d


def source_tools() -> list[str]:
    """The tools of this tree: every tools/NAME/ with a NAME.bpf.c, as CMakeLists.txt finds
    them (so a test that walks every tool needs no list to keep up)."""
    tools_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
    return sorted(n for n in os.listdir(tools_dir)
                  if os.path.isfile(os.path.join(tools_dir, n, f"{n}.bpf.c")))


def source_entries() -> dict[str, str]:
    """Every entry of the registry in this tree, as CMakeLists.txt finds them: each
    tools/NAME/ with a NAME.cpp, with the bare link that runs it (tool.cmake's tool_link:
    NAME unless it says otherwise; "" for none)."""
    tools_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
    entries = {}
    for name in sorted(os.listdir(tools_dir)):
        if not os.path.isfile(os.path.join(tools_dir, name, f"{name}.cpp")):
            continue
        entries[name] = name
        settings = os.path.join(tools_dir, name, "tool.cmake")
        if os.path.isfile(settings):
            with open(settings) as f:
                if m := re.search(r'^set\(tool_link\s+"?([^")]*)"?\)', f.read(), re.M):
                    entries[name] = m.group(1)
    return entries


def binary(name: str) -> str:
    """Path of a tool (BUILD/name) or a test workload (BUILD/tests/name); fails if absent."""
    for sub in ("", "tests"):
        path = os.path.join(build_dir(), sub, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise Failure(f"binary {name!r} not found in {build_dir()} or {build_dir()}/tests: build it first")


# ---------------------------------------------------------------- machine preconditions

def require_root() -> None:
    if os.geteuid() != 0:
        skip("needs root (BPF programs and tracepoints)")


def ensure_tracefs() -> None:
    """Mount tracefs at /sys/kernel/tracing if it is not mounted there (harmless if it is)."""
    try:
        with open("/proc/mounts") as f:
            if any(line.split()[1] == TRACEFS for line in f if len(line.split()) > 1):
                return
    except OSError:
        pass
    if not os.path.isdir(TRACEFS):
        return
    r = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True,
                       text=True, timeout=10)
    if r.returncode != 0:
        log(f"note: could not mount tracefs on {TRACEFS}: {r.stderr.strip()}")


def online_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def require_cpus(*cpus: int) -> None:
    have = set(online_cpus())
    missing = [c for c in cpus if c not in have]
    if missing:
        skip(f"needs CPUs {list(cpus)} online and usable; this machine has {sorted(have)}")


# ---------------------------------------------------------------- /proc/interrupts

def interrupt_row(name: str) -> list[int]:
    """Per-CPU counts of one /proc/interrupts row (e.g. "TLB"), indexed like the header."""
    with open("/proc/interrupts") as f:
        header = f.readline().split()
        ncpu = len(header)
        for line in f:
            fields = line.split()
            if fields and fields[0] == name + ":":
                return [int(x) for x in fields[1:1 + ncpu]]
    raise KeyError(name)


def tlb_interrupts() -> list[int]:
    """The "TLB shootdowns" row of /proc/interrupts, per CPU (skips when there is none)."""
    try:
        return interrupt_row("TLB")
    except KeyError:
        skip("/proc/interrupts has no TLB row (not x86?)")
        raise  # unreachable


# ---------------------------------------------------------------- other processes

def tlb_flush_reason_value(name: str) -> int:
    """The value of a tlb:tlb_flush reason as the kernel's own event format prints it
    ("remote IPI send" -> 4), read from tracefs: the oracle's numbering, not the tool's."""
    fmt = read_file(os.path.join(TRACEFS, "events", "tlb", "tlb_flush", "format"), "")
    m = re.search(r'\{\s*(\d+),\s*"' + re.escape(name) + r'"\s*\}', fmt)
    if not m:
        skip(f"tlb:tlb_flush's format has no reason \"{name}\" (x86 only)")
    return int(m.group(1))


def remote_flushes_without_ipis(seconds: float = 1.0) -> tuple[int, int]:
    """Measures how this machine delivers remote TLB flushes: tlb_workload unmaps on CPU 0 with
    its worker on CPU 1 for `seconds`, while an ftrace instance counts the remote flush
    requests it sends (tlb:tlb_flush, reason "remote IPI send") and /proc/interrupts the TLB
    IPIs handled on every CPU. Returns (requests sent, TLB IPIs handled)."""
    require_cpus(0, 1)
    send = tlb_flush_reason_value("remote IPI send")
    with Workload("tlb_workload", "--seconds", str(seconds), "--main-cpu", "0",
                  "--worker-cpu", "1", held=True) as wl:
        with FtraceOracle(["tlb/tlb_flush"], wl.pid, threads=True, buffer_kb=8192,
                          filters={"tlb/tlb_flush": f"reason == {send}"}) as oracle:
            before = tlb_interrupts()
            wl.release()
            wl.wait_done(seconds + 30)
            after = tlb_interrupts()
            sent = len(oracle.stop()["tlb_flush"])
    return sent, sum(after) - sum(before)


_IPI_MEASUREMENT: Optional[tuple[bool, str]] = None


def shootdown_ipis_here() -> tuple[bool, str]:
    """Whether remote TLB flushes interrupt the CPUs they name on this machine, measured once
    per run of a scenario (remote_flushes_without_ipis(), half a second) and never read from
    what a tool says: (True, how) with shootdown IPIs, (False, why) where they do not. On a
    paravirtual guest whose hypervisor flushes the other vCPUs (PVM, Hyper-V, Xen PV) the
    requests are sent and the TLB row of /proc/interrupts stays 0. A workload that sent too
    few requests to tell counts as a machine with IPIs, so that the scenario's own checks of
    the workload fail instead of skipping."""
    global _IPI_MEASUREMENT
    if _IPI_MEASUREMENT is None:
        sent, ipis = remote_flushes_without_ipis(0.5)
        how = (f"tlb_workload sent {sent} remote flush requests (ftrace) while "
               f"/proc/interrupts counted {ipis} TLB IPIs on all CPUs")
        log(f"  precondition: {how}")
        if ipis == 0 and sent >= 100:
            _IPI_MEASUREMENT = (False, f"remote TLB flushes on this machine go through the "
                                f"hypervisor, without shootdown IPIs ({how})")
        else:
            _IPI_MEASUREMENT = (True, how)
    return _IPI_MEASUREMENT


def require_ipi_oracle() -> None:
    """The precondition of a scenario whose oracle is the /proc/interrupts TLB row (or the
    IPI handlers' own tracepoints): measured before the scenario checks anything, so that a
    skip can never hide a failed check. Elsewhere the VM matrix runs it."""
    require_cpus(0, 1)
    ipis, why = shootdown_ipis_here()
    if not ipis:
        skip(f"{why}: this scenario's oracle needs shootdown IPIs (the VM matrix runs it)")


def check_workload_ipis(t: "Test", what: str, minimum: int, delta: int) -> None:
    """`delta`, the TLB row's growth over the scenario's workload, reached `minimum`: the
    workload worked, on a machine require_ipi_oracle() found to send IPIs."""
    t.check_ge(what, minimum, delta, "else the workload did not work and nothing below is "
               "meaningful")


def processes_named(comm: str) -> set[int]:
    """PIDs of the processes whose comm is `comm` (15 characters at most)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() == comm[:15]:
                        pids.add(int(entry))
            except OSError:
                pass
    return pids


class ProcessWatch:
    """Context manager noting, every `period` seconds, which processes named `comm` run:
    tests that count machine-wide events use it to tell whether another copy of their
    workload (another test or a benchmark on the same machine) ran at the same time.
    `seen` holds all PIDs seen; remove your own before concluding."""

    def __init__(self, comm: str, period: float = 0.05):
        self.comm = comm
        self.period = period
        self.seen: set[int] = set()
        self._stop = threading.Event()

    def _run(self) -> None:
        while True:
            self.seen |= processes_named(self.comm)
            if self._stop.wait(self.period):
                break

    def __enter__(self) -> "ProcessWatch":
        self.seen |= processes_named(self.comm)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self.seen |= processes_named(self.comm)


def wait_quiet(comm: str, quiet_for: float = 1.0, timeout: float = 20.0,
               mine: Iterable[int] = ()) -> bool:
    """Waits until no process named `comm` (other than `mine`) has run for `quiet_for`
    seconds; False if the machine was not quiet within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    while True:
        if processes_named(comm) - set(mine):
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_for:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def bpf_ids_of(pid: int) -> dict[str, set[int]]:
    """IDs of the BPF programs, maps and links a process holds open, from /proc/PID/fdinfo:
    {"prog": {...}, "map": {...}, "link": {...}}. A link's program is reported under "prog"
    too. Empty sets once the process is gone."""
    ids: dict[str, set[int]] = {"prog": set(), "map": set(), "link": set()}
    fddir = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(fddir)
    except OSError:
        return ids
    for fd in fds:
        try:
            with open(os.path.join(fddir, fd)) as f:
                info = f.read()
        except OSError:
            continue
        for kind in ids:
            m = re.search(rf"^{kind}_id:\s*(\d+)", info, re.M)
            if m:
                ids[kind].add(int(m.group(1)))
    return ids


_BPF_GET_FD_BY_ID = {"prog": 13, "map": 14, "link": 30}  # enum bpf_cmd
_SYS_BPF = {"x86_64": 321, "aarch64": 280}


def bpf_object_exists(kind: str, ident: int) -> bool:
    """Whether the kernel still has BPF object `kind` ("prog", "map", "link") `ident`:
    BPF_*_GET_FD_BY_ID succeeds (the fd is closed again at once)."""
    import ctypes
    import platform
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(16)  # id, next_id, open_flags
    ctypes.memmove(attr, int(ident).to_bytes(4, "little"), 4)
    fd = libc.syscall(_SYS_BPF[platform.machine()], _BPF_GET_FD_BY_ID[kind], attr, 16)
    if fd >= 0:
        os.close(fd)
        return True
    return False


class BpfWatch(threading.Thread):
    """Collects, every few milliseconds until the process ends, the IDs of every BPF program,
    map and link it held at any moment, so that a run stopped at any point can be checked
    for objects left behind (leftovers())."""

    def __init__(self, pid: int, period: float = 0.002):
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.ids: dict[str, set[int]] = {"prog": set(), "map": set(), "link": set()}
        self.start()

    def run(self) -> None:
        while os.path.exists(f"/proc/{self.pid}/fdinfo"):
            for kind, found in bpf_ids_of(self.pid).items():
                self.ids[kind] |= found
            time.sleep(self.period)

    def leftovers(self, grace: float = 3.0) -> dict[str, set[int]]:
        """The objects seen that still exist after the process ended. The kernel frees a
        closed program or map after an RCU grace period, so this waits up to `grace`."""
        self.join(10)
        deadline = time.monotonic() + grace
        while True:
            left = {k: {i for i in ids if bpf_object_exists(k, i)} for k, ids in self.ids.items()}
            if not any(left.values()) or time.monotonic() > deadline:
                return left
            time.sleep(0.05)

    def seen(self) -> int:
        return sum(len(v) for v in self.ids.values())


def check_nothing_left(t: "Test", watch: Optional[BpfWatch], what: str,
                       expect_loaded: bool = True) -> None:
    """No BPF program, map or link the watched process held outlives it; with
    `expect_loaded`, it must have held some (else the check would prove nothing)."""
    if watch is None:
        raise Failure(f"{what}: the run was not watched (watch_bpf=True)")
    if expect_loaded:
        t.check(watch.ids["prog"] and watch.ids["map"], f"{what}: BPF programs and maps seen "
                "while it ran", "some", {k: len(v) for k, v in watch.ids.items()})
    left = watch.leftovers()
    t.check(not any(left.values()), f"{what}: no BPF object left after it exited", "none",
            {k: sorted(v) for k, v in left.items() if v})


# ---------------------------------------------------------------- small files

def read_file(path: str, default: Optional[str] = None) -> str:
    """The text of a small file (/proc, /sys, tracefs, cgroupfs); `default` if it cannot be
    read and a default was given, else the OSError is raised."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        if default is None:
            raise
        return default


def write_file(path: str, text: str) -> None:
    """Writes `text` to a small file: a kernel knob, a cgroup file, a tracefs control file."""
    with open(path, "w") as f:
        f.write(text)


def vmstat() -> dict[str, int]:
    """A snapshot of /proc/vmstat: {counter name: value}."""
    with open("/proc/vmstat") as f:
        return {k: int(v) for k, v in (line.split() for line in f)}


# ---------------------------------------------------------------- things of a test's own

def own_name(tag: str) -> str:
    """The name of a file, cgroup or trace instance of this test process: memlat_TAG_PID."""
    return f"memlat_{tag}_{os.getpid()}"


class TestFile:
    """A file of our own of `size` bytes (whole MiB) in the build directory, on a disk file
    system (/tmp may be tmpfs, whose pages cannot be evicted: they are the file's only copy),
    fsync'ed when written and removed on exit. evict() drops its pages, and only its pages, from the page cache (fsync,
    then posix_fadvise DONTNEED): the machine's page cache is left alone. cold=True evicts on
    entry; warm() reads it whole."""

    def __init__(self, size: int, tag: str, cold: bool = False):
        self.size = size
        self.cold = cold
        self.path = os.path.join(build_dir(), own_name(tag) + ".dat")

    def __enter__(self) -> "TestFile":
        chunk = b"\x5a" * (1 << 20)
        try:
            with open(self.path, "wb") as f:
                for _ in range(self.size // len(chunk)):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            if self.cold:
                self.evict()
        except BaseException:
            # (with's body never ran, so __exit__ will not: the file goes here)
            self.__exit__(None, None, None)
            raise
        return self

    def evict(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def warm(self) -> None:
        with open(self.path, "rb") as f:
            while f.read(1 << 20):
                pass

    def resident_pages(self) -> int:
        """The file's pages in the page cache now: mincore() on a shared read-only mapping of
        it (mapping faults nothing in)."""
        import ctypes
        import mmap
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        page = os.sysconf("SC_PAGE_SIZE")
        pages = (self.size + page - 1) // page
        with open(self.path, "rb") as f:
            base = libc.mmap(None, self.size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
            if base is None or base == ctypes.c_void_p(-1).value:
                raise OSError(ctypes.get_errno(), "mmap of the file for mincore")
            try:
                vec = ctypes.create_string_buffer(pages)
                if libc.mincore(base, self.size, vec) != 0:
                    raise OSError(ctypes.get_errno(), "mincore")
                return sum(b & 1 for b in vec.raw[:pages])
            finally:
                libc.munmap(base, self.size)

    def dev_ino(self) -> tuple[str, int]:
        """("MAJOR:MINOR", inode number) of the file, as the tools print them."""
        st = os.stat(self.path)
        return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", st.st_ino

    def __exit__(self, *exc) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


CGROUP_V1_MEMORY = "/sys/fs/cgroup/memory"
CGROUP_V2_ROOT = "/sys/fs/cgroup"


def remove_dir_retrying(path: str, pause: float = 0.1) -> bool:
    """Removes the directory `path`, which the kernel refuses to remove for a moment while it is
    still in use (a cgroup whose last task is exiting, a tracefs instance whose trace a reader
    still holds open): tries 50 times, `pause` seconds apart. True once it is gone."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(pause)
    return False


def remove_cgroup_dir(path: str) -> None:
    """Removes the cgroup directory `path` once its last task is gone (an exiting task leaves
    it a moment later): tries for 5 s, then says it could not."""
    if not remove_dir_retrying(path):
        log(f"note: could not remove {path}")


def hierarchy_path(path: str) -> str:
    """A cgroup directory as the kernel log and every memlat output name it: its path in its
    hierarchy ("/" for the root itself)."""
    for root in (CGROUP_V1_MEMORY, CGROUP_V2_ROOT):
        if path == root:
            return "/"
        if path.startswith(root + "/"):
            return path[len(root):]
    return path


def proc_memory_cgroup(pid: int) -> str:
    """The memory cgroup of process `pid` as the kernel names it in /proc/PID/cgroup: the
    line of the cgroup v1 memory controller if there is one, else cgroup v2's ("0::")."""
    lines = read_file(f"/proc/{pid}/cgroup", "").splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
    return next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), "")


class MemoryCgroup:
    """A cgroup of our own, memlat_TAG_PID, removed on exit: in the cgroup v1 memory
    hierarchy if the machine has one, else in cgroup v2 at /sys/fs/cgroup (skips if neither).

    With a `limit` (bytes) it is a memory cgroup proper: the limit is written to
    memory.limit_in_bytes (v1) or memory.max (v2). On v2 that needs the memory controller
    (skips without it), which is enabled in the root's cgroup.subtree_control for the test's
    duration if it was not. Without a limit it only groups tasks (for a tool's -G)."""

    def __init__(self, tag: str, limit: Optional[int] = None):
        self.limit = limit
        self.v1 = os.path.isfile(os.path.join(CGROUP_V1_MEMORY, "memory.limit_in_bytes"))
        if not self.v1:
            controllers = os.path.join(CGROUP_V2_ROOT, "cgroup.controllers")
            if limit is None and not os.path.isfile(controllers):
                skip("neither a cgroup v1 memory hierarchy nor cgroup v2 at /sys/fs/cgroup")
            if limit is not None and "memory" not in read_file(controllers, "").split():
                skip("no memory cgroup controller on this machine (neither v1 nor v2)")
        self.path = os.path.join(CGROUP_V1_MEMORY if self.v1 else CGROUP_V2_ROOT, own_name(tag))
        # As the tools name it.
        self.in_hierarchy = hierarchy_path(self.path)
        self.enabled_controller = False

    def __enter__(self) -> "MemoryCgroup":
        if self.limit is not None and not self.v1:
            control = os.path.join(CGROUP_V2_ROOT, "cgroup.subtree_control")
            if "memory" not in read_file(control, "").split():
                write_file(control, "+memory")
                self.enabled_controller = True
        os.mkdir(self.path)
        if self.limit is not None:
            write_file(os.path.join(self.path, "memory.limit_in_bytes" if self.v1
                                    else "memory.max"), str(self.limit))
        log(f"cgroup {self.path} (cgroup {'v1' if self.v1 else 'v2'})"
            + (f", memory limit {self.limit >> 20} MiB" if self.limit is not None else ""))
        return self

    def add(self, pid: int) -> None:
        """Moves process `pid` into the cgroup."""
        write_file(os.path.join(self.path, "cgroup.procs"), str(pid))

    def __exit__(self, *exc) -> None:
        # Its tasks have exited by now; a cgroup without tasks can be removed.
        remove_cgroup_dir(self.path)
        if self.enabled_controller:
            write_file(os.path.join(CGROUP_V2_ROOT, "cgroup.subtree_control"), "-memory")


# ---------------------------------------------------------------- the ftrace oracle

def remove_ftrace_instance(path: str, events: Sequence[str]) -> None:
    """Disables the instance's "SYSTEM/EVENT"s and removes it (the kernel refuses the rmdir
    for a moment while a reader still holds the trace open)."""
    for e in events:
        try:
            write_file(os.path.join(path, "events", e, "enable"), "0")
        except OSError:
            pass
    remove_dir_retrying(path)


class FtraceOracle:
    """An ftrace instance of our own recording some tracepoints for one PID, without BPF: the
    kernel's own account of the events a tool is compared with. Removed on exit; skips where
    tracefs has no instances.

        with FtraceOracle(["vmscan/mm_vmscan_memcg_reclaim_end"], pid) as oracle, Tool(...):
            ...
            events = oracle.stop()["mm_vmscan_memcg_reclaim_end"]   # [{"nr_reclaimed": "12", ...}]

    `events` are "SYSTEM/EVENT" names (as under tracefs events/); each is filtered to
    common_pid == pid, unless `filters` gives an event another ftrace filter. `clock` sets the
    instance's trace_clock ("mono": one clock for all CPUs, where the default "local" clock
    of each CPU may run a little ahead of another's, which reorders events of one task that
    moved between CPUs). With `threads`, `pid` is a process whose threads, those it creates
    after the oracle started included, are all recorded (set_event_pid with event-fork; the
    events' common_pid is a thread's id, "_tid" in each event); `also` adds other threads
    (another process's, from /proc/PID/task), and those they create. stop() disables
    them and parses the trace; a trace that lost events is a Failure (make buffer_kb, the
    per-CPU buffer size, larger)."""

    def __init__(self, events: Sequence[str], pid: int, buffer_kb: int = 4096,
                 filters: Optional[dict[str, str]] = None, clock: Optional[str] = None,
                 threads: bool = False, also: Sequence[int] = ()):
        self.threads = threads
        self.also = list(also)
        self.clock = clock
        self.events = list(events)
        self.pid = pid
        self.buffer_kb = buffer_kb
        self.filters = dict(filters or {})
        self.path = os.path.join(TRACEFS, "instances", own_name("oracle"))

    def _control(self, event: str, file: str) -> str:
        return os.path.join(self.path, "events", event, file)

    def __enter__(self) -> "FtraceOracle":
        if not os.path.isdir(os.path.join(TRACEFS, "instances")):
            skip("tracefs instances are not available (needed for the ftrace oracle)")
        os.mkdir(self.path)
        write_file(os.path.join(self.path, "buffer_size_kb"), str(self.buffer_kb))
        if self.clock:
            write_file(os.path.join(self.path, "trace_clock"), self.clock)
        if self.threads:
            write_file(os.path.join(self.path, "options", "event-fork"), "1")
            write_file(os.path.join(self.path, "set_event_pid"),
                       " ".join(str(p) for p in [self.pid, *self.also]))
        for e in self.events:
            if e in self.filters or not self.threads:
                write_file(self._control(e, "filter"),
                           self.filters.get(e, f"common_pid == {self.pid}"))
            write_file(self._control(e, "enable"), "1")
        return self

    def stop(self) -> dict[str, list[dict[str, str]]]:
        """Disables the events; returns {EVENT (without SYSTEM/): [its fields as
        {name: value string}, ...]} in trace order, for every event asked for. Each event also
        has "_ts": its timestamp in seconds (the trace clock, microseconds in the text), "_tid",
        "_comm" and "_cpu", the thread, its name and the CPU it happened on, and "_seq" its place
        in the trace
        (events of one microsecond keep their order)."""
        for e in self.events:
            write_file(self._control(e, "enable"), "0")
        text = read_file(os.path.join(self.path, "trace"))
        if "LOST" in text:
            raise Failure("the ftrace oracle lost events (buffer too small)")
        out: dict[str, list[dict[str, str]]] = {e.split("/")[-1]: [] for e in self.events}
        line_re = re.compile(r" (\d+\.\d+): (" + "|".join(re.escape(name) for name in out) +
                             r"): (.*)$")
        tid_re = re.compile(r"^\s*(.*)-(\d+) +\[(\d+)\]")
        for seq, line in enumerate(text.splitlines()):
            m = line_re.search(line)
            if m:
                fields = dict(re.findall(r"(\w+)=(\S+)", m.group(3)))
                fields["_ts"] = m.group(1)
                fields["_seq"] = seq
                tid = tid_re.search(line)
                fields["_comm"] = tid.group(1) if tid else ""
                fields["_tid"] = tid.group(2) if tid else ""
                fields["_cpu"] = tid.group(3) if tid else ""
                out[m.group(2)].append(fields)
        return out

    def __exit__(self, *exc) -> None:
        remove_ftrace_instance(self.path, self.events)


class PerfStat:
    """`perf stat -a` counting tracepoints machine-wide, started before a tool and stopped after
    it: another observer of the same events, which a tool must never blind (a classic
    tracepoint BPF program that returns 0 drops the event for every perf user on that CPU).

        with PerfStat(["tlb:tlb_flush"]) as perf:
            with Tool(...):
                ...
        perf.counts["tlb:tlb_flush"]    # set on exit

    `filter` is a tracepoint filter (perf stat --filter, ftrace's syntax) for every event, to
    count only the workload's events (for an exact comparison with an ftrace instance of the
    same processes). Skips where perf is not installed (Debian: linux-perf) or cannot count
    the tracepoints."""

    def __init__(self, events: Sequence[str], filter: Optional[str] = None):
        self.events = list(events)
        self.filter = filter
        self.counts: dict[str, int] = {}
        self.path = os.path.join(build_dir(), own_name("perf_stat") + ".csv")

    def __enter__(self) -> "PerfStat":
        perf = shutil.which("perf")
        if perf is None:
            skip("perf is not installed (Debian: apt-get install linux-perf)")
        ensure_tracefs()
        argv = [perf, "stat", "-a", "-x", ",", "-o", self.path]
        for e in self.events:
            argv += ["-e", e] + (["--filter", self.filter] if self.filter else [])
        log(f"$ {' '.join(argv)}")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(0.5)  # perf opens its events before the tool starts
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace")
            skip(f"perf stat cannot count {self.events} here: {err.strip()[:300]}")
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc)
            raise Failure("perf stat did not exit within 15 s of SIGINT")
        try:
            text = read_file(self.path, "")
        finally:
            if os.path.exists(self.path):
                os.unlink(self.path)
        for line in text.splitlines():
            fields = line.split(",")
            if len(fields) >= 3 and fields[2] in self.events:
                self.counts[fields[2]] = int(fields[0]) if fields[0].isdigit() else -1
        if exc[0] is None and set(self.counts) != set(self.events):
            raise Failure(f"perf stat printed no count for "
                          f"{sorted(set(self.events) - set(self.counts))}: {text[:500]!r}")
        log("  perf stat: " + ", ".join(f"{e} {n}" for e, n in self.counts.items()))


def oracle_durations_ns(begins: list[dict], ends: list[dict]) -> list[int]:
    """Durations of begin/end pairs of one thread's ftrace events, in trace order, in ns
    (microsecond resolution: the trace prints microseconds)."""
    return [round((float(e["_ts"]) - float(b["_ts"])) * 1e9) for b, e in zip(begins, ends)]


def check_latencies(t: Test, what: str, tool_ns: list[int], oracle_ns: list[int],
                    rel_tol: float = 0.1, abs_tol_ns: int = 5000) -> None:
    """Each latency the tool printed against the oracle's duration of the same event (paired in
    order). A BPF program and ftrace record the same tracepoint a little apart, and an
    interrupt, or on a virtual machine the hypervisor, can take the CPU between the two
    (measured on this VM host: a few us usually, up to 500 us in 8 of 45 stalls of one run,
    966 us once in a CI run: 1729 us against 763), and the trace prints microseconds (each
    difference +/-1 us); so the medians must agree within max(rel_tol, abs_tol_ns)
    (measured: 22.0 us against 19 us once, a 20 us stall), three pairs in four too (all but
    max(2, 25%)), and every pair within a factor of 2 plus 1 ms. A unit mistake (us for ns)
    or a wrong pairing fails this; a count-only check would not see it."""
    t.check_eq(f"{what}: latencies to compare (tool vs oracle)", len(oracle_ns), len(tool_ns))
    if not tool_ns or len(tool_ns) != len(oracle_ns):
        return
    def close(a: int, b: int) -> bool:
        return abs(a - b) <= max(rel_tol * b, abs_tol_ns)
    med_t, med_o = sorted(tool_ns)[len(tool_ns) // 2], sorted(oracle_ns)[len(oracle_ns) // 2]
    log(f"  {what}: median {med_t} ns (tool) vs {med_o} ns (oracle), "
        f"max {max(tool_ns)} vs {max(oracle_ns)}")
    tol = f"max({rel_tol:.0%}, {abs_tol_ns / 1000:g} us)"
    t.check(close(med_t, med_o), f"{what}: median within {tol}", med_o, med_t)
    off = [(a, b) for a, b in zip(tool_ns, oracle_ns) if not close(a, b)]
    if off:
        log(f"  {what}: pairs off by more than {tol}, (tool ns, oracle ns): {off[:5]}")
    t.check_le(f"{what}: pairs off by more than {tol}", max(2, len(tool_ns) // 4), len(off))
    wild = [(a, b) for a, b in zip(tool_ns, oracle_ns)
            if not (b / 2 - 1_000_000 <= a <= 2 * b + 1_000_000)]
    t.check_eq(f"{what}: pairs off by more than a factor of 2 plus 1 ms", [], wild[:5])


# The call-function IPI handler on one CPU, as ftrace records it: the oracle of tlbflush -L.
IPI_EVENTS = ["irq_vectors/call_function_entry", "irq_vectors/call_function_exit",
              "irq_vectors/call_function_single_entry", "irq_vectors/call_function_single_exit"]
# What says that a handler run flushed the TLB: the flush_tlb_func csd callback (Linux 6.3+),
# else a remote flush reported by tlb_flush inside the run.
IPI_CSD_EVENTS = ["csd/csd_function_entry", "csd/csd_function_exit"]
IPI_TLB_EVENTS = ["tlb/tlb_flush"]
# tlb_flush prints reasons with spaces ("reason:remote shootdown (1)"); 6.18 adds "remote wrong
# CPU" for an IPI that found the CPU lazy or on another mm.
IPI_REMOTE_REASON = re.compile(r"reason:remote[ _](shootdown|wrong[ _]cpu)", re.I)
# The calibration marks written into the trace: "memlat_clock <CLOCK_MONOTONIC ns>".
CLOCK_MARK = "memlat_clock"
_TRACE_LINE = re.compile(r"\[(\d+)\]\s+\S+\s+(\d+)(?:\.(\d+))?: (\w+): (.*)$")


class IpiTrace:
    """A parsed IPI-oracle trace: handler runs that flushed the TLB, in nanoseconds.

    handler_ns: entry-to-exit time of every call-function IPI handler run on the CPU in which
        a TLB flush ran (counted once however many); callback_ns: flush_tlb_func's
        csd_function_entry-to-exit inside those runs (csd kernels only, else None);
        without_ipi: flush callbacks (or remote flushes) outside any handler run;
        ns_per_tick: the trace clock's resolution (x86-tsc ticks, calibrated against
        CLOCK_MONOTONIC with two marks written into the trace); lost: events ftrace lost."""

    def __init__(self) -> None:
        self.handler_ns: list[float] = []
        self.callback_ns: Optional[list[float]] = None
        self.shared_runs = 0
        self.without_ipi = 0
        self.unpaired = 0
        self.ns_per_tick = 0.0
        self.lost = False


def parse_ipi_trace(text: str, cpu: int) -> IpiTrace:
    """Pairs the IPI oracle's events on `cpu` (see IpiOracle and the VM scenario). The trace
    clock is x86-tsc, whose timestamps are raw TSC counts: they are converted to ns with the
    rate between the first and last memlat_clock marks (two CLOCK_MONOTONIC readings). Only
    the events between those marks count: the marks bracket the tool's window."""
    out = IpiTrace()
    out.lost = "LOST" in text
    marks: list[tuple[int, int]] = []
    events: list[tuple[int, str, str]] = []
    for line in text.splitlines():
        m = _TRACE_LINE.search(line)
        if not m or int(m.group(1)) != cpu:
            continue
        if m.group(3) is not None:
            raise Failure("the IPI oracle's trace has sec.usec timestamps: the trace clock is "
                          "not x86-tsc")
        ts, name, rest = int(m.group(2)), m.group(4), m.group(5)
        if name == "tracing_mark_write":
            words = rest.split()
            if len(words) == 2 and words[0] == CLOCK_MARK:
                marks.append((ts, int(words[1])))
            continue
        events.append((ts, name, rest))
    if len(marks) < 2 or marks[-1][0] <= marks[0][0]:
        raise Failure(f"the IPI oracle's trace has {len(marks)} clock marks on CPU {cpu}; "
                      "two are needed to convert TSC ticks to ns")
    out.ns_per_tick = (marks[-1][1] - marks[0][1]) / (marks[-1][0] - marks[0][0])
    events = [e for e in events if marks[0][0] <= e[0] <= marks[-1][0]]
    has_csd = any(name.startswith("csd_function") for _, name, _ in events)
    if has_csd:
        out.callback_ns = []
    since = None
    flushes = 0
    callback_since = None
    callbacks: list[float] = []
    for ts, name, rest in events:
        if name in ("call_function_entry", "call_function_single_entry"):
            if since is not None:
                out.unpaired += 1
            since, flushes, callbacks = ts, 0, []
        elif name in ("call_function_exit", "call_function_single_exit"):
            if since is None:
                out.unpaired += 1
                continue
            if flushes:
                out.handler_ns.append((ts - since) * out.ns_per_tick)
                out.shared_runs += flushes > 1
                if out.callback_ns is not None:
                    out.callback_ns.extend(callbacks)
            since = None
        elif name == "csd_function_entry" or name == "csd_function_exit":
            # "func=flush_tlb_func, csd=0000000012345678"; a zero csd is a local call.
            if "func=flush_tlb_func," not in rest or re.search(r"csd=0+$", rest):
                continue
            if name == "csd_function_exit":
                if since is not None and callback_since is not None:
                    callbacks.append((ts - callback_since) * out.ns_per_tick)
                callback_since = None
                continue
            if since is None:
                out.without_ipi += 1
                callback_since = None
            else:
                flushes += 1
                callback_since = ts
        elif name == "tlb_flush" and not has_csd:
            if not IPI_REMOTE_REASON.search(rest):
                continue
            if since is None:
                out.without_ipi += 1
            else:
                flushes += 1
    return out


def log2_slot(value: float) -> int:
    """The histogram slot of a value, as the BPF side computes it (include/memlat/hist.h)."""
    v = int(value)
    return 0 if v < 2 else v.bit_length() - 1


def slot_quantile(counts: dict[int, int], q: float) -> Optional[int]:
    """The slot holding the q-quantile of a log2 histogram {slot: count}: the first slot at
    which the cumulative count reaches q of the total. None for an empty histogram."""
    total = sum(counts.values())
    if total == 0:
        return None
    seen = 0
    for slot in sorted(counts):
        seen += counts[slot]
        if seen >= q * total:
            return slot
    return max(counts)


def slots_of_values(values: Iterable[float]) -> dict[int, int]:
    out: dict[int, int] = {}
    for v in values:
        out[log2_slot(v)] = out.get(log2_slot(v), 0) + 1
    return out


def slots_of_json_hist(hist: dict) -> dict[int, int]:
    """{slot: count} of a tool's JSON log2 histogram ({"buckets": [{"low", "high", "count"}]})."""
    return {log2_slot(b["low"]): b["count"] for b in hist.get("buckets", [])}


def slot_range(slot: Optional[int]) -> str:
    if slot is None:
        return "none"
    return f"{0 if slot == 0 else 1 << slot}-{(1 << (slot + 1)) - 1}"


class IpiOracle:
    """An ftrace instance of our own recording the call-function IPI handler on one CPU (its
    tracing_cpumask), with what marks a TLB flush inside it, in the x86-tsc trace clock: raw
    TSC counts, because the nanosecond clocks print only microseconds in the text. Two marks
    (CLOCK_MONOTONIC ns, written from a thread pinned to the CPU) calibrate the ticks. Removed
    on exit.

        with IpiOracle(1) as oracle, Tool(...):
            oracle.mark()          # once the tool is ready
            ...
            oracle.mark()          # before it stops
        trace = oracle.stop()      # IpiTrace: the events between the first and last mark"""

    def __init__(self, cpu: int, buffer_kb: int = 16384, tlb_flush_marks: bool = False):
        """tlb_flush_marks: mark the handler runs with tlb_flush's remote flushes even where
        the csd tracepoints exist: what tlbflush does without them, compared like with like
        (a flush_tlb_func that returns early reports no flush)."""
        self.cpu = cpu
        self.tlb_flush_marks = tlb_flush_marks
        self.buffer_kb = buffer_kb
        self.path = os.path.join(TRACEFS, "instances", own_name("ipi_oracle"))
        self.enabled: list[str] = []

    def mark(self) -> None:
        # The mark must be written on the traced CPU: the others are masked out.
        old = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {self.cpu})
        try:
            before = time.monotonic_ns()
            with open(os.path.join(self.path, "trace_marker"), "w") as f:
                f.write(f"{CLOCK_MARK} {before}\n")
        finally:
            os.sched_setaffinity(0, old)

    def __enter__(self) -> "IpiOracle":
        if not os.path.isdir(os.path.join(TRACEFS, "instances")):
            skip("tracefs instances are not available (needed for the IPI oracle)")
        os.mkdir(self.path)
        try:
            if "x86-tsc" not in read_file(os.path.join(self.path, "trace_clock")):
                skip("the x86-tsc trace clock is not available (needed for ns timestamps)")
            write_file(os.path.join(self.path, "trace_clock"), "x86-tsc")
            write_file(os.path.join(self.path, "tracing_cpumask"), f"{1 << self.cpu:x}")
            write_file(os.path.join(self.path, "buffer_size_kb"), str(self.buffer_kb))
            csd = (not self.tlb_flush_marks and
                   os.path.isdir(os.path.join(self.path, "events", "csd", "csd_function_entry")))
            for e in IPI_EVENTS + (IPI_CSD_EVENTS if csd else IPI_TLB_EVENTS):
                write_file(os.path.join(self.path, "events", e, "enable"), "1")
                self.enabled.append(e)
        except BaseException:
            self.__exit__()
            raise
        return self

    def stop(self) -> IpiTrace:
        write_file(os.path.join(self.path, "tracing_on"), "0")
        trace = parse_ipi_trace(read_file(os.path.join(self.path, "trace")), self.cpu)
        if trace.lost:
            raise Failure("the IPI oracle lost events (buffer too small)")
        return trace

    def __exit__(self, *exc) -> None:
        remove_ftrace_instance(self.path, self.enabled)


# ---------------------------------------------------------------- output collection

class _Collector(threading.Thread):
    """Reads a pipe to the end in the background so that the child never blocks on it."""

    def __init__(self, pipe, on_line: Optional[Callable[[str], None]] = None):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.on_line = on_line
        self.lines: list[str] = []
        self.start()

    def run(self) -> None:
        for raw in iter(self.pipe.readline, b""):
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            if self.on_line:
                self.on_line(line)
        self.pipe.close()

    def text(self, timeout: float = 5.0) -> str:
        self.join(timeout)
        return "".join(self.lines)


# The JSON lines the scenario read from memlat tools (what printed each, the line).
_JSON_READ: list[tuple[str, dict]] = []
# The names a memlat tool runs under (the multi-call binary and its links).
_TOOL_BINARIES = {"memlat", "memtop"} | set(source_tools())


def check_json_keys(t: "Test") -> None:
    """Every JSON line a scenario read from a memlat tool holds to docs/output.md's keys rule:
    a key has one JSON type, and a key with a unit's suffix the type of that unit."""
    from json_vocabulary import check_keys
    if _JSON_READ:
        check_keys(t, _JSON_READ, "the tools' JSON keys")


class Result:
    def __init__(self, argv: Sequence[str], rc: Optional[int], stdout: str, stderr: str,
                 elapsed: float):
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed
        self.keys_kept = False  # its JSON lines are in _JSON_READ

    def json_lines(self) -> list[dict]:
        """stdout parsed as JSON lines; a line that does not parse is a test failure. A memlat
        tool's lines are also kept for the scenario's end, which holds their keys to
        docs/output.md (check_json_keys())."""
        out = []
        for n, line in enumerate(self.stdout.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise Failure(f"stdout line {n} of {' '.join(self.argv)} is not JSON ({e}): "
                              f"{line[:300]!r}")
        if self.argv and os.path.basename(self.argv[0]) in _TOOL_BINARIES and \
                not self.keys_kept:
            self.keys_kept = True
            _JSON_READ.extend((" ".join(self.argv[:3]), obj) for obj in out
                              if isinstance(obj, dict))
        return out

    def describe(self, limit: int = 2000) -> str:
        def cut(s: str) -> str:
            return s if len(s) <= limit else s[:limit] + f"... [{len(s) - limit} more chars]"
        return (f"command: {' '.join(self.argv)}\nexit status: {self.rc}\n"
                f"--- stderr ---\n{cut(self.stderr)}--- stdout ---\n{cut(self.stdout)}")


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


class Tool:
    """Context manager running a memlat tool with MEMLAT_READY=1.

    On entry it starts the tool and waits (READY_TIMEOUT) for "memlat: ready" on stderr; if
    the tool exits or times out first, that is a Failure showing its output. The body then
    runs the workload. On exit the tool is stopped with SIGINT (unless it already ended, or
    wait_exit=True: then it is left to end by itself, e.g. with -d or an interval count) and
    `result` holds its exit status and output. The tool is killed if anything goes wrong.
    `program` runs another binary than BUILD/NAME (an installed one: test_deb.py)."""

    def __init__(self, name: str, *args: str, env: Optional[dict] = None,
                 wait_exit: bool = False, exit_timeout: float = 30.0,
                 ready_timeout: float = READY_TIMEOUT, watch_bpf: bool = False,
                 prefix: Sequence[str] = (), program: Optional[str] = None):
        self.argv = [program or binary(name), *args]
        self.prefix = list(prefix)  # a command that runs the tool (setpriv ...)
        self.name = name
        self.watch_bpf = watch_bpf
        self.bpf_watch: Optional[BpfWatch] = None
        env = dict(env or {})
        if _BTF_VARIANT.path:
            # The run as on a kernel without BTF of its own: CO-RE from a file, no tp_btf or
            # fentry, no kernel-BTF-only helpers; -v shows the BTF and hooks, checked at the end.
            self.argv += ["--btf", _BTF_VARIANT.path] + ([] if "-v" in args else ["-v"])
            disabled = [x for x in env.get("MEMLAT_DISABLE_FEATURES", "").split(",") if x]
            env["MEMLAT_DISABLE_FEATURES"] = ",".join(disabled + ["kernel_btf"])
            _BTF_VARIANT.tools.append(self)
        elif "kernel_btf" in env.get("MEMLAT_DISABLE_FEATURES", "").split(",") and \
                "--btf" not in args:
            # Without the kernel's own BTF a tool needs another for CO-RE (6.18 has none
            # embedded): the variant no_kernel_btf runs as a BTF-less host given --btf.
            self.argv += ["--btf", kernel_btf_copy()]
        self.env = dict(os.environ, MEMLAT_READY="1", **env)
        self.extra_env = env
        self.wait_exit = wait_exit
        self.exit_timeout = exit_timeout
        self.ready_timeout = ready_timeout
        self.proc: Optional[subprocess.Popen] = None
        self.result: Optional[Result] = None
        self.ready_at: Optional[float] = None
        self._ready = threading.Event()

    def _on_stderr(self, line: str) -> None:
        if line.strip() == READY_LINE:
            self._ready.set()

    def __enter__(self) -> "Tool":
        envs = " ".join(f"{k}={v}" for k, v in self.extra_env.items())
        log(f"$ {envs + ' ' if envs else ''}{' '.join(self.argv)}")
        self.started_at = time.monotonic()
        command = (_UNPRIVILEGED.command(self.name, self.argv) if _UNPRIVILEGED.on
                   else self.prefix + self.argv)
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env, start_new_session=True)
        if self.watch_bpf:
            self.bpf_watch = BpfWatch(self.proc.pid)
        self._out = _Collector(self.proc.stdout)
        self._err = _Collector(self.proc.stderr, self._on_stderr)
        deadline = time.monotonic() + self.ready_timeout
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                why = ("exited before it was ready" if self.proc.poll() is not None
                       else f"was not ready within {self.ready_timeout:.0f} s")
                self._finish(stop=False, timeout=0.2, quiet=True)
                raise Failure(f"the tool {why}\n{self.result.describe()}")
        self.ready_at = time.monotonic()
        log(f"  tool ready after {self.ready_at - self.started_at:.2f} s (pid {self.proc.pid})")
        if _UNPRIVILEGED.on:
            _UNPRIVILEGED.record(self)
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> Result:
        """SIGINT the tool (if still running) and collect its output."""
        if self.result is None:
            self._finish(stop=True)
        return self.result

    def wait(self) -> Result:
        """Let the tool end by itself (within exit_timeout) and collect its output."""
        if self.result is None:
            self._finish(stop=False, timeout=self.exit_timeout)
        return self.result

    def _finish(self, stop: bool, timeout: float = STOP_TIMEOUT, quiet: bool = False) -> None:
        proc = self.proc
        if stop and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = not quiet
        _kill_group(proc)
        end = time.monotonic()
        self.result = Result(self.argv, None if timed_out else proc.returncode,
                             self._out.text(), self._err.text(), end - self.started_at)
        if timed_out:
            raise Failure(f"the tool did not exit within {timeout:.0f} s "
                          f"{'of SIGINT' if stop else 'by itself'}; killed\n"
                          f"{self.result.describe()}")

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            if self.proc is not None:
                _kill_group(self.proc)
            return
        if self.wait_exit:
            self.wait()
        else:
            self.stop()


def exporter_port(tool: Tool) -> int:
    """The port the tool says it serves on (it was given port 0: the kernel chose)."""
    for line in tool._err.lines:
        m = re.search(r"serving Prometheus metrics on https?://[^ ]*:(\d+)/metrics", line)
        if m:
            return int(m.group(1))
    raise Failure("the tool did not say where it serves:\n" + "".join(tool._err.lines))


def run(argv: Sequence[str], timeout: float = 30.0, env: Optional[dict] = None) -> Result:
    """Runs a command to its end (killed after timeout: a Failure)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, **(env or {})),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        res = Result(argv, None, out.decode(errors="replace"), err.decode(errors="replace"),
                     time.monotonic() - t0)
        raise Failure(f"command did not finish within {timeout:.0f} s; killed\n{res.describe()}")
    finally:
        _kill_group(proc)
    return Result(argv, proc.returncode, out.decode(errors="replace"),
                  err.decode(errors="replace"), time.monotonic() - t0)


# ---------------------------------------------------------------- workloads

class Workload:
    """A workload started in the background; always killed on exit of the `with` block.

    held=True starts it held at the door: the process exists (so its PID can be given to a
    tool's -p) but exec()s the workload only when release() is called; the PID stays the
    same across the exec. A program not of the build (stress-ng) is given as a path."""

    def __init__(self, name: str, *args: str, held: bool = False):
        self.argv = [name if os.path.isabs(name) else binary(name), *args]
        self.held = held
        self.proc: Optional[subprocess.Popen] = None
        self._pid_line = threading.Event()

    def _on_stdout(self, line: str) -> None:
        if line.startswith("pid="):
            self._pid_line.set()

    def __enter__(self) -> "Workload":
        argv = self.argv
        if self.held:
            argv = ["/bin/sh", "-c", 'read -r _go && exec "$0" "$@"', *self.argv]
        log(f"$ {' '.join(self.argv)}{'   (held until released)' if self.held else ''}")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE if self.held else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.pid = self.proc.pid
        self._out = _Collector(self.proc.stdout, self._on_stdout)
        self._err = _Collector(self.proc.stderr)
        if self.held:
            self._wait_at_the_door()
        return self

    # The read system call's number, which the held shell blocks in.
    _READ_SYSCALL = {"x86_64": 0, "aarch64": 63}

    def _wait_at_the_door(self) -> None:
        """Waits (at most 5 s) until the held shell blocks in its read: its start-up (the
        dynamic loader's mprotect()s, page faults, remote TLB flushes when it ran on both
        CPUs) is then over, and cannot fall between a tool's start and an oracle's (seen:
        tlbflush's culprits one request short of ftrace's, 3 runs in 10)."""
        read_nr = self._READ_SYSCALL.get(os.uname().machine)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{self.pid}/syscall") as f:
                    fields = f.read().split()
            except OSError:
                return
            if read_nr is None or (fields and fields[0] == str(read_nr)):
                return
            time.sleep(0.002)
        log(f"  workload {self.pid}: not blocked at the door after 5 s; going on")

    def release(self) -> None:
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()

    def wait_done(self, timeout: float) -> dict:
        """Waits for the "pid=P iterations=N" line (the loop ended; it may still linger)."""
        if not self._pid_line.wait(timeout):
            self.kill()
            raise Failure(f"workload did not report within {timeout:.0f} s\n"
                          f"stdout: {self._out.text(1)!r}\nstderr: {self._err.text(1)!r}")
        for line in self._out.lines:
            m = re.match(r"pid=(\d+) iterations=(\d+)", line)
            if m:
                return {"pid": int(m.group(1)), "iterations": int(m.group(2))}
        raise Failure(f"unexpected workload output {''.join(self._out.lines)!r}")

    def wait_exit(self, timeout: float) -> int:
        """Waits for the process to end (after wait_done(): its exit too, which may unmap and
        flush); its exit status."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failure(f"workload did not exit within {timeout:.0f} s")

    def kill(self) -> None:
        if self.proc is not None:
            _kill_group(self.proc)

    def __exit__(self, *exc) -> None:
        self.kill()


def process_storm(path: str, count: int, rate: float, deadline: float) -> int:
    """Runs short-lived file_readers reading `path` one after another, at most `rate` a second,
    until `count` ran or the monotonic `deadline` passed; returns how many ran."""
    ran = 0
    start = time.monotonic()
    while ran < count and time.monotonic() < deadline:
        if subprocess.run([binary("file_reader"), "--file", path], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0:
            ran += 1
        ahead = ran / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    return ran


def run_workload(name: str, *args: str, timeout: float = 60.0) -> dict:
    """Runs a workload to its end; returns {"pid", "iterations"} from its last line."""
    log(f"$ {binary(name)} {' '.join(args)}")
    res = run([binary(name), *args], timeout=timeout)
    m = re.search(r"pid=(\d+) iterations=(\d+)", res.stdout)
    if res.rc != 0 or not m:
        raise Failure(f"workload failed\n{res.describe()}")
    return {"pid": int(m.group(1)), "iterations": int(m.group(2))}


# ---------------------------------------------------------------- checks and scenarios

class Test:
    """Checks of one scenario. Each prints one line: ok/FAIL, what, expected, actual."""

    def __init__(self, name: str):
        self.name = name
        self.failures: list[str] = []
        self.checks = 0

    def _report(self, ok: bool, what: str, detail: str) -> bool:
        self.checks += 1
        line = f"{'ok  ' if ok else 'FAIL'}  {what}: {detail}"
        log(line)
        if not ok:
            self.failures.append(line)
        return ok

    def check(self, ok: bool, what: str, expected: str = "", actual: object = "") -> bool:
        return self._report(bool(ok), what, f"expected {expected}, actual {actual}")

    def check_eq(self, what: str, expected: object, actual: object) -> bool:
        return self._report(expected == actual, what,
                            f"expected {expected!r}, actual {actual!r} (exact)")

    def check_ge(self, what: str, minimum: float, actual: float, how: str = "") -> bool:
        return self._report(actual >= minimum, what,
                            f"expected >= {_num(minimum)}{' (' + how + ')' if how else ''}, "
                            f"actual {_num(actual)}")

    def check_le(self, what: str, maximum: float, actual: float, how: str = "") -> bool:
        return self._report(actual <= maximum, what,
                            f"expected <= {_num(maximum)}{' (' + how + ')' if how else ''}, "
                            f"actual {_num(actual)}")

    def check_close(self, what: str, expected: float, actual: float, rel_tol: float,
                    abs_tol: float = 0) -> bool:
        """|actual - expected| <= max(rel_tol * expected, abs_tol)."""
        diff = actual - expected
        allowed = max(rel_tol * abs(expected), abs_tol)
        rel = (diff / expected * 100) if expected else float("inf") if diff else 0.0
        ok = abs(diff) <= allowed
        return self._report(ok, what,
                            f"expected {_num(expected)} +/- {rel_tol * 100:g}% (+/- {_num(allowed)}), "
                            f"actual {_num(actual)} (diff {diff:+g}, {rel:+.3f}%)")

    def check_in(self, what: str, needle: str, haystack: str, where: str = "output") -> bool:
        ok = needle in haystack
        shown = "" if ok else f"\n---- {where} ----\n{haystack[:3000]}\n----"
        return self._report(ok, what, f"expected {needle!r} in {where}, "
                                      f"actual {'present' if ok else 'absent'}{shown}")

    def require(self, ok: bool, what: str, expected: str = "", actual: object = "") -> None:
        if not self.check(ok, what, expected, actual):
            raise Failure(f"cannot go on after: {what}")


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


# ---------------------------------------------------------------- checks every tool's tests make

def pprof_raw(t: Test, path: str) -> tuple[list[dict], dict[int, str]]:
    """A profile read by Go's own pprof (`go tool pprof -raw`, Debian's golang-go): its samples
    ({"values": [...], "locations": [ids, innermost first], "labels": {key: value}}) and the
    function name of each location id. pprof refusing the file fails the test."""
    if shutil.which("go") is None:
        raise Failure("go tool pprof, the oracle of the profiles, is missing: install Debian's "
                      "golang-go (the README's install command does)")
    res = run(["go", "tool", "pprof", "-raw", path], timeout=120)
    t.require(res.rc == 0, f"go tool pprof -raw {os.path.basename(path)}: exit status", 0,
              f"{res.rc}: {res.stderr[-400:]}")
    samples: list[dict] = []
    names: dict[int, str] = {}
    section = ""
    for line in res.stdout.splitlines():
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
            continue
        if section == "Samples:":
            m = re.fullmatch(r"\s*(\d+)\s+(\d+): ([\d ]*)", line)
            if m:
                samples.append({"values": [int(m.group(1)), int(m.group(2))],
                                "locations": [int(x) for x in m.group(3).split()],
                                "labels": {}})
            elif samples:
                for key, value in re.findall(r"(\w+):\[([^\]]*)\]", line):
                    samples[-1]["labels"][key] = value
        elif section == "Locations":
            m = re.fullmatch(r"\s*(\d+): 0x[0-9a-f]+(?: M=\d+)?\s*(.*?)(?: :\d+ s=\d+)?", line)
            if m:
                names[int(m.group(1))] = m.group(2)
    return samples, names


def check_bad_arguments(t: Test, tool: str, cases: Sequence[tuple[Sequence[str], str]],
                        timeout: float = 15.0) -> None:
    """Runs `tool` once per (arguments, message) case: each must be refused as a usage error
    (exit status 2) with `message` on stderr."""
    path = binary(tool)
    for args, message in cases:
        res = run([path, *args], timeout=timeout)
        t.check_eq(f"{tool} {' '.join(args)}: exit status", 2, res.rc)
        t.check_in(f"{tool} {' '.join(args)}: message", message, res.stderr, "stderr")


def shared_bad_arguments(*, tid: bool = False, cgroup: bool = False,
                         interval_count: bool = False) -> list[tuple[list[str], str]]:
    """The usage errors of the options tools share (lib/): -p, and where the tool has
    them -t, -G and [interval [count]], and an option no tool has; for check_bad_arguments."""
    cases = [(["-p", "999999999"], "no process with id 999999999"),
             (["-p", "abc"], "-p takes a number, not 'abc'")]
    if tid:
        cases.append((["-t", "999999999"], "no thread with id 999999999"))
    if cgroup:
        cases += [(["-G", "/tmp"], "is not a cgroup directory"),
                  (["-G", "/nonexistent/cgroup"], "does not exist")]
    if interval_count:
        cases += [(["0"], "the interval must be a positive number"),
                  (["1", "0"], "the count must be a positive number")]
    cases.append((["--bogus"], "unrecognized option"))
    return cases


def check_help(t: Test, tool: str, documented: Iterable[str], width: Optional[int] = 80,
               timeout: float = 15.0) -> None:
    """`tool -h` exits with status 0 and its stdout names every item of `documented` (options,
    columns, environment variables); unless `width` is None, no line is longer than it."""
    res = run([binary(tool), "-h"], timeout=timeout)
    t.check_eq(f"{tool} -h exit status", 0, res.rc)
    for item in documented:
        t.check_in(f"-h documents {item}", item, res.stdout)
    if width is not None:
        t.check(all(len(l) <= width for l in res.stdout.splitlines()),
                f"-h lines fit {width} columns",
                f"<= {width}", max(len(l) for l in res.stdout.splitlines()))


def snoop_events(t: Test, result: Result) -> list[dict]:
    """The per-event objects ("kind" and "lat_ns") of a snoop tool's -j output (drsnoop,
    compactsnoop), after requiring that it printed exactly one exit summary."""
    lines = result.json_lines()
    summary = [j for j in lines if "summary" in j]
    t.require(len(summary) == 1, f"{os.path.basename(result.argv[0])} printed its exit summary "
              "(one JSON object)", "1", len(summary))
    return [j for j in lines if "kind" in j and "lat_ns" in j]


def kernel_btf_copy() -> str:
    """A copy of this kernel's BTF in the build directory: what a host without BTF of its own
    gets with --btf (tests run the no-BTF paths with it)."""
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        skip("this kernel has no /sys/kernel/btf/vmlinux to copy")
    path = os.path.join(build_dir(), "runtime-btf", "vmlinux.btf")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}"
    with open("/sys/kernel/btf/vmlinux", "rb") as src, open(tmp, "wb") as dst:
        dst.write(src.read())
    os.replace(tmp, path)
    return path


class _BtfVariant:
    """`SCENARIO --btf-file`: the scenario as it runs on a kernel without BTF of its own.
    Every Tool gets `--btf COPY -v` (COPY: a copy of /sys/kernel/btf/vmlinux in the build
    directory) and MEMLAT_DISABLE_FEATURES=kernel_btf; the scenario's own checks must pass
    as they do normally, and each run's -v must name the file and no tp_btf/fentry hook."""

    def __init__(self) -> None:
        self.path: Optional[str] = None
        self.tools: list["Tool"] = []

    def start(self) -> None:
        self.path = kernel_btf_copy()

    def check(self, t: "Test") -> None:
        t.require(bool(self.tools), "the scenario ran a tool", "at least 1", len(self.tools))
        for tool in self.tools:
            if tool.result is None:
                continue
            err = tool.result.stderr
            t.check_in(f"{os.path.basename(tool.argv[0])} -v names the BTF",
                       f"BTF: {self.path} (--btf)", err, "stderr")
            chosen = re.findall(r"^\S.*: using (\S+)", err, re.M)
            log("  -v: " + "; ".join(line for line in err.splitlines()
                                     if line.startswith("BTF: ") or ": using " in line))
            t.check_ge("hooks named by -v", 1, len(chosen))
            t.check_eq("hooks that need the kernel's own BTF (tp_btf, fentry) chosen", [],
                       [c for c in chosen if c.split("/")[-1] in ("tp_btf", "fentry")])


_BTF_VARIANT = _BtfVariant()


# Capability bits (linux/capability.h) of those the tools may need.
CAPABILITY_BITS = {"dac_read_search": 2, "sys_ptrace": 19, "sys_admin": 21, "syslog": 34, "perfmon": 38, "bpf": 39}


def kernel_at_least(major: int, minor: int) -> bool:
    """Whether the running kernel's release is major.minor or later."""
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (major, minor)


def required_capabilities(tool: str, args: Sequence[str]) -> list[str]:
    """The capabilities docs/least-privilege.md names for TOOL ARGS: CAP_BPF and
    CAP_PERFMON for every tool; CAP_SYSLOG where kernel addresses are read (tlbflush -L,
    --culprits, -s; compactsnoop -K and lockstall before 5.16; memstall before 5.17); CAP_SYS_PTRACE for
    tlbflush's and memstall's -s (user stacks); CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE for
    cachestat -f's paths."""
    if tool == "memlat" and args[:1] == ["exporter"]:
        # `memlat exporter` needs what each of its tools needs with the options given to it
        # as --TOOL.NAME (every tool by default).
        caps = {"bpf", "perfmon"}
        for name in ("tlbflush", "compactsnoop", "cachestat", "memstall"):
            own = ["--" + a[len(name) + 3:] for a in args if a.startswith(f"--{name}.")]
            caps.update(required_capabilities(name, own))
        return sorted(caps, key=list(CAPABILITY_BITS).index)
    caps = ["bpf", "perfmon"]
    flags = set()
    for a in args:
        if a.startswith("--"):
            flags.add(a)
        elif a.startswith("-") and len(a) > 1:
            flags.update(f"-{c}" for c in a[1:])
    # Kernel addresses: tlbflush's flush callbacks in every kernel; names of kernel frames
    # before 5.16 (from then on the kernel names them, "%pS", for CAP_BPF); memstall's
    # classifying functions before 5.17 (from then on its program has the kernel name them).
    symbolised = {"tlbflush": {"-L", "--latency", "--culprits", "-s", "--stacks"}}.get(tool, set())
    if not kernel_at_least(5, 16):
        symbolised |= {"compactsnoop": {"-K", "--kernel-stack"}}.get(tool, set())
    if flags & symbolised or (tool == "memstall" and not kernel_at_least(5, 17)) or \
            (tool == "lockstall" and not kernel_at_least(5, 16)):
        caps.append("syslog")
    if tool in ("tlbflush", "memstall") and flags & {"-s", "--stacks"}:
        caps.append("sys_ptrace")  # user stacks: the libraries through /proc/PID/root
    if tool == "cachestat" and flags & {"-f", "--per-file"}:
        caps += ["dac_read_search", "sys_ptrace"]  # the paths of other users' open files
    return caps


def setpriv_command(caps: Sequence[str]) -> list[str]:
    """setpriv as user and group nobody, no supplementary groups, with only CAPS (inherited
    and ambient, so that they survive the exec as a non-root user)."""
    command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if caps:
        listed = ",".join(f"+{c}" for c in caps)
        command += [f"--inh-caps={listed}", f"--ambient-caps={listed}"]
    return command


def check_refused_unprivileged(t: Test, tool: str, message: str) -> None:
    """`tool -d 1` as user nobody without capabilities is refused at run time (exit status 1)
    with `message` (what it needs) on stderr."""
    res = run(setpriv_command([]) + [binary(tool), "-d", "1"], timeout=15)
    t.check_eq(f"{tool} as nobody: exit status", 1, res.rc)
    t.check_in(f"{tool} as nobody: message", message, res.stderr, "stderr")


class _Unprivileged:
    """`SCENARIO --unprivileged`: the scenario with every Tool run as user nobody with only the
    capabilities docs/least-privilege.md names for it (required_capabilities(), through setpriv); the
    scenario's own checks must pass as they do as root, and each tool, once ready, must have
    run as uid 65534 with exactly those capabilities effective."""

    def __init__(self) -> None:
        self.on = False
        self.runs: list[tuple[str, list[str], Optional[str], Optional[int], bool]] = []

    def command(self, name: str, argv: list[str]) -> list[str]:
        return setpriv_command(required_capabilities(name, argv[1:])) + argv

    def record(self, tool: "Tool") -> None:
        uid, cap_eff = None, None
        try:
            with open(f"/proc/{tool.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        uid = line.split()[1]
                    elif line.startswith("CapEff:"):
                        cap_eff = int(line.split()[1], 16)
        except OSError:
            pass
        self.runs.append((tool.name, required_capabilities(tool.name, tool.argv[1:]), uid,
                          cap_eff, "--prometheus" in tool.argv or tool.argv[1:2] == ["exporter"]))

    def check(self, t: "Test") -> None:
        t.require(bool(self.runs), "the scenario ran a tool", "at least 1", len(self.runs))
        for name, caps, uid, cap_eff, exporter in self.runs:
            expected = sum(1 << CAPABILITY_BITS[c] for c in caps)
            log(f"  {name} ran as uid {uid} with CapEff {cap_eff or 0:#x} "
                f"({', '.join('CAP_' + c.upper() for c in caps)})")
            t.check_eq(f"{name} ran as nobody (real and effective uid)", "65534", uid)
            if exporter:
                # --prometheus drops every capability once attached, around the ready line.
                t.check(cap_eff in (expected, 0), f"{name}'s effective capabilities: those "
                        "given, or none once the exporter dropped them",
                        f"{expected:#x} or 0", hex(cap_eff or 0))
            else:
                t.check_eq(f"{name}'s effective capabilities", hex(expected), hex(cap_eff or 0))


_UNPRIVILEGED = _Unprivileged()


# ---------------------------------------------------------------- old-kernel fall-backs

# The kernel features the tools can do without, forced off on this kernel so that the host
# tests run the old kernels' paths (MEMLAT_DISABLE_FEATURES): "" is this kernel's own choice;
# "old_kernel" is Linux 5.5-5.7 (no bpf_get_current_task_btf(), no ring buffer: CO-RE reads of
# the current task and perf buffers); "no_kernel_btf" is a kernel without /sys/kernel/btf/vmlinux as well (no tp_btf,
# no bpf_get_current_task_btf()). Scenarios that test them register one scenario per variant
# (scenario names get the suffix "_old_kernel" / "_no_kernel_btf").
FEATURE_VARIANTS: dict[str, dict[str, str]] = {
    "": {},
    "old_kernel": {"MEMLAT_DISABLE_FEATURES": "task_btf,ringbuf"},
    "no_kernel_btf": {"MEMLAT_DISABLE_FEATURES": "task_btf,ringbuf,kernel_btf",
                      "MEMLAT_DISABLE_HOOKS": "tp_btf,fentry"},
}


def variant_env(variant: str, disable_hooks: str = "") -> dict[str, str]:
    """The environment of a feature variant, with `disable_hooks` (MEMLAT_DISABLE_HOOKS of the
    scenario itself) merged into the variant's."""
    env = dict(FEATURE_VARIANTS[variant])
    hooks = [h for h in (env.get("MEMLAT_DISABLE_HOOKS", ""), disable_hooks) if h]
    if hooks:
        env["MEMLAT_DISABLE_HOOKS"] = ",".join(hooks)
    return env


def variant_scenarios(base: str, btf_file: bool = False, unprivileged: bool = False):
    """Registers fn(t, variant) once per FEATURE_VARIANTS entry: base, base_old_kernel,
    base_no_kernel_btf; `btf_file` and `unprivileged` (see scenario()) apply to base."""
    def register(fn):
        for variant in FEATURE_VARIANTS:
            name = base + (f"_{variant}" if variant else "")
            scenario(name, btf_file and not variant,
                     unprivileged and not variant)(lambda t, v=variant: fn(t, v))
        return fn
    return register


THREAD_STATE_RE = re.compile(
    r"per-thread hash map (\w+): (\d+) entries created, (\d+) removed at thread exit, "
    r"(\d+) left, (\d+) of them of threads that no longer exist, (\d+) evicted")


def check_variant_chosen(t: Test, variant: str, stderr: str, events: bool = False,
                         thread_state: bool = True) -> Optional[dict]:
    """Checks from a -v run's stderr that the tool chose the fall-backs of `variant` (the
    features, the event buffer when `events`) and, with `thread_state`, the thread-exit
    clean-up of its per-thread hash map (a hash map keyed by thread id on every kernel), and
    returns that map's counts ({"created", "removed_at_exit", "left", "left_dead"}); None
    without `thread_state`. No entry may be left of a thread that no longer exists."""
    if not variant:
        # The --btf-file variant of a scenario runs without the kernel's own BTF, which
        # bpf_get_current_task_btf() needs.
        storage = "no" if _BTF_VARIANT.path else "yes"
        t.check_in("-v: bpf_get_current_task_btf() as this run allows",
                   f"bpf_get_current_task_btf() (5.11): {storage}", stderr, "stderr")
        if events:
            t.check_in("-v: events through the ring buffer", "events through a BPF ring buffer",
                       stderr, "stderr")
    else:
        if thread_state:
            t.check_in("-v: bpf_get_current_task_btf() forced off",
                       "bpf_get_current_task_btf() (5.11): no", stderr, "stderr")
        t.check_in("-v: ring buffer forced off", "ring buffer (5.8): no, using a perf buffer",
                   stderr, "stderr")
        if events:
            t.check_in("-v: events through perf buffers", "events through perf buffers", stderr,
                       "stderr")
        if variant == "no_kernel_btf":
            t.check_in("-v: kernel BTF forced off", "kernel BTF (/sys/kernel/btf/vmlinux): no",
                       stderr, "stderr")
            t.check(not re.search(r": using (\w+/)?tp_btf", stderr), "-v: no tp_btf hook chosen",
                    "none", re.findall(r".*: using (?:\w+/)?tp_btf.*", stderr))
    if not thread_state:
        return None
    t.check_in("-v: thread-exit clean-up attached",
               "sched:sched_process_exit (per-thread hash map clean-up): using", stderr,
               "stderr")
    m = THREAD_STATE_RE.search(stderr)
    t.require(m is not None, "-v reports the per-thread hash map", "a line", "none")
    counts = {"created": int(m.group(2)), "removed_at_exit": int(m.group(3)),
              "left": int(m.group(4)), "left_dead": int(m.group(5)),
              "evicted": int(m.group(6))}
    t.check_eq(f"hash map {m.group(1)}: entries left of threads that no longer exist (leaks)",
               0, counts["left_dead"])
    return counts


_SCENARIOS: dict[str, Callable[[Test], None]] = {}
_BTF_FILE_RUNS: list[str] = []


def field(t: Test, obj: Optional[dict], key: str, where: str = "the JSON") -> float:
    """obj[key] for a bound to compare: a field that is missing or null is a failed check and
    NaN, which every bound then fails too, never a 0 that an upper bound lets pass."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if value is None:
        t.check(False, f"{where} has {key!r}", "a value", "missing or null")
        return float("nan")
    return value


def verdict(t: Test, body: Callable[[], None]) -> tuple[str, str]:
    """Runs `body` (a scenario, or a VM checker) and judges it: ("PASS", "FAIL" or "SKIP",
    a detail). The one judge of the host and the VM runners, so that they cannot differ:
    - a check that failed stays failed: skip() after any failed check is a FAIL, whose
      first failure is the reason (a precondition is measured before anything is checked);
    - require() and harness errors (Failure) and a bug of the test (any exception) fail;
    - a body that made no check at all fails: it proved nothing."""
    try:
        body()
    except Skip as e:
        if not t.failures:
            log(f"skipped: {e}")
            return "SKIP", str(e)
        log(f"FAIL  said \"skipped: {e}\" after {len(t.failures)} failed check(s): a check "
            "that failed is never turned into a skip")
        t.failures.append(f"skipped after a failed check: {e}")
    except Failure as e:
        t.failures.append(str(e))
        log(f"FAIL  {e}")
    except Exception:  # a bug of the test itself: still a failure, with the traceback
        t.failures.append("exception")
        log("FAIL  raised:\n" + traceback.format_exc())
    if t.failures:
        return "FAIL", (f"{len(t.failures)} of {max(t.checks, len(t.failures))} checks failed: "
                        f"{t.failures[0].splitlines()[0]}")
    if t.checks == 0:
        return "FAIL", "no check was made"
    return "PASS", f"{t.checks} checks"


_UNPRIVILEGED_RUNS: list[str] = []


def scenario(name: str, btf_file: bool = False, unprivileged: bool = False):
    """Registers a scenario function taking a Test. The registry is what ctest runs (one test
    runtime.NAME per scenario, tests/CMakeLists.txt asks each script with --list); with
    `btf_file` the scenario also runs as on a kernel without BTF of its own
    (runtime.NAME.btf_file, see _BtfVariant); with `unprivileged` also as user nobody with only
    the capabilities docs/least-privilege.md names (runtime.NAME.unprivileged, see _Unprivileged)."""
    def register(fn: Callable[[Test], None]):
        if name in _SCENARIOS:
            raise ValueError(f"scenario {name} defined twice")
        _SCENARIOS[name] = fn
        if btf_file:
            _BTF_FILE_RUNS.append(name)
        if unprivileged:
            _UNPRIVILEGED_RUNS.append(name)
        return fn
    return register


def scenarios() -> list[str]:
    """Every run of the script, as ctest registers them: "NAME", "NAME --btf-file" or
    "NAME --unprivileged"."""
    return (list(_SCENARIOS) + [f"{name} --btf-file" for name in _BTF_FILE_RUNS]
            + [f"{name} --unprivileged" for name in _UNPRIVILEGED_RUNS])


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--list"]:
        print("\n".join(scenarios()))
        return 0
    btf_file = argv[1:] == ["--btf-file"]
    unprivileged = argv[1:] == ["--unprivileged"]
    if btf_file or unprivileged:
        argv = argv[:1]
    if len(argv) != 1 or argv[0] not in _SCENARIOS:
        print(f"usage: {os.path.basename(sys.argv[0])} SCENARIO [--btf-file|--unprivileged]"
              " | --list\n"
              "scenarios: "
              + " ".join(_SCENARIOS), file=sys.stderr)
        return 2
    name = argv[0]
    t = Test(name + (" --btf-file" if btf_file else "") + (" --unprivileged" if unprivileged else ""))
    t0 = time.monotonic()

    def body() -> None:
        require_root()
        ensure_tracefs()
        if btf_file:
            _BTF_VARIANT.start()
        _UNPRIVILEGED.on = unprivileged
        _SCENARIOS[name](t)
        check_json_keys(t)
        if btf_file:
            _BTF_VARIANT.check(t)
        if unprivileged:
            _UNPRIVILEGED.check(t)

    status, detail = verdict(t, body)
    took = time.monotonic() - t0
    if status == "SKIP":
        return SKIP_STATUS
    if status == "FAIL":
        log(f"\nFAIL: {name}: {detail} ({took:.1f} s)")
        for f in t.failures:
            log("  " + f.splitlines()[0])
        return 1
    log(f"\nPASS: {name}: {t.checks} checks ({took:.1f} s)")
    return 0
