#!/usr/bin/env python3
"""Runtime tests of `memlat top` (through its link memtop) on the running kernel, as root:
its rows per memory cgroup against delay accounting and the cgroup's own files."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tolerances import (FTRACE_FLUSH_CALLBACKS, PAGE_CACHE_PAGES,  # noqa: E402
                        TOP_RATE_INTERVALS)
from memlat_test import (TRACEFS, FtraceOracle, MemoryCgroup, Test, TestFile,  # noqa: E402
                         Tool, Workload, binary, check_bad_arguments, check_help, log, main,
                         field, read_file, shootdown_ipis_here, check_workload_ipis, run,
                         run_workload, scenario, skip,
                         tlb_interrupts)
from tmux_screen import ScreenTool  # noqa: E402

LIMIT = 32 << 20
FILE_SIZE = 128 << 20


def cgroup_rows(lines: list[dict], path: str) -> list[dict]:
    """The row of the cgroup at `path` (a directory under the hierarchy's mount) in each
    interval that has one."""
    out = []
    for line in lines:
        out += [r for r in line["cgroups"] if path.endswith(r["cgroup"]) and r["cgroup"] != "/"]
    return out


def read_vmstat() -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in read_file("/proc/vmstat")
                                   .splitlines() if len(line.split()) == 2)}


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
    from test_memstall import reader_and_idle_sibling
    with reader_and_idle_sibling("top") as (taskstats, cg, idle_cg, reader, _):
        vmstat_before = read_vmstat()
        with FtraceOracle(["vmscan/mm_vmscan_memcg_reclaim_end",
                           "vmscan/mm_vmscan_direct_reclaim_end"], reader.pid) as oracle, \
                Tool("memtop", "-j", "-a", "--rows", "100000", "1") as top:
            reader.release()
            done = reader.wait_done(60)
            # A whole interval after the reader's last stall, and the one cut short by SIGINT.
            time.sleep(1.5)
            stats = taskstats.get(reader.pid)
            ends = oracle.stop()
            reclaimed = sum(int(e["nr_reclaimed"]) for e in ends["mm_vmscan_memcg_reclaim_end"])
            reclaimed_direct = sum(int(e["nr_reclaimed"])
                                   for e in ends.get("mm_vmscan_direct_reclaim_end", []))
        vmstat_after = read_vmstat()
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
    # The pages its reclaim freed: the reader is the cgroup's one task, and each of its
    # reclaim windows ends in the tracepoint whose nr_reclaimed memstall adds.
    shown_pages = sum(field(t, r, "reclaimed_pages", "cgroup row") for r in mine)
    log(f"reader's cgroup: {shown_pages} pages reclaimed; ftrace: {reclaimed} memcg, "
        f"{reclaimed_direct} direct")
    t.check_eq("reclaimed pages vs ftrace nr_reclaimed of the reader (exact: one task)",
               reclaimed + reclaimed_direct, shown_pages)
    t.check_eq("reclaimed pages = the reclaim causes' (memcg + direct)", shown_pages,
               sum(r["causes"].get(c, {}).get("reclaimed_pages", 0)
                   for r in mine for c in ("memcg", "direct")))
    last = mine[-1]
    t.check_eq("the cgroup's limit", LIMIT, last["max_bytes"])
    t.check_le("the cgroup's usage <= its limit", LIMIT, field(t, last, "usage_bytes"))
    # The cgroup was made before memtop started, with nothing charged to it: its limit
    # events since start are all it has.
    if cg.v1:
        expected = int(events_text)
    else:
        expected = int(dict(line.split() for line in events_text.splitlines())["max"])
    t.check_ge("the limit was met (the reader reclaims)", 1, expected)
    t.check_eq(f"limit events since start vs {events_file} at the end", expected,
               field(t, last["events_since_start"], "max", "events_since_start"))
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
    # The header's memcg-limit reclaim (machine-wide) between two oracles: at least the pages
    # the reader's own memcg reclaim freed (ftrace's nr_reclaimed: it reclaims only while
    # memtop runs), at most what /proc/vmstat, read by the test around memtop's run, counted
    # (every reclaim counts in pgsteal_anon/file, the global reclaimers' also in
    # pgsteal_kswapd/_direct/...; the intervals lie inside the test's window).
    if "pgsteal_file" in vmstat_after:
        steal = {k: vmstat_after.get(k, 0) - vmstat_before.get(k, 0)
                 for k in ("pgsteal_anon", "pgsteal_file", "pgsteal_kswapd", "pgsteal_direct",
                           "pgsteal_khugepaged", "pgsteal_proactive")}
        window = steal["pgsteal_anon"] + steal["pgsteal_file"] - sum(
            v for k, v in steal.items() if k not in ("pgsteal_anon", "pgsteal_file"))
        shown = sum(field(t, j["host"], "memcg_reclaim_pages", "host") for j in lines)
        log(f"memcg-limit reclaim: {shown} pages over memtop's intervals, {window} in the "
            f"test's window (/proc/vmstat), {reclaimed} by the reader (ftrace)")
        t.check_ge("the reader's memcg reclaim (ftrace; it reads 4x its limit)", 1000,
                   reclaimed)
        t.check_le("memcg-limit reclaim over the intervals <= the test's window's", window,
                   shown)
        t.check_ge("memcg-limit reclaim over the intervals >= the reader's (ftrace)",
                   reclaimed, shown)
    else:
        t.check_eq("-j memcg_reclaim_pages without pgsteal_anon/file (before 5.8)", None,
                   lines[-1]["host"].get("memcg_reclaim_pages", "missing"))


@scenario("top_page_cache_vs_ftrace")
def _(t: Test):
    """A reader in a memory cgroup of its own reads a cold 16 MiB file three times while
    `memtop -j -a 1` watches, beside an empty sibling cgroup. The reader's cgroup's page-cache
    counts, summed over the intervals: its misses exactly the pages ftrace saw added for the
    reader, its accesses three times the file's pages, its hits the accesses the misses do not
    account for (within the tolerance cachestat's own tests allow); the sibling at zero; the
    host's counts at least the cgroup's; -b's HIT% column the ratio of the same counts."""
    added_event = "filemap/mm_filemap_add_to_page_cache"
    if not os.path.exists(os.path.join(TRACEFS, "events/filemap/mm_filemap_get_pages")):
        skip("this kernel has no filemap:mm_filemap_get_pages tracepoint (Linux 6.12): top "
             "counts page-cache accesses only with fentry or kprobes, which this host may "
             "refuse")
    page = os.sysconf("SC_PAGE_SIZE")
    size = 16 << 20
    pages, passes = size // page, 3
    with MemoryCgroup("top_cache") as cg, MemoryCgroup("top_cache_empty") as empty, \
            TestFile(size, "top_cache", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes",
                     str(passes), held=True) as reader:
        with FtraceOracle([added_event], reader.pid, buffer_kb=8192) as oracle, \
                Tool("memtop", "-j", "-a", "--rows", "100000", "1") as top, \
                Tool("memtop", "-b", "-a", "1") as batch:
            reader.release()
            reader.wait_done(60)
            time.sleep(1.5)
            events = oracle.stop()["mm_filemap_add_to_page_cache"]
    t.check_eq("memtop -j: exit status after SIGINT", 0, top.result.rc)
    orders = [int(field(t, e, "order", "mm_filemap_add_to_page_cache")) for e in events]
    added = sum(1 << o for o in orders)
    lines = [j for j in top.result.json_lines() if "cgroups" in j]
    mine = cgroup_rows(lines, cg.path)
    t.require(len(mine) == len(lines) >= 2, "a row for the reader's cgroup in every interval",
              len(lines), len(mine))
    total = {k: sum(field(t, field(t, r, "page_cache", "row"), k, "page_cache") for r in mine)
             for k in ("accesses", "hits", "misses", "dirties")}
    log(f"reader's cgroup over {len(lines)} intervals: {total}; ftrace: {added} pages added "
        f"for the reader; it read {passes} x {pages} pages")
    t.check_ge("pages added for the reader (ftrace; the file was cold)", pages // 2, added)
    t.check_eq("misses vs the pages ftrace saw added for the reader (exact: one task)", added,
               total["misses"])
    t.check_close("accesses vs the pages the reader read", passes * pages, total["accesses"],
                  rel_tol=PAGE_CACHE_PAGES.rel)
    t.check_close("hits vs the pages read less those added", passes * pages - added,
                  total["hits"], rel_tol=PAGE_CACHE_PAGES.rel)
    t.check_eq("dirties (a reader)", 0, total["dirties"])
    empty_rows = cgroup_rows(lines, empty.path)
    t.check_eq("the empty sibling: a row in every interval (-a)", len(lines), len(empty_rows))
    t.check_eq("the empty sibling: no page-cache access", [],
               [r["page_cache"] for r in empty_rows if r["page_cache"]["accesses"] != 0])
    host = {k: sum(field(t, j["host"]["page_cache"], k, "host page_cache") for j in lines)
            for k in ("accesses", "hits", "misses")}
    for k, v in host.items():
        t.check_ge(f"the host's {k} include the cgroup's", total[k], v)
    # -b: the reader's row's HIT% in the interval where it read the most, against the counts
    # -j gave for the same cgroup over the run (the ratio of a whole run lies between the
    # intervals' ratios; one decimal printed).
    heading, ratios = "", []
    for line in batch.result.stdout.splitlines():
        if line.startswith("CGROUP "):
            heading = line
        elif heading and line.split() and line.split()[0].endswith(os.path.basename(cg.path)):
            value = line.split()[heading.split().index("HIT%")]
            if value != "-":
                ratios.append(float(value))
    t.require(ratios, "-b: a HIT% for the reader's cgroup", "a number", ratios)
    whole = 100.0 * total["hits"] / total["accesses"]
    t.check(min(ratios) - 0.05 <= whole <= max(ratios) + 0.05,
            "-b: the run's hit ratio lies between the intervals' HIT%", f"{whole:.1f}",
            ratios)


@scenario("top_page_cache_table_full")
def _(t: Test):
    """--max-entries 1 leaves cachestat's table of cgroups room for one: a reader in a cgroup
    of its own and this test (in another) read files, so one of them finds it full. The events
    it kept out are counted and said: -j's host page_cache.table_full, and -b's header line;
    the rows' accesses stay within the host's."""
    with MemoryCgroup("top_cache_full") as cg, \
            TestFile(4 << 20, "top_cache_full", cold=True) as f, \
            TestFile(4 << 20, "top_cache_full_here", cold=True) as here, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "2",
                     held=True) as reader:
        with Tool("memtop", "-j", "-a", "--max-entries", "1", "1") as top, \
                Tool("memtop", "-b", "--max-entries", "1", "1") as batch:
            reader.release()
            reader.wait_done(60)
            with open(here.path, "rb") as mine:
                while mine.read(1 << 20):
                    pass
            time.sleep(1.5)
    lines = [j for j in top.result.json_lines() if "cgroups" in j]
    t.require(len(lines) >= 2, "memtop -j intervals", ">= 2", len(lines))
    full = field(t, field(t, lines[-1]["host"], "page_cache", "host"), "table_full", "page_cache")
    t.check_ge("page-cache events kept out of the cgroups' rows (table_full)", 1, full)
    for i, j in enumerate(lines):
        host = j["host"]["page_cache"]["accesses"]
        rows = sum(r["page_cache"]["accesses"] for r in j["cgroups"])
        if rows > host:
            t.check_le(f"interval {i + 1}: the rows' accesses within the host's", host, rows)
    t.check_in("memtop -b: the header says so",
               "page-cache events in no cgroup's HIT% so far: cachestat's table of cgroups "
               "was full (--max-entries)", batch.result.stdout, "stdout")


def record_lines(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@contextlib.contextmanager
def recorded_stalls(tmp: str):
    """A record of `memtop -b -o` while a reader in a 32 MiB memory cgroup reads a cold 128 MiB
    file 24 times (a few seconds, intervals of 0.5 s): yields (the record's path, the live -b
    output, the cgroup, the reader's pid)."""
    path = os.path.join(tmp, "record.json")
    with MemoryCgroup("top_record", LIMIT) as cg, \
            TestFile(FILE_SIZE, "top_record", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "24",
                     "--linger", held=True) as reader:
        with Tool("memtop", "-b", "-o", path, "0.5") as top:
            reader.release()
            reader.wait_done(60)
            time.sleep(0.8)
        yield path, top.result, cg, reader.pid


@scenario("top_record_replay")
def _(t: Test):
    """-o records every interval while -b prints them live; -r replays the record: -b prints
    exactly what the live run printed (every interval, byte for byte), COUNT stops it, -j gives
    the recorded rows. The record's stalls per thread: the reader's pid, its cgroup's id (the
    directory's inode), and per cgroup and interval they add up to the cgroup's row."""
    with tempfile.TemporaryDirectory(prefix="memlat_top_record_") as tmp, \
            recorded_stalls(tmp) as (path, live, cg, reader_pid):
        t.check_eq("memtop -b -o: exit status after SIGINT", 0, live.rc)
        lines = record_lines(path)
        t.check_eq("intervals recorded vs printed live", live.stdout.count("memlat top - "),
                   len(lines))
        replay = run([binary("memtop"), "--replay", path, "-b"], timeout=30)
        t.check_eq("memtop -r -b: exit status", 0, replay.rc)
        differ = next((i for i, (a, b) in enumerate(zip(live.stdout, replay.stdout)) if a != b),
                      min(len(live.stdout), len(replay.stdout)))
        t.check(replay.stdout == live.stdout, "memtop -r -b prints what the live -b printed",
                f"{len(live.stdout)} bytes as live",
                f"{len(replay.stdout)} bytes, first difference at {differ}")
        two = run([binary("memtop"), "--replay", path, "-b", "1", "2"], timeout=30)
        t.check_eq("memtop -r -b 1 2: two intervals", 2, two.stdout.count("memlat top - "))
        as_json = run([binary("memtop"), "--replay", path, "-j", "--rows", "100000"], timeout=30)
        replayed = [json.loads(x) for x in as_json.stdout.splitlines() if x.strip()]
        t.check_eq("memtop -r -j: the recorded rows, interval by interval",
                   [line["cgroups"] for line in lines], [j["cgroups"] for j in replayed])
        cgroup_id = os.stat(cg.path).st_ino
        mine = [th for line in lines for th in line["threads"] if th["pid"] == reader_pid]
        t.check_ge("the reader's stalls in the record's threads", 1, len(mine))
        t.check_eq("the reader's threads' cgroup: its directory's inode",
                   {cgroup_id}, {th["cgroup_id"] for th in mine})
        t.check_in("the reader's stalls: memcg reclaim", "memcg", {th["cause"] for th in mine},
                   "causes")
        mismatched = []
        for i, line in enumerate(lines):
            for row in line["cgroups"]:
                ns = sum(th["ns"] for th in line["threads"] if th["cgroup_id"] == row["cgroup_id"])
                if ns != row["stall_ns"]:
                    mismatched.append((i, row["cgroup"], row["stall_ns"], ns))
        t.check_eq("per interval and cgroup: the threads' stall time = the row's", [],
                   mismatched)


@scenario("top_screen_replay")
def _(t: Test):
    """-r on the screen: the record's first interval at once (REPLAY 1 of N); t and T step to
    the next and the previous; in the reader's busiest interval its cgroup is the first row,
    and Enter opens it into the recorded processes (the reader's pid); d sets the interval,
    and at 0.2 s the replay reaches its end by itself; q exits 0, the terminal as it was."""
    with tempfile.TemporaryDirectory(prefix="memlat_top_replay_") as tmp, \
            recorded_stalls(tmp) as (path, live, cg, reader_pid):
        lines = record_lines(path)
        name = os.path.basename(cg.path)
        busiest = max(range(len(lines)), key=lambda i: sum(
            r["stall_ns"] for r in lines[i]["cgroups"] if r["cgroup"].endswith(name)))
        n = len(lines)
        with ScreenTool("--replay", path, "3600") as screen:
            first = screen.wait_screen(lambda sc: f"REPLAY 1 of {n}" in status_line(sc), 10)
            t.require(first is not None, "the record's first interval at once", f"REPLAY 1 of {n}",
                      screen.screen()[-1:] + [screen.file("err")[-300:]])
            t.check_eq("the header: the recorded interval's time",
                       lines[0]["time"], first[0].split()[3])
            at = first
            for i in range(busiest):
                at = screen.press("t", until=lambda sc, i=i: f"REPLAY {i + 2} of {n}"
                                  in status_line(sc))
            t.require(at is not None, f"t {busiest} times: interval {busiest + 1}",
                      f"REPLAY {busiest + 1} of {n}", status_line(screen.screen()))
            t.check_in("the reader's cgroup first in its busiest interval", name,
                       (table_lines(at) or [""])[0], "first row")
            opened = screen.press("Home", "Enter", until=lambda sc: any(
                ln.startswith("Processes of ") for ln in sc))
            t.require(opened is not None, "Enter: the recorded processes", "Processes of ...",
                      screen.screen()[:10])
            pids = {int(ln.split()[0]) for ln in opened if re.match(r"\d+ ", ln)}
            t.check_in("the reader's pid among the recorded processes", reader_pid, pids, "pids")
            screen.press("Escape", until=lambda sc: any(ln.startswith("CGROUP ") for ln in sc))
            if busiest > 0:
                back = screen.press("T", until=lambda sc: f"REPLAY {busiest} of {n}"
                                    in status_line(sc))
                t.check(back is not None, "T: the previous interval", f"REPLAY {busiest} of {n}",
                        status_line(back or screen.screen()))
            screen.press("d")
            screen.press("-l", "0.2")
            changed = screen.press("Enter", until=lambda sc: "interval 0.2 s" in status_line(sc))
            t.check(changed is not None, "d 0.2 Enter: the status line says the new interval",
                    "interval 0.2 s", status_line(changed or screen.screen()))
            end = screen.wait_screen(lambda sc: f"REPLAY {n} of {n}, the end" in status_line(sc),
                                     timeout=0.2 * n + 5)
            t.check(end is not None, "at 0.2 s a step, the replay reaches its end by itself",
                    f"REPLAY {n} of {n}, the end", status_line(screen.screen()))
            t.check_eq("the last screen: the record's last interval", lines[-1]["time"],
                       screen.screen()[0].split()[3])
            screen.press("q")
            t.check_eq("q: exit status", 0, screen.wait_exit())
            screen.check_terminal_settings(t)


@scenario("top_tlb_shootdowns")
def _(t: Test):
    """The header's TLB shootdowns (`-j`: host.tlb_shootdowns), summed over the intervals of a
    run in which tlb_workload flushes the TLB of a thread on another CPU, against ftrace's
    count of flush_tlb_func run by the CPUs' IPI handlers (csd:csd_function_entry with a csd,
    Linux 6.3+) from the moment memtop was ready to the moment it had exited. Where the
    hypervisor flushes without IPIs (measured first), the header's "-" and the path instead."""
    ipis, how = shootdown_ipis_here()
    if not ipis:
        # Where the hypervisor flushes (measured: requests and no IPI), the header says so
        # instead of a count: "-" on the screen and -b, and the path in -j.
        before = tlb_interrupts()
        with Tool("memtop", "-j", "1") as top, Tool("memtop", "-b", "1") as batch:
            run_workload("tlb_workload", "--seconds", "2", "--main-cpu", "0", "--worker-cpu",
                         "1")
            time.sleep(1.2)
        after = tlb_interrupts()
        t.check_eq("TLB IPIs during the workload where the hypervisor flushes", 0,
                   sum(after) - sum(before))
        for name, tool in (("-j", top), ("-b", batch)):
            t.check_eq(f"memtop {name}: exit status after SIGINT", 0, tool.result.rc)
        lines = [j for j in top.result.json_lines() if "host" in j]
        t.check_ge("memtop -j: intervals", 2, len(lines))
        t.check_eq("memtop -j: remote_flush_path of every interval", ["hypervisor"],
                   sorted({j["host"].get("remote_flush_path") for j in lines}, key=str))
        headers = [line for line in batch.result.stdout.splitlines() if "Per second:" in line]
        t.check_ge("memtop -b: header lines", 2, len(headers))
        t.check_eq("memtop -b: every header says the hypervisor flushes", len(headers),
                   sum("TLB shootdowns - (the hypervisor flushes)" in h for h in headers))
        return
    if not os.path.isdir(os.path.join(TRACEFS, "events", "csd", "csd_function_entry")):
        skip("no csd tracepoints (Linux 6.3 and later): the oracle counts the flush callbacks")
    before = tlb_interrupts()
    with FtraceOracle(["csd/csd_function_entry"], 0, buffer_kb=16384, clock="mono",
                      filters={"csd/csd_function_entry": "common_pid >= 0"}) as oracle:
        with Tool("memtop", "-j", "1") as top:
            start = time.monotonic()
            wl = run_workload("tlb_workload", "--seconds", "3", "--main-cpu", "0",
                              "--worker-cpu", "1")
        end = time.monotonic()
        events = oracle.stop()["csd_function_entry"]
    after = tlb_interrupts()
    check_workload_ipis(t, "TLB IPIs during the workload (/proc/interrupts, all CPUs)", 1000,
                           sum(after) - sum(before))
    res = top.result
    t.check_eq("memtop -j: exit status after SIGINT", 0, res.rc)
    lines = [j for j in res.json_lines() if "host" in j]
    shown = sum(j["host"]["tlb_shootdowns"] or 0 for j in lines)
    # The sender runs flush_tlb_func on its own CPU too, traced with no csd: not an IPI.
    flushes = sum(1 for e in events if e.get("func", "").startswith("flush_tlb_func")
                  and e.get("csd", "").strip(",") != "0000000000000000"
                  and start <= float(e["_ts"]) <= end)
    log(f"tlb_workload pid {wl['pid']}: {wl['iterations']} munmaps; memtop: {shown} TLB "
        f"shootdowns over {len(lines)} intervals; ftrace: {flushes} flush_tlb_func IPI callbacks; "
        f"paths {sorted({j['host']['remote_flush_path'] for j in lines})}")
    t.check_ge("TLB shootdowns the workload caused (ftrace)", 1000, flushes)
    # memtop's intervals begin before it is ready and end before it exits; the oracle's window
    # is from ready to exit: the two differ by the flushes of the rest of the machine in those
    # moments, about 15 a second on this idle host.
    t.check_close("memtop's TLB shootdowns vs ftrace's IPI flush callbacks", flushes, shown,
                  rel_tol=FTRACE_FLUSH_CALLBACKS.rel, abs_tol=FTRACE_FLUSH_CALLBACKS.abs)


@scenario("top_own_cost")
def _(t: Test):
    """What `memtop -j 1` says it costs, in every interval: its RSS between the page tables'
    counts (smaps_rollup) sampled while it ran, its BPF maps' memory equal to bpftool's memlock
    of the maps it holds, and its CPU, summed over the intervals, within the CPU its threads
    used (schedstat) by the last one."""
    from test_prometheus import bpf_ids, bpftool_json, cpu_seconds, mapped_bytes
    with Tool("memtop", "-j", "1") as top:
        pid = top.proc.pid
        rss = []
        deadline = time.monotonic() + 4.5
        while time.monotonic() < deadline:
            rss.append(mapped_bytes(pid)[0])
            time.sleep(0.1)
        map_ids = bpf_ids(pid, "map_id")
        memlock = sum(m.get("bytes_memlock", 0) for m in bpftool_json("map", "show")
                      if m["id"] in map_ids)
        used = cpu_seconds(pid)
        printed = len([line for line in top._out.lines if line.startswith("{")])
    res = top.result
    t.check_eq("memtop -j 1: exit status after SIGINT", 0, res.rc)
    lines = [j for j in res.json_lines() if "cgroups" in j]
    t.require(len(lines) >= 3, "intervals printed", ">= 3", len(lines))
    selfs = [j["self"] for j in lines]
    t.require(all(s is not None for s in selfs), "\"self\" in every interval", "an object each",
              selfs)
    # The last interval (cut short by SIGINT) may come after the last sample.
    low, high = min(rss) - (64 << 10), max(rss) + (64 << 10)
    t.check(all(low <= s["rss_bytes"] <= high for s in selfs[:-1]),
            "rss_bytes of every interval within smaps_rollup's Rss sampled meanwhile (+/- 64 "
            "KiB: the sampling is 0.1 s apart)", f"[{low}, {high}]",
            [s["rss_bytes"] for s in selfs])
    t.check_eq("bpf_map_bytes vs bpftool's memlock of the maps it holds (exact)",
               float(memlock), selfs[-1]["bpf_map_bytes"])
    spent = sum(s["cpu_share"] * j["interval_s"] for s, j in zip(selfs[:printed], lines))
    t.check(0 < spent <= used + 0.001, "CPU of the intervals printed, summed, within what its "
            "threads had used by then (schedstat; +1 ms: getrusage's microseconds)",
            f"(0, {used:.4f}] s", f"{spent:.4f} s")


def status_line(screen: list[str]) -> str:
    """The screen's last line that has text: the status line."""
    return next((ln for ln in reversed(screen) if ln.strip()), "")


def table_lines(screen: list[str]) -> list[str]:
    """The lines of the screen's cgroup table, below its heading and above the status line."""
    for i, line in enumerate(screen):
        if line.startswith("CGROUP "):
            return [x for x in screen[i + 1:] if x.strip()][:-1]
    return []


def open_view(t: Test, screen: ScreenTool, what: str, heading: str,
              *keys: str) -> tuple[list[str], str]:
    """Presses `keys` until the screen shows a view headed by a line starting with `heading`
    that has a row (an id first), which is required (`what`): (the screen, its heading line)."""
    opened = screen.press(
        *keys, until=lambda sc: any(ln.startswith(heading) for ln in sc)
        and any(re.match(r"\d+ ", ln) for ln in sc), timeout=10)
    t.require(opened is not None, what, f"{heading}... with a row",
              [ln for ln in opened if re.match(r"\d+ ", ln)] if opened
              else screen.screen())
    return opened, next(ln for ln in opened if ln.startswith(heading))


@contextlib.contextmanager
def stalled_screen(t: Test, label: str, *args: str, env: str = ""):
    """memtop ARGS in tmux while a reader in a 32 MiB memory cgroup stalls in reclaim, from the
    moment the reader's cgroup is the first row: yields (screen, cgroup, reader, the screen)."""
    with MemoryCgroup(label, LIMIT) as cg, \
            TestFile(FILE_SIZE, label, cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "1000",
                     held=True) as reader:
        with ScreenTool(*args, env=env) as screen:
            t.require(screen.wait_ready(), f"memtop {' '.join(args)} in tmux: ready",
                      "memlat: ready", screen.file("err")[-300:])
            reader.release()
            name = os.path.basename(cg.path)
            first = screen.wait_screen(lambda sc: any(name in ln for ln in table_lines(sc)[:1]),
                                       timeout=15)
            t.require(first is not None, "the reader's cgroup drawn as the first row", name,
                      screen.screen())
            yield screen, cg, reader, first


# An SGR sequence that sets the foreground red (31) or yellow (33), as tmux's capture-pane -e
# writes it.
COLOURED = re.compile(r"\x1b\[(?:[0-9;]*;)?3[13](?:;[0-9;]*)?m")
REVERSE = re.compile(r"\x1b\[(?:[0-9;]*;)?7(?:;[0-9;]*)?m")


def first_row_styled(screen: "ScreenTool") -> str:
    lines = screen.screen(styled=True)
    for i, line in enumerate(lines):
        if re.sub(r"\x1b\[[0-9;]*m", "", line).startswith("CGROUP "):
            return lines[i + 1] if i + 1 < len(lines) else ""
    return ""


def reclaim_ms(heading: str, line: str) -> float:
    """The MEMCG and DIRECT columns of a table `line` under `heading`, in ms (a column folded
    into REST counts REST: it holds them then)."""
    names = heading.split()
    values = line.split()
    # The path is the first field of both (no spaces in the tests' paths).
    wanted = [c for c in ("MEMCG", "DIRECT") if c in names] + (["REST"] if "REST" in names and
                                                                  not {"MEMCG", "DIRECT"} <=
                                                                  set(names) else [])
    return sum(float(values[names.index(c)]) for c in wanted)


@scenario("top_screen_and_batch_vs_taskstats")
def _(t: Test):
    """The screen (tmux, 80x24: the size every terminal starts at) and -b against the oracle
    -j is held to in top_memcg_vs_taskstats: a reader in a 32 MiB cgroup stalls in memcg
    reclaim, and its cgroup's MEMCG + DIRECT milliseconds summed over the intervals of each
    view match delay accounting's freepages time of its one task. At 80 columns the causes
    that do not fit fold into REST, and EVENTS, PSI% and the status line's "q quit" stay on
    the screen; -b -w 80 prints lines of 80 columns, -b -w 200 a CGROUP column that holds the
    whole path."""
    from test_memstall import reader_and_idle_sibling
    screens: dict[str, list[str]] = {}
    with reader_and_idle_sibling("topview", passes=16) as (taskstats, cg, idle_cg, reader, _):
        name = os.path.basename(cg.path)
        # -b every 0.25 s: the reads (about a second) span several of its intervals.
        with FtraceOracle(["vmscan/mm_vmscan_memcg_reclaim_end",
                           "vmscan/mm_vmscan_direct_reclaim_end"], reader.pid) as oracle, \
                Tool("memtop", "-b", "0.25") as batch, \
                Tool("memtop", "-b", "-w", "200", "0.25") as wide, \
                Tool("memtop", "-b", "-w", "80", "0.25") as narrow, \
                ScreenTool("1", rows=24, columns=80) as screen:
            t.require(screen.wait_ready(), "memtop in an 80x24 tmux pane: ready",
                      "memlat: ready", screen.file("err")[-300:])
            reader.release()
            deadline = time.monotonic() + 60
            done_at = None
            # Every interval's screen, by the time in its header (intervals are a second
            # apart: each has a second of its own), until a second after the reader's end.
            while time.monotonic() < deadline:
                lines = screen.screen()
                if lines and lines[0].startswith("memlat top - "):
                    screens[lines[0].split()[3]] = lines
                if done_at is None and reader._pid_line.is_set():
                    done_at = time.monotonic()
                if done_at is not None and time.monotonic() > done_at + 2.5:
                    break
                time.sleep(0.1)
            stats = taskstats.get(reader.pid)
            reclaimed = sum(int(e["nr_reclaimed"]) for ends in oracle.stop().values()
                            for e in ends)
            screen.press("q")
            t.check_eq("q: exit status", 0, screen.wait_exit())
    log(f"reader pid {reader.pid}: taskstats {stats}; {len(screens)} screens captured")
    delay_ms = stats["freepages_delay_total"] / 1e6
    count = stats["freepages_count"]

    def check_sum(what: str, values: list[float]) -> None:
        total = sum(values)
        # As -j in top_memcg_vs_taskstats (the tracepoints' windows hold delay accounting's,
        # 10 us a window + 1 ms), and the 0.05 ms each interval's one decimal may round away.
        rounding = 0.05 * len(values)
        t.check_ge(f"{what}: reclaim ms >= taskstats freepages_delay_total - rounding",
                   delay_ms - rounding, total)
        t.check_le(f"{what}: reclaim ms <= freepages_delay_total + 10 us a stall + 1 ms "
                   f"+ rounding", delay_ms + 0.01 * count + 1 + rounding, total)

    t.check_ge("reclaim stalls (taskstats)", 10, count)
    # The screen: the reader's cgroup's row in each interval's screen.
    values, widths = [], set()
    for time_text, lines in sorted(screens.items()):
        heading = next((ln for ln in lines if ln.startswith("CGROUP ")), None)
        t.require(heading is not None, f"screen {time_text}: a table heading", "CGROUP ...",
                  lines)
        for column in ("EVENTS", "PSI%", "STALL%"):
            t.check_in(f"screen {time_text} at 80 columns: the {column} column", column,
                       heading, "heading")
        t.check(status_line(lines).rstrip().endswith("q quit"),
                f"screen {time_text}: the status line ends in 'q quit'", "... q quit",
                status_line(lines))
        widths.update(len(ln.rstrip()) for ln in lines)
        row = next((ln for ln in table_lines(lines) if name[-12:] in ln.split()[0]), None)
        if row is not None:
            values.append(reclaim_ms(heading, row))
    t.check_le("the screen's widest line (80 columns)", 80, max(widths))
    t.check_ge("screens with the reader's cgroup", 1, len(values))
    check_sum("the screen at 80x24", values)

    for tool, what in ((batch, "-b"), (wide, "-b -w 200"), (narrow, "-b -w 80")):
        res = tool.result
        t.check_eq(f"memtop {what}: exit status after SIGINT", 0, res.rc)
        values, rates = [], []
        heading = ""
        for line in res.stdout.splitlines():
            if line.startswith("CGROUP "):
                heading = line
            elif heading and line.split() and line.split()[0].endswith(name[-12:]):
                values.append(reclaim_ms(heading, line))
                if "RECL/s" in heading:
                    rates.append(float(line.split()[heading.split().index("RECL/s")]))
        t.check_ge(f"memtop {what}: intervals with the reader's cgroup", 2, len(values))
        check_sum(f"memtop {what}", values)
        if "RECL/s" in heading:
            # RECL/s per interval, times the interval asked for, against the pages the
            # reader's reclaim windows freed.
            pages = sum(rates) * 0.25
            log(f"memtop {what}: RECL/s x 0.25 s summed: {pages:.0f} pages; ftrace "
                f"nr_reclaimed {reclaimed}")
            t.check_close(f"memtop {what}: RECL/s x interval vs ftrace nr_reclaimed", reclaimed,
                          pages, rel_tol=TOP_RATE_INTERVALS.rel,
                          abs_tol=TOP_RATE_INTERVALS.abs * len(rates))
        else:
            t.check_eq(f"memtop {what}: RECL/s only where two causes fit beside it",
                       "-w 80", what[-5:])
    from oom_oracle import hierarchy_path
    t.check(any(ln.split() and ln.split()[0] == hierarchy_path(cg.path)
                for ln in wide.result.stdout.splitlines()),
            "-b -w 200: the whole path in the CGROUP column", hierarchy_path(cg.path),
            [ln.split()[0] for ln in wide.result.stdout.splitlines()
             if name[-12:] in ln][:3])
    narrow_lines = narrow.result.stdout.splitlines()
    t.check_le("-b -w 80: the widest line", 80, max(len(ln) for ln in narrow_lines))
    t.check(any("REST" in ln and "EVENTS" in ln for ln in narrow_lines),
            "-b -w 80: causes folded into REST, EVENTS kept", "REST ... EVENTS",
            [ln for ln in narrow_lines if ln.startswith("CGROUP")][:1])


@scenario("top_screen_keys")
def _(t: Test):
    """The screen as a user drives it in a terminal (tmux), while a reader in a 32 MiB memory
    cgroup stalls in reclaim: the stalled cgroup is the first row; h shows the keys and any key
    returns; > and < change the sorted column the status line names; Enter opens the selected
    cgroup into its processes, whose pids are the cgroup's own (its cgroup.procs) and include
    the reader's, under its command line (COMMAND); Enter there opens the selected process into its threads (ids of its
    /proc/PID/task); Esc goes back, and back again; / filters the rows (none for a text no path has, the reader's
    cgroup for its name) and Esc drops the filter; space holds the screen (its header's time
    stays) and space again goes on; a terminal made too small says so, and the table comes back
    at the old size; q quits with status 0, leaves the alternate screen and gives the terminal
    back as it was (stty -g before and after)."""
    with stalled_screen(t, "top_screen", "1") as (screen, cg, reader, first):
        name = os.path.basename(cg.path)
        styled = first_row_styled(screen)
        t.check(COLOURED.search(styled) is not None and REVERSE.search(styled) is not None,
                "the stalled cgroup's row: yellow or red (ESC[33m, ESC[31m), and selected",
                "a colour and reverse video", repr(styled[:60]))
        t.check_in("the status line: selection and sort column", "1 of ",
                   status_line(first), "status line")
        t.check_in("the status line names the sorted column", "sort: STALL%",
                   status_line(first), "status line")
        helped = screen.press("h", until=lambda sc: "memlat top: keys" in sc[0])
        t.check(helped is not None, "h: the page of keys", "memlat top: keys",
                "drawn" if helped else screen.screen()[:2])
        back = screen.press("x", until=lambda sc: any(ln.startswith("CGROUP ") for ln in sc))
        t.check(back is not None, "any key leaves the page of keys", "the table",
                "drawn" if back else screen.screen()[:2])
        usage = screen.press(">", until=lambda sc: "sort: USAGE" in status_line(sc))
        t.check(usage is not None, "> sorts by the next column", "sort: USAGE",
                status_line(usage or screen.screen()))
        stall = screen.press("<", until=lambda sc: "sort: STALL%" in status_line(sc))
        t.check(stall is not None, "< sorts by the column before", "sort: STALL%",
                status_line(stall or screen.screen()))
        # The reader's cgroup is the busiest: Home selects it, Enter opens it. A screen
        # with a process row (a pid first) is waited for: an interval in which the reader
        # stalled.
        opened, heading = open_view(t, screen, "Enter: the selected cgroup's processes",
                                    "Processes of ", "Home", "Enter")
        t.check_in("the opened cgroup is the reader's", name, heading, "heading")
        pids = {int(ln.split()[0]) for ln in opened if re.match(r"\d+ ", ln)}
        members = {int(p) for p in read_file(os.path.join(cg.path, "cgroup.procs")).split()}
        log(f"processes shown {sorted(pids)}; cgroup.procs {sorted(members)}")
        t.check_in("the reader's pid among the processes shown", reader.pid, pids, "pids")
        t.check_eq("processes shown outside the cgroup's cgroup.procs", set(),
                   pids - members)
        # Its COMMAND column: the title the reader runs under, as /proc/PID/cmdline has it
        # (NULs as spaces), cut where the pane ends.
        title = read_file(f"/proc/{reader.pid}/cmdline").replace("\0", " ").strip()
        row = next((ln for ln in opened if ln.split()[:1] == [str(reader.pid)]), "")
        shown = row[row.find(title[:12]):].rstrip() if title[:12] in row else ""
        t.check(len(shown) >= 20 and title.startswith(shown),
                "the reader's COMMAND: its command line (/proc/PID/cmdline)", title[:60],
                shown or row)
        # Enter on the selected process: its threads, whose ids are the process's own.
        threads, heading = open_view(t, screen, "Enter on a process: its threads",
                                     "Threads of process ", "Enter")
        shown_pid = int(heading.split()[3])
        tids = {int(ln.split()[0]) for ln in threads if re.match(r"\d+ ", ln)}
        own = {int(x) for x in os.listdir(f"/proc/{shown_pid}/task")}
        log(f"threads of {shown_pid} shown {sorted(tids)}; /proc/{shown_pid}/task {sorted(own)}")
        t.check_in("the process opened is one of the cgroup's", shown_pid, members,
                   "cgroup.procs")
        t.check_eq("threads shown outside /proc/PID/task", set(), tids - own)
        t.check_in("TID column heading", "TID", " ".join(threads), "screen")
        t.check_in("without -s: the threads view says how to have the stacks",
                   "(the stacks of a process: memlat top -s)", threads, "screen")
        back_to_procs = screen.press(
            "Escape", until=lambda sc: any(ln.startswith("Processes of ") for ln in sc))
        t.check(back_to_procs is not None, "Esc: back to the processes", "Processes of ...",
                "drawn" if back_to_procs else screen.screen()[:8])
        closed = screen.press("Escape",
                              until=lambda sc: any(ln.startswith("CGROUP ") for ln in sc))
        t.check(closed is not None, "Esc: back to the cgroups", "the table",
                "drawn" if closed else screen.screen()[:8])
        # / filters by a text in the path or name: one no cgroup has empties the table,
        # the cgroup's own name brings it back, Esc drops the filter.
        screen.press("/")
        typed = screen.press("-l", "zz-no-such-cgroup",
                             until=lambda sc: "filter: zz-no-such-cgroup_" in status_line(sc))
        t.check(typed is not None, "/: the filter typed shows in the status line",
                "filter: zz-no-such-cgroup_", status_line(typed or screen.screen()))
        empty = screen.press("Enter",
                             until=lambda sc: any("no cgroup matches" in ln for ln in sc))
        t.check(empty is not None, "a filter no cgroup matches: no row, and says so",
                "(no cgroup matches the filter ...)", status_line(empty or screen.screen()))
        screen.press("/", *["BSpace"] * 20)
        mine = screen.press("-l", name)
        mine = screen.press("Enter", until=lambda sc: f"matching '{name}'" in status_line(sc))
        t.check(mine is not None and name in (table_lines(mine) or [""])[0],
                "the cgroup's name as the filter: its row first", name,
                table_lines(mine)[:1] if mine else screen.screen()[-1:])
        dropped = screen.press("Escape", until=lambda sc: "matching" not in status_line(sc))
        t.check(dropped is not None, "Esc drops the filter", "no 'matching' in status",
                status_line(dropped or screen.screen()))
        # Held: the header's first line (the interval's time) stays for 2.5 s of 1 s
        # intervals; going on, it changes.
        held = screen.press("Space", until=lambda sc: status_line(sc).startswith("PAUSED"))
        t.check(held is not None, "space: the screen held, the status line says so",
                "PAUSED ...", status_line(held or screen.screen()))
        time.sleep(2.5)
        t.check_eq("the header while held (2.5 s of 1 s intervals)",
                   (held or [""])[0], screen.screen()[0])
        going = screen.press("Space", until=lambda sc: sc[0] != (held or [""])[0],
                             timeout=3)
        t.check(going is not None, "space again: the next interval drawn", "a new header",
                (going or screen.screen())[0])
        # Too small a terminal says so; back to the old size, the table is back.
        screen.tmux("resize-window", "-t", "top", "-x", "50", "-y", "8")
        small = screen.wait_screen(lambda sc: sc[:2] == ["terminal too small: 50x8",
                                                         "memlat top needs 60x10"])
        t.check(small is not None, "a 50x8 terminal: the screen says it is too small",
                "terminal too small: 50x8 / memlat top needs 60x10", screen.screen()[:2])
        screen.tmux("resize-window", "-t", "top", "-x", str(ScreenTool.COLUMNS), "-y",
                    str(ScreenTool.ROWS))
        again = screen.wait_screen(lambda sc: any(ln.startswith("CGROUP ") for ln in sc))
        t.check(again is not None, "resized back: the table again", "the table",
                screen.screen()[:2])
        screen.press("q")
        rc = screen.wait_exit()
        t.check_eq("q: exit status", 0, rc)
        after = screen.wait_screen(lambda sc: not any("memlat top" in ln for ln in sc), 3)
        t.check(after is not None, "the alternate screen left at exit (the screen's text "
                "gone)", "no 'memlat top' on the screen", screen.screen()[:3])
        screen.check_terminal_settings(t)


@scenario("top_screen_stacks")
def _(t: Test):
    """-s (and NO_COLOR=1: no colour on the screen): under the threads of a process stalled in
    memcg reclaim, its stack that stalled the longest per cause since start: a memcg stack of
    the reader's pid whose kernel frames hold
    try_to_free_mem_cgroup_pages (the function whose reclaim the memcg window spans, as
    memstall's own stack test has it)."""
    with stalled_screen(t, "top_stacks", "-s", "1", env="NO_COLOR=1") as (screen, cg, reader,
                                                                         first):
        # NO_COLOR (no-color.org): the same screen without a colour.
        styled = first_row_styled(screen)
        t.check(COLOURED.search(styled) is None and REVERSE.search(styled) is not None,
                "NO_COLOR=1: the stalled cgroup's row selected, without a colour",
                "reverse video only", repr(styled[:60]))
        screen.press("Home", "Enter", until=lambda sc: any(
            re.match(r"\d+ ", ln) for ln in sc) and any(
            ln.startswith("Processes of ") for ln in sc), timeout=10)
        stacked = screen.press("Enter", until=lambda sc: any(
            ln.startswith(f"memcg: ") and f"pid {reader.pid} " in ln for ln in sc),
            timeout=10)
        t.require(stacked is not None, "Enter on the reader: its memcg stack under its threads",
                  f"memcg: N stalls, ... pid {reader.pid} (file_reader)", screen.screen())
        heading = next(ln for ln in stacked if ln.startswith("Threads of process "))
        t.check_eq("the threads view is the reader's", reader.pid, int(heading.split()[3]))
        at = next(i for i, ln in enumerate(stacked) if ln.startswith("memcg: "))
        frames = []
        for ln in stacked[at + 1:]:
            if not ln.startswith("    ") or ln.strip() == "--":
                break
            frames.append(ln.strip())
        log(f"memcg stack's kernel frames on the screen: {frames}")
        t.check(any(fr.startswith("try_to_free_mem_cgroup_pages") for fr in frames),
                "the memcg stack's kernel frames", "try_to_free_mem_cgroup_pages", frames)
        screen.press("q")
        t.check_eq("q: exit status", 0, screen.wait_exit())


@scenario("top_screen_sigterm")
def _(t: Test):
    """d changes the interval of a live screen (the header's interval follows); SIGTERM ends
    it as q does: exit status 0, the terminal's settings given back."""
    with ScreenTool("1") as screen:
        t.require(screen.wait_ready(), "memtop in tmux: ready", "memlat: ready",
                  screen.file("err")[-300:])
        drawn = screen.wait_screen(lambda sc: any(ln.startswith("CGROUP ") for ln in sc), 10)
        t.require(drawn is not None, "the screen drawn", "the table", screen.screen()[:3])
        typing = screen.press("d", until=lambda sc: "interval in seconds: _" in status_line(sc))
        t.check(typing is not None, "d: the interval asked for on the status line",
                "interval in seconds: _", status_line(typing or screen.screen()))
        screen.press("-l", "x")
        refused = screen.press("Enter", until=lambda sc: "the interval" in status_line(sc))
        t.check(refused is not None, "d x Enter: refused, the status line says why",
                "... the interval ...", status_line(refused or screen.screen()))
        screen.press("d")
        screen.press("-l", "2")
        screen.press("Enter")
        # The next interval ends 2 s after the last one ended.
        slower = screen.wait_screen(lambda sc: " interval 2.0 s " in sc[0], timeout=6)
        t.check(slower is not None, "d 2 Enter: the header's interval 2.0 s",
                "interval 2.0 s", screen.screen()[0])
        os.kill(int(screen.file("pid")), signal.SIGTERM)
        t.check_eq("SIGTERM: exit status", 0, screen.wait_exit())
        screen.check_terminal_settings(t)


@scenario("top_screen_unknown_terminal")
def _(t: Test):
    """A terminal type this host's terminfo does not know: exit status 1 and a message that
    says what to do, the terminal's settings untouched."""
    with ScreenTool("1", env="TERM=memlat-no-such-terminal") as screen:
        rc = screen.wait_exit(30)
        t.check_eq("TERM unknown: exit status", 1, rc)
        t.check_in("TERM unknown: says which and what to do",
                   "TERM=memlat-no-such-terminal has no terminfo entry", screen.file("err"),
                   "stderr")
        t.check_in("TERM unknown: names -b", "-b", screen.file("err"), "stderr")
        screen.check_terminal_settings(t, "untouched")


@scenario("top_batch")
def _(t: Test):
    """-b prints the header and the table every interval, and stops after COUNT."""
    with Tool("memtop", "-b", "1", "2", wait_exit=True) as top:
        pass
    res = top.result
    t.check_eq("memtop -b 1 2: exit status", 0, res.rc)
    t.check_eq("memtop -b 1 2: headers", 2, res.stdout.count("memlat top - "))
    t.check_eq("memtop -b 1 2: table headings", 2, res.stdout.count("CGROUP "))
    for part in ("Mem: ", "PSI memory: ", "Stalled (ms): direct ", "Per second: reclaim ",
                 "memlat top itself: "):
        t.check_in(f"memtop -b: the header's line {part.strip()}", part, res.stdout, "stdout")
    # --max-entries sizes the tables of both BPF sides top loads (memstall's per thread,
    # cachestat's per cgroup); neither refuses it.
    with Tool("memtop", "-b", "--max-entries", "8192", "1", "1", wait_exit=True) as sized:
        pass
    t.check_eq("memtop -b --max-entries 8192 1 1: exit status", 0, sized.result.rc)
    t.check_in("memtop --max-entries: the page cache still counted", "; page cache ",
               sized.result.stdout, "stdout")


@scenario("top_bad_arguments")
def _(t: Test):
    check_help(t, "memtop", ["-b, --batch", "-a, --all", "--rows", "-j, --json", "-o, --output",
                             "      --replay", "STALL%", "USAGE", "LIMIT", "EVENTS", "PSI%",
                             "MEMLAT_DISABLE_HOOKS"])
    with tempfile.TemporaryDirectory(prefix="memlat_top_bad_") as d:
        empty = os.path.join(d, "empty.json")
        open(empty, "w").close()
        check_bad_arguments(t, "memtop", [
            (["0"], "the interval must be a positive number"),
            (["1", "0"], "the count must be a positive number"),
            (["-b", "--rows", "x"], "--rows"),
            (["-b", "-w", "10"], "-w takes 60 to 4096 columns"),
            (["-j", "-w", "100"], "-w sets the width of -b's lines"),
            (["-b", "--replay", os.path.join(d, "none.json")], "cannot read it"),
            (["-b", "--replay", empty], "holds no interval"),
            (["-b", "--replay", empty, "-o", os.path.join(d, "out.json")], "not both"),
            (["-b", "--replay", empty, "-a"], "record with -a"),
            (["-b", "-r", empty], "-r is no longer memlat top's: write --replay"),
            (["-b", "-o", os.path.join(d, "no", "such", "dir.json")], "-o"),
            (["--bogus"], "unrecognized option"),
        ])
        # -o is emptied only once memstall is loaded: a run refused its privileges (as nobody)
        # leaves an earlier record whole.
        kept = os.path.join(d, "kept.json")
        with open(kept, "w") as f:
            f.write("an earlier record\n")
        os.chmod(d, 0o777)
        os.chmod(kept, 0o666)
        res = run(["runuser", "-u", "nobody", "--", binary("memtop"), "-b", "-o", kept, "1", "1"],
                  timeout=30)
        t.check_eq("memtop -o as nobody: exit status (no privilege to load)", 1, res.rc)
        t.check_eq("memtop -o refused: the earlier record left whole", "an earlier record\n",
                   read_file(kept))
        # A record whose writer stopped in the middle of a line: the intervals before it.
        cut = os.path.join(d, "cut.json")
        with open(cut, "w") as f:
            f.write('{"time": "12:00:00", "interval_s"')
        res = run([binary("memtop"), "-b", "--replay", cut], timeout=15)
        t.check_eq("memtop -r of only part of a line: exit status", 2, res.rc)
        t.check_in("memtop -r of only part of a line: says so", "holds no interval (only part",
                   res.stderr, "stderr")
        # A file that is not a record: a runtime error naming the line (empty lines count),
        # no traceback.
        # A first line that is not JSON: no record at all (a usage error, at once).
        for text, line, rc, why in (
                ('{"time": "12:00:00", "interval_s": 1.0}\n', 1, 1,
                 "{} line 1: not an interval of memlat top: "),
                ('{"time": "12:00:00", "interval_s": 1.0}\nnot json\n', 2, 1,
                 "{} line 1: not an interval of memlat top: "),
                ("\nnot json\n", 2, 2, "--replay {} : not a record (a file that memlat top -o or -j "
                 "wrote): line 2 is not JSON")):
            garbage = os.path.join(d, f"garbage{line}_{rc}.json")
            with open(garbage, "w") as f:
                f.write(text)
            res = run([binary("memtop"), "-b", "--replay", garbage], timeout=15)
            t.check_eq(f"memtop -r {text!r}: exit status", rc, res.rc)
            t.check_in(f"memtop -r {text!r}: names the line", why.format(garbage).replace(" :", ":"),
                       res.stderr, "stderr")
        # Files that are no record, as a new user tries them (issue 42's sweep): a device, random
        # bytes, an endless stream without a newline (a FIFO fed from /dev/zero: read until
        # the kernel killed the tool before), and -o onto a full device.
        noise = os.path.join(d, "random.bin")
        with open(noise, "wb") as f:
            f.write(os.urandom(100000))
        endless = os.path.join(d, "endless")
        os.mkfifo(endless)

        def feed_endless() -> None:
            try:
                with open(endless, "wb") as f:
                    while True:
                        f.write(bytes(1 << 20))
            except (BrokenPipeError, OSError):
                pass  # the tool stopped reading: what it should do
        feeder = threading.Thread(target=feed_endless, daemon=True)
        feeder.start()
        for args, rc, says in ((["--replay", "/dev/zero"], 2, "/dev/zero: a device, not a record"),
                               (["--replay", noise], 2, "not a record (a file that memlat top -o or "
                                                  "-j wrote): line 1 is not JSON"),
                               (["--replay", endless], 2, "line 1 is longer than 64 MiB: not a record"),
                               (["-o", "/dev/full", "1", "1"], 1,
                                "cannot write /dev/full: No space left on device")):
            res = run([binary("memtop"), "-b", *args], timeout=60)
            t.check_eq(f"memtop -b {' '.join(args)}: exit status", rc, res.rc)
            t.check_in(f"memtop -b {' '.join(args)}: says why", says, res.stderr, "stderr")
        feeder.join(timeout=10)
        open_still = feeder.is_alive()
        t.check(not open_still, "the endless stream's reader closed it", "closed",
                "still open" if open_still else "closed")
    # A terminal that cannot move the cursor: said at once, not a screen of appended text.
    res = run(["script", "-qec", f"env TERM=dumb {binary('memtop')} 1 1", "/dev/null"],
              timeout=60)
    t.check_eq("memtop on TERM=dumb: exit status", 1, res.rc)
    t.check_in("memtop on TERM=dumb: says the terminal cannot", "TERM=dumb cannot move the cursor",
               res.stdout, "the terminal's output")
    # Without -b or -j the screen is drawn on a terminal: stdout here is a pipe.
    res = run([binary("memtop"), "1", "1"], timeout=15)
    t.check_eq("memtop without a terminal: exit status", 2, res.rc)
    t.check_in("memtop without a terminal: says to give -b", "-b prints text rows",
               res.stderr, "stderr")


if __name__ == "__main__":
    sys.exit(main())
