#!/usr/bin/env python3
"""Robustness of the tools' tables and start-up: a file that reuses a deleted file's inode
number (cachestat -f), tables that fill up (each interval must say that its rows are
incomplete), and a stop signal at every moment of start-up. After every run, no BPF program,
map or link the tool held may remain. Runs the real tools as root (memlat_test.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime"))
from memlat_test import (BpfWatch, MemoryCgroup, Result, Test, TestFile, Tool,  # noqa: E402
                         Workload, binary, build_dir, check_nothing_left, log, main,
                         require_cpus, scenario, skip)

TOOLS = ["tlbflush", "drsnoop", "compactsnoop", "numamove", "cachestat", "memstall", "oomwhy"]
SENDER, VICTIM = 0, 1
PAGE = os.sysconf("SC_PAGE_SIZE")

# Creates N files one after the other in a directory; file i has i+1 pages, is written and
# read through one fd, kept open HOLD seconds (so that cachestat finds its path in
# /proc/PID/fd), then closed and deleted. ext4 gives the next file the inode number just
# freed. Prints what each file was: [{"path", "ino", "pages"}].
REUSER = r"""
import json, os, sys, time
directory, n, hold, page = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
sys.stdin.read(1)  # held until the tool is ready
log = []
for i in range(n):
    path = os.path.join(directory, f"reuse-{i:03d}.dat")
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
    os.write(fd, b"r" * page * (i + 1))
    os.pread(fd, page * (i + 1), 0)
    log.append({"path": path, "ino": os.fstat(fd).st_ino, "pages": i + 1})
    time.sleep(hold)
    os.close(fd)
    os.unlink(path)
print(json.dumps(log))
"""


class Reuser:
    """REUSER as a child process held at its first read of stdin."""

    def __init__(self, directory: str, files: int, hold: float):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", REUSER, directory, str(files), str(hold), str(PAGE)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.pid = self.proc.pid

    def go(self) -> list[dict]:
        out, _ = self.proc.communicate(b"g", timeout=120)
        return json.loads(out)


def intervals(t: Test, res: Result) -> list[dict]:
    """The interval lines of a -j run (those with a time), in order."""
    t.check_eq("exit status", 0, res.rc)
    return [o for o in res.json_lines() if "time" in o]


# ---------------------------------------------------------------- inode reuse

@scenario("cachestat_inode_reuse")
def _(t: Test):
    """cachestat -f while files are created and deleted one after the other, each getting the
    inode number of the one before: each row's numbers are those of the file its path names
    (misses = that file's pages), and no row carries an earlier file's name."""
    files = 10
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        reuser = Reuser(tmp, files, 0.6)
        with Tool("cachestat", "--per-file", "-j", "-p", str(reuser.pid), "0.25",
                  watch_bpf=True) as tool:
            made = reuser.go()
            time.sleep(0.4)
    check_nothing_left(t, tool.bpf_watch, "cachestat -f")
    inos = {m["ino"] for m in made}
    if len(inos) == files:
        skip(f"the file system of /var/tmp gave {files} files {files} inode numbers: no reuse "
             "to tell apart (ext4 reuses at once)")
    by_path = {m["path"]: m for m in made}
    rows = [r for o in intervals(t, tool.result) for r in o.get("files", [])
            if r.get("ino") in inos]
    named = [r for r in rows if r.get("path")]
    log(f"{len(rows)} rows of the files' inodes, {len(named)} named")
    for r in named:
        path = r["path"].removesuffix(" (deleted)")
        m = by_path.get(path)
        if not t.check(m is not None and m["ino"] == r["ino"],
                       f"row ino {r['ino']} names one of the files with that inode",
                       "a created file", r["path"]):
            continue
        if r["misses"]:
            t.check_eq(f"{path}: misses are that file's pages", m["pages"], r["misses"])
    t.check_ge("files named in some row", files // 2,
               len({r["path"].removesuffix(" (deleted)") for r in named}))
    t.check_eq("misses of all rows: every file's pages, each counted once",
               sum(m["pages"] for m in made), sum(r["misses"] for r in rows))


# ---------------------------------------------------------------- tables that fill up

def check_full_intervals(t: Test, what: str, objs: list[dict], rows_key: str, entries: int,
                         summary_full: Optional[int]) -> None:
    """Every interval says how many of its events the table missed; those that missed some
    have at most `entries` rows; together they are at most what the summary says (tools
    that print intervals until the end print no separate summary: None)."""
    t.check(all("table_full" in o for o in objs), f"{what}: every interval has table_full",
            "all", [sorted(o) for o in objs if "table_full" not in o][:2])
    full = [o for o in objs if o.get("table_full", 0) > 0]
    t.check_ge(f"{what}: intervals whose table was full", 1, len(full))
    for o in full:
        t.check_le(f"{what}: rows of an interval with a full table", entries,
                   len(o.get(rows_key, [])))
    if summary_full is not None:
        t.check_le(f"{what}: table_full of the intervals (at most the summary's)",
                   summary_full, sum(o.get("table_full", 0) for o in objs))


def summary_table_full(res: Result) -> Optional[int]:
    return next((o["table_full"] for o in reversed(res.json_lines()) if "table_full" in o
                 and "time" not in o), None)


@scenario("table_full_cachestat")
def _(t: Test):
    """cachestat -P and -f with --max-entries 2 while many processes read many files."""
    with tempfile.TemporaryDirectory(dir=build_dir()) as tmp:
        paths = []
        for i in range(8):
            paths.append(os.path.join(tmp, f"f{i}"))
            with open(paths[-1], "wb") as f:
                f.write(b"t" * PAGE * 4)
        for view, rows_key in (("-P", "processes"), ("--per-file", "files")):
            with Tool("cachestat", view, "--max-entries", "2", "-j", "0.3",
                      watch_bpf=True) as tool:
                for _ in range(3):
                    for p in paths:  # one short-lived process per file
                        subprocess.run(["cat", p], stdout=subprocess.DEVNULL, check=True)
                    time.sleep(0.35)
            objs = intervals(t, tool.result)
            check_full_intervals(t, f"cachestat {view}", objs, rows_key, 2,
                                 summary_table_full(tool.result))
            check_nothing_left(t, tool.bpf_watch, f"cachestat {view}")
        # The text output says it too.
        with Tool("cachestat", "-P", "--max-entries", "1", "0.3", "2", wait_exit=True) as tool:
            for p in paths:
                subprocess.run(["cat", p], stdout=subprocess.DEVNULL, check=True)
        t.check("missing from the rows" in tool.result.stdout, "cachestat -P text: an interval "
                "says its rows are incomplete", "missing from the rows", tool.result.stdout[-400:])


def one_entry_run(t: Test, argv: list[str], rows_key: str, workload: Callable[[], None]) -> None:
    """TOOL ARGV with --max-entries 1, intervals of 0.3 s, while `workload` runs twice (two
    processes in turn): the second finds the table full."""
    what = " ".join(argv)
    with Tool(*argv, "--max-entries", "1", "-j", "0.3", watch_bpf=True) as tool:
        for _ in range(2):
            workload()
        time.sleep(0.4)
    check_full_intervals(t, what, intervals(t, tool.result), rows_key, 1,
                         summary_table_full(tool.result))
    check_nothing_left(t, tool.bpf_watch, what)


@scenario("table_full_tlbflush")
def _(t: Test):
    """tlbflush -P: two flushing processes in turn."""
    require_cpus(SENDER, VICTIM)

    def flush() -> None:
        with Workload("tlb_workload", "--seconds", "0.5", "--main-cpu", str(SENDER),
                      "--worker-cpu", str(VICTIM)) as wl:
            wl.wait_done(60)
    one_entry_run(t, ["tlbflush", "-P"], "counts", flush)


@scenario("table_full_drsnoop")
def _(t: Test):
    """drsnoop -H -P: two processes in turn stall in memcg reclaim."""
    with MemoryCgroup("robust_full", 32 << 20) as cg, \
            TestFile(96 << 20, "robust_full", cold=True) as f:
        def reclaim() -> None:
            f.evict()
            with Workload("file_reader", "--file", f.path, "--cgroup", cg.path) as reader:
                reader.wait_done(60)
        one_entry_run(t, ["drsnoop", "-H", "-P"], "histograms", reclaim)


# ---------------------------------------------------------------- signals at start-up

@scenario("signals_at_startup")
def _(t: Test):
    """SIGINT or SIGTERM at moments from 0 to 150 ms after exec, while each tool checks the
    kernel, loads and attaches: it ends without a crash or an internal error, what it wrote is
    whole JSON, and nothing it loaded stays in the kernel."""
    delays = [0, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15]
    cases = 0
    for tool in TOOLS:
        for sig in (signal.SIGINT, signal.SIGTERM):
            for delay in delays:
                argv = [binary(tool), "-j"]
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, start_new_session=True)
                watch = BpfWatch(proc.pid)
                time.sleep(delay)
                proc.send_signal(sig)
                try:
                    out, err = proc.communicate(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                    t.check(False, f"{tool} {sig.name} at {delay * 1000:.0f} ms: exits", "exit",
                            "still running after 20 s; killed")
                    continue
                what = f"{tool} {sig.name} at {delay * 1000:.0f} ms"
                cases += 1
                # Before the handlers are installed the signal's default action ends it.
                t.check(proc.returncode in (0, -sig), f"{what}: exit status",
                        f"0 or killed by {sig.name}", proc.returncode)
                text = err.decode(errors="replace")
                t.check("internal error" not in text and "Segmentation" not in text,
                        f"{what}: no internal error", "none", text[-300:])
                res = Result(argv, proc.returncode, out.decode(errors="replace"), text, 0)
                try:
                    res.json_lines()
                    whole = True
                except Exception:  # noqa: BLE001 - any parse failure is the finding
                    whole = False
                t.check(whole, f"{what}: stdout is whole JSON lines", "JSON", out[-200:])
                check_nothing_left(t, watch, what, expect_loaded=False)
    log(f"{cases} start-up cases")


if __name__ == "__main__":
    sys.exit(main())
