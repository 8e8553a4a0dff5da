#!/usr/bin/env python3
"""Runtime tests of drsnoop: real reclaim on the live kernel, started by the tests themselves.

The memory-cgroup scenarios make a cgroup with a 32 MiB limit and read a 128 MiB file inside
it, so the kernel must reclaim the cgroup's page cache again and again (memcg limit reclaim).
The oracle is the kernel's own trace: an ftrace instance of our own, filtered to the reader's
PID, records every mm_vmscan_memcg_reclaim_end with its nr_reclaimed, without BPF. drsnoop must
report the same number of stalls and the same sum of pages (tolerance: 0, as both watch the
same tracepoint over a window that contains the whole workload).
"""
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memlat_test import (Failure, Test, Tool, Workload, build_dir, log, run, scenario, skip,  # noqa: E402
                         main, TRACEFS)

LIMIT = 32 << 20
FILE_SIZE = 128 << 20
CGROUP_V1_ROOT = "/sys/fs/cgroup/memory"
CGROUP_V2_ROOT = "/sys/fs/cgroup"


# ---------------------------------------------------------------- the memory cgroup

class MemoryCgroup:
    """A memory cgroup of our own with a limit; removed on exit (v1 or v2, whichever the
    machine has the memory controller on)."""

    def __init__(self, limit: int):
        self.limit = limit
        name = f"memlat_test_{os.getpid()}"
        if os.path.isfile(os.path.join(CGROUP_V1_ROOT, "memory.limit_in_bytes")):
            self.path, self.v1 = os.path.join(CGROUP_V1_ROOT, name), True
        elif "memory" in _read(os.path.join(CGROUP_V2_ROOT, "cgroup.controllers"), "").split():
            self.path, self.v1 = os.path.join(CGROUP_V2_ROOT, name), False
        else:
            skip("no memory cgroup controller on this machine (neither v1 nor v2)")
        self.enabled_controller = False

    def __enter__(self) -> "MemoryCgroup":
        if not self.v1:
            control = os.path.join(CGROUP_V2_ROOT, "cgroup.subtree_control")
            if "memory" not in _read(control, "").split():
                _write(control, "+memory")
                self.enabled_controller = True
        os.mkdir(self.path)
        _write(os.path.join(self.path, "memory.limit_in_bytes" if self.v1 else "memory.max"),
               str(self.limit))
        log(f"memory cgroup {self.path} (cgroup {'v1' if self.v1 else 'v2'}), limit "
            f"{self.limit >> 20} MiB")
        return self

    def __exit__(self, *exc) -> None:
        # The readers have exited by now; a cgroup without tasks can be removed.
        for _ in range(50):
            try:
                os.rmdir(self.path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        else:
            log(f"note: could not remove {self.path}")
        if self.enabled_controller:
            _write(os.path.join(CGROUP_V2_ROOT, "cgroup.subtree_control"), "-memory")


def _read(path: str, default: str = None) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        if default is None:
            raise
        return default


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class ColdFile:
    """A file of our own on a disk file system (the build directory), with its page cache
    evicted (posix_fadvise DONTNEED on this file only: the machine's cache is left alone)."""

    def __init__(self, size: int):
        self.size = size
        self.path = os.path.join(build_dir(), f"memlat_test_reclaim_{os.getpid()}.dat")

    def __enter__(self) -> "ColdFile":
        chunk = b"\x5a" * (1 << 20)
        with open(self.path, "wb") as f:
            for _ in range(self.size // len(chunk)):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        self.evict()
        return self

    def evict(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    def __exit__(self, *exc) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


# ---------------------------------------------------------------- the ftrace oracle

class FtraceOracle:
    """An ftrace instance of our own recording one tracepoint for one PID, without BPF."""

    def __init__(self, event: str, pid: int):
        self.event = event  # e.g. "vmscan/mm_vmscan_memcg_reclaim_end"
        self.pid = pid
        self.path = os.path.join(TRACEFS, "instances", f"memlat_test_{os.getpid()}")

    def __enter__(self) -> "FtraceOracle":
        if not os.path.isdir(os.path.join(TRACEFS, "instances")):
            skip("tracefs instances are not available (needed for the ftrace oracle)")
        os.mkdir(self.path)
        event_dir = os.path.join(self.path, "events", self.event)
        _write(os.path.join(self.path, "buffer_size_kb"), "4096")
        _write(os.path.join(event_dir, "filter"), f"common_pid == {self.pid}")
        _write(os.path.join(event_dir, "enable"), "1")
        return self

    def stop(self) -> list[int]:
        """Disables the event; returns nr_reclaimed of every recorded event."""
        _write(os.path.join(self.path, "events", self.event, "enable"), "0")
        text = _read(os.path.join(self.path, "trace"))
        if "LOST" in text:
            raise Failure("the ftrace oracle lost events (buffer too small)")
        return [int(m) for m in re.findall(r"nr_reclaimed=(\d+)", text)]

    def __exit__(self, *exc) -> None:
        try:
            _write(os.path.join(self.path, "events", self.event, "enable"), "0")
        except OSError:
            pass
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def memcg_events(result, t: Test) -> list[dict]:
    events = [e for e in result.json_lines() if "kind" in e and "lat_ns" in e]
    summary = [e for e in result.json_lines() if "summary" in e]
    t.require(len(summary) == 1, "drsnoop printed its exit summary (one JSON object)",
              "1", len(summary))
    return events


# ---------------------------------------------------------------- scenarios

@scenario("drsnoop_memcg_matches_ftrace")
def _(t: Test):
    with MemoryCgroup(LIMIT) as cg, ColdFile(FILE_SIZE) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, held=True) as reader:
        with FtraceOracle("vmscan/mm_vmscan_memcg_reclaim_end", reader.pid) as oracle, \
                Tool("drsnoop", "-j", "-p", str(reader.pid)) as by_pid, \
                Tool("drsnoop", "-j", "-k", "memcg", "-G", cg.path) as by_cgroup:
            reader.release()
            done = reader.wait_done(60)
            time.sleep(0.3)
            pages_oracle = oracle.stop()
        log(f"reader pid {reader.pid} read {done['iterations']} pass(es)")
    for name, tool in (("-p", by_pid), ("-G", by_cgroup)):
        res = tool.result
        t.check_eq(f"drsnoop {name} exit status", 0, res.rc)
        events = memcg_events(res, t)
        t.check_ge(f"{name}: memcg stalls reported", 10, len(events))
        t.check_eq(f"{name}: PIDs in the events (only the reader's)", {reader.pid},
                   {e["pid"] for e in events})
        t.check_eq(f"{name}: kinds in the events", {"memcg"}, {e["kind"] for e in events})
        t.check_eq(f"{name}: events with LAT > 0", len(events),
                   sum(1 for e in events if e["lat_ns"] > 0))
        t.check_ge(f"{name}: events with PAGES > 0 (most stalls free something)",
                   0.5 * len(events), sum(1 for e in events if e["pages"] > 0))
        t.check_eq(f"{name}: number of stalls vs the ftrace oracle (exact)", len(pages_oracle),
                   len(events))
        t.check_eq(f"{name}: sum of PAGES vs the ftrace oracle's nr_reclaimed (exact)",
                   sum(pages_oracle), sum(e["pages"] for e in events))
        summary = [e for e in res.json_lines() if "summary" in e][0]["summary"]
        mine = [s for s in summary if s["pid"] == reader.pid and s["kind"] == "memcg"]
        t.require(len(mine) == 1, f"{name}: a summary row for the reader", "1", len(mine))
        t.check_eq(f"{name}: summary stalls", len(events), mine[0]["stalls"])
        t.check_eq(f"{name}: summary pages", sum(e["pages"] for e in events), mine[0]["pages"])
        t.check_close(f"{name}: summary max_ms", max(e["lat_ms"] for e in events),
                      mine[0]["max_ms"], rel_tol=1e-6)


@scenario("drsnoop_hist_matches_lines")
def _(t: Test):
    # Both modes watch the same workload at the same time, so they see the same stalls.
    with MemoryCgroup(LIMIT) as cg, ColdFile(FILE_SIZE) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, held=True) as reader:
        with Tool("drsnoop", "-j", "-p", str(reader.pid)) as lines, \
                Tool("drsnoop", "-j", "-H", "-p", str(reader.pid)) as hist, \
                Tool("drsnoop", "-H", "-P", "-p", str(reader.pid)) as text_hist:
            reader.release()
            reader.wait_done(60)
            time.sleep(0.3)
    events = memcg_events(lines.result, t)
    hists = [h for j in hist.result.json_lines() if "histograms" in j for h in j["histograms"]]
    total = sum(h["total"] for h in hists if h["kind"] == "memcg")
    t.check_ge("stalls in line mode", 10, len(events))
    t.check_close("histogram total vs line-mode stalls", len(events), total, rel_tol=0.05)
    t.check_eq("histogram unit", {"usecs"}, {h["unit"] for h in hists})
    out = text_hist.result.stdout
    t.check_in("per-process histogram header", f"pid {reader.pid} (file_reader), memcg reclaim:",
               out)
    t.check_in("star-style histogram", "usecs               : count    distribution", out)


@scenario("drsnoop_extended_text")
def _(t: Test):
    with MemoryCgroup(LIMIT) as cg, ColdFile(FILE_SIZE) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, held=True) as reader:
        with Tool("drsnoop", "-e", "-T", "-U", "-p", str(reader.pid)) as tool:
            reader.release()
            reader.wait_done(60)
            time.sleep(0.3)
            zone_free_kb = sum(int(m) for m in re.findall(r"^\s+pages free\s+(\d+)",
                                                         _read("/proc/zoneinfo"), re.M)) * 4
    out = tool.result.stdout.splitlines()
    header = next((l for l in out if l.startswith("TIME(s)")), "")
    t.check_eq("header", ["TIME(s)", "UID", "COMM", "PID", "LAT(ms)", "PAGES", "KIND", "ORDER",
                          "TID", "CGROUP", "FREE(KB)", "GFP"], header.split())
    rows = [l.split() for l in out if re.match(r"^\d+\.\d+\s", l)]
    t.check_ge("event lines", 10, len(rows))
    if not rows:
        return
    t.check_eq("PID column", {str(reader.pid)}, {r[3] for r in rows})
    t.check_eq("KIND column", {"memcg"}, {r[6] for r in rows})
    t.check_eq("CGROUP column (one cgroup)", 1, len({r[9] for r in rows}))
    free = [int(r[10]) for r in rows]
    # The free memory when each stall began, against the zones' free pages at the end: the
    # workload uses at most its 32 MiB limit, so they agree within a few percent.
    t.check_close("FREE(KB) vs /proc/zoneinfo free pages", zone_free_kb, free[-1], rel_tol=0.05)
    t.check("GFP names decoded", all(r[11].startswith(("GFP_", "__GFP_")) for r in rows),
            "names like GFP_NOFS|...", rows[0][11])
    summary = "\n".join(out)
    t.check_in("summary table", "Reclaim stalls by process:", summary)


@scenario("drsnoop_direct_reclaim")
def _(t: Test):
    if os.environ.get("MEMLAT_HEAVY_TESTS") != "1":
        skip("global direct reclaim needs the whole machine under memory pressure; opt in "
             "with MEMLAT_HEAVY_TESTS=1 (the VM tests cover it)")
    raise Failure("the heavy direct-reclaim scenario runs in the VM harness only")


@scenario("drsnoop_bad_input")
def _(t: Test):
    cases = [
        (["-p", "999999999"], "no process with id 999999999"),
        (["-t", "999999999"], "no thread with id 999999999"),
        (["-p", "abc"], "-p takes a number, not 'abc'"),
        (["-k", "bogus"], "unknown reclaim kind 'bogus'"),
        (["-G", "/tmp"], "is not a cgroup directory"),
        (["-G", "/nonexistent/cgroup"], "does not exist"),
        (["-P"], "-P goes with -H"),
        (["1"], "an interval goes with -H"),
        (["-n", "a-name-longer-than-15"], "longer than a task name"),
        (["--bogus"], "unrecognized option"),
    ]
    for args, message in cases:
        res = run([os.path.join(build_dir(), "drsnoop"), *args], timeout=15)
        t.check_eq(f"drsnoop {' '.join(args)}: exit status", 2, res.rc)
        t.check_in(f"drsnoop {' '.join(args)}: message", message, res.stderr, "stderr")
    # Without privileges: its own message and status 1 (setpriv drops to nobody).
    res = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
               os.path.join(build_dir(), "drsnoop"), "-d", "1"], timeout=15)
    t.check_eq("drsnoop as nobody: exit status", 1, res.rc)
    t.check_in("drsnoop as nobody: message", "needs root, or the capabilities CAP_BPF and "
               "CAP_PERFMON", res.stderr, "stderr")
    res = run([os.path.join(build_dir(), "drsnoop"), "-h"], timeout=15)
    t.check_eq("drsnoop -h exit status", 0, res.rc)
    for option in ("--pid", "--tid", "--uid", "--name", "--print-uid", "--extended", "--kind",
                   "--cgroup", "--hist", "--per-process", "--timestamp", "--duration", "--json",
                   "--verbose", "interval", "FREE(KB)"):
        t.check_in(f"-h documents {option}", option, res.stdout)


if __name__ == "__main__":
    sys.exit(main())
