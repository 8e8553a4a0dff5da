#!/usr/bin/env python3
"""Runtime tests of `memlat top` (through its link memtop) on the running kernel, as root:
its rows per memory cgroup against delay accounting and the cgroup's own files."""
from __future__ import annotations

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from memlat_test import (MemoryCgroup, Test, TestFile, Tool, Workload,  # noqa: E402
                         binary, check_bad_arguments, check_help, log, main, read_file, run,
                         scenario)

LIMIT = 32 << 20
FILE_SIZE = 128 << 20


def cgroup_rows(lines: list[dict], path: str) -> list[dict]:
    """The row of the cgroup at `path` (a directory under the hierarchy's mount) in each
    interval that has one."""
    out = []
    for line in lines:
        out += [r for r in line["cgroups"] if path.endswith(r["cgroup"]) and r["cgroup"] != "/"]
    return out


def cause_sum(rows: list[dict], *names: str) -> tuple[int, int]:
    """(stalls, ns) of the causes `names` over `rows`."""
    stalls = ns = 0
    for r in rows:
        for name in names:
            c = r["causes"].get(name, {"stalls": 0, "ns": 0})
            stalls += c["stalls"]
            ns += c["ns"]
    return stalls, ns


@scenario("top_memcg_vs_taskstats")
def _(t: Test):
    """A reader in a 32 MiB memory cgroup reads a 128 MiB file twice (memcg limit reclaim)
    while `memtop -j -a 1` watches, beside a sibling cgroup whose only task never runs. The
    reader's cgroup, summed over the intervals, against delay accounting of its one task: the
    reclaim stalls exactly, the time as memstall's own test holds it; its limit and its
    memory.failcnt (v1) or memory.events max (v2) as the files say at the end; the sibling at
    zero in every interval; every interval sorted busiest first."""
    from test_memstall import delay_accounting
    with delay_accounting() as taskstats, \
            MemoryCgroup("top", LIMIT) as cg, MemoryCgroup("top_idle", LIMIT) as idle_cg, \
            TestFile(FILE_SIZE, "top_reclaim", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "2",
                     "--linger", held=True) as reader, \
            Workload("file_reader", "--file", f.path, held=True) as idle:
        # Held at the door for the whole test (never released): a task that never stalls.
        idle_cg.add(idle.pid)
        with Tool("memtop", "-j", "-a", "-r", "100000", "1") as top:
            reader.release()
            done = reader.wait_done(60)
            # A whole interval after the reader's last stall, and the one cut short by SIGINT.
            time.sleep(1.5)
            stats = taskstats.get(reader.pid)
        events_file = "memory.failcnt" if cg.v1 else "memory.events"
        events_text = read_file(os.path.join(cg.path, events_file))
        log(f"reader pid {reader.pid} read {done['iterations']} passes; taskstats {stats}; "
            f"{events_file}: {events_text.strip()}")
    res = top.result
    t.check_eq("memtop exit status after SIGINT", 0, res.rc)
    lines = [j for j in res.json_lines() if "cgroups" in j]
    t.check_ge("intervals printed", 2, len(lines))
    mine = cgroup_rows(lines, cg.path)
    t.require(len(mine) == len(lines), "a row for the reader's cgroup in every interval (-a)",
              len(lines), len(mine))
    stalls, ns = cause_sum(mine, "memcg", "direct")
    log(f"reader's cgroup over {len(lines)} intervals: {stalls} reclaim stalls, {ns} ns")
    t.check_ge("reclaim stalls seen", 10, stalls)
    t.check_eq("reclaim stalls vs taskstats freepages_count (exact: one task)",
               stats["freepages_count"], stalls)
    # As memstall_memcg_vs_taskstats: delay accounting's window lies inside the tracepoints'
    # (never more than memstall's time), a few us a window of work between them, and once up
    # to 1 ms for this VM's hypervisor.
    gap = ns - stats["freepages_delay_total"]
    t.check_ge("reclaim time >= taskstats freepages_delay_total", 0, gap)
    t.check_le("reclaim time - freepages_delay_total <= 10 us per window + 1 ms",
               10_000 * stalls + 1_000_000, gap)
    last = mine[-1]
    t.check_eq("the cgroup's limit", LIMIT, last["max_bytes"])
    t.check_le("the cgroup's usage <= its limit", LIMIT, last["usage_bytes"] or 0)
    # The cgroup was made before memtop started, with nothing charged to it: its limit
    # events since start are all it has.
    if cg.v1:
        expected = int(events_text)
    else:
        expected = int(dict(line.split() for line in events_text.splitlines())["max"])
    t.check_ge("the limit was met (the reader reclaims)", 1, expected)
    t.check_eq(f"limit events since start vs {events_file} at the end", expected,
               last["events_since_start"].get("max", 0))
    idle_rows = cgroup_rows(lines, idle_cg.path)
    t.check_eq("the idle sibling: a row in every interval (-a)", len(lines), len(idle_rows))
    t.check_eq("the idle sibling: no stall in any interval", [],
               [r["stall_ns"] for r in idle_rows if r["stall_ns"] != 0])
    for i, line in enumerate(lines):
        stall = [r["stall_ns"] for r in line["cgroups"]]
        if stall != sorted(stall, reverse=True):
            t.check(False, f"interval {i + 1} sorted busiest first", "descending", stall)
            break
    busiest = max(lines, key=lambda j: cause_sum(cgroup_rows([j], cg.path), "memcg")[1])
    t.check_eq("the reader's cgroup first in its busiest interval", mine[0]["cgroup"],
               busiest["cgroups"][0]["cgroup"])
    host = sum(cause_sum([j["host"]], "memcg", "direct")[0] for j in lines)
    t.check_ge("the host's reclaim stalls include the cgroup's", stalls, host)


@scenario("top_batch")
def _(t: Test):
    """-b prints the header and the table every interval, and stops after COUNT."""
    with Tool("memtop", "-b", "1", "2", wait_exit=True) as top:
        pass
    res = top.result
    t.check_eq("memtop -b 1 2: exit status", 0, res.rc)
    t.check_eq("memtop -b 1 2: headers", 2, res.stdout.count("memlat top - "))
    t.check_eq("memtop -b 1 2: table headings", 2, res.stdout.count("CGROUP "))
    for part in ("Mem: ", "PSI memory: ", "Stalled (ms): direct ", "Per second: reclaim "):
        t.check_in(f"memtop -b: the header's line {part.strip()}", part, res.stdout, "stdout")


@scenario("top_bad_arguments")
def _(t: Test):
    check_help(t, "memtop", ["-b, --batch", "-a, --all", "-r, --rows", "-j, --json", "STALL%",
                             "USAGE", "LIMIT", "EVENTS", "PSI%", "MEMLAT_DISABLE_HOOKS"])
    check_bad_arguments(t, "memtop", [
        (["0"], "the interval must be a positive number"),
        (["1", "0"], "the count must be a positive number"),
        (["-b", "-r", "x"], "-r"),
        (["--bogus"], "unrecognized option"),
    ])
    # Without -b or -j the screen is drawn on a terminal: stdout here is a pipe.
    res = run([binary("memtop"), "1", "1"], timeout=15)
    t.check_eq("memtop without a terminal: exit status", 2, res.rc)
    t.check_in("memtop without a terminal: says to give -b", "-b prints text rows",
               res.stderr, "stderr")


if __name__ == "__main__":
    sys.exit(main())
