#!/usr/bin/env python3
"""Runtime tests of drsnoop: real reclaim on the live kernel, started by the tests themselves.

The memory-cgroup scenarios make a cgroup with a 32 MiB limit and read a 128 MiB file inside
it, so the kernel must reclaim the cgroup's page cache again and again (memcg limit reclaim).
The oracle is the kernel's own trace: an ftrace instance of our own, filtered to the reader's
PID, records every mm_vmscan_memcg_reclaim_end with its nr_reclaimed, without BPF. drsnoop must
report the same number of stalls and the same sum of pages (tolerance: 0, as both watch the
same tracepoint over a window that contains the whole workload).
"""
import contextlib
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tolerances import ZONE_FREE_PAGES  # noqa: E402
from memlat_test import (field, FtraceOracle, MemoryCgroup, PerfStat, Test, TestFile, Tool,  # noqa: E402
                         binary, check_bad_arguments, check_help, check_latencies,
                         check_variant_chosen, log, main, oracle_durations_ns, proc_memory_cgroup,
                         read_file, run,
                         scenario, snoop_events, variant_env, variant_scenarios, Workload,
                         check_refused_unprivileged, shared_bad_arguments)

LIMIT = 32 << 20
FILE_SIZE = 128 << 20


@contextlib.contextmanager
def reader_under_limit():
    """Yields (cgroup, reader): a memory cgroup of our own limited to LIMIT bytes, and
    file_reader held at the door (see Workload) to read a cold FILE_SIZE file in it."""
    with MemoryCgroup("drsnoop", LIMIT) as cg, \
            TestFile(FILE_SIZE, "drsnoop_reclaim", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, held=True) as reader:
        yield cg, reader


# ---------------------------------------------------------------- scenarios

@variant_scenarios("drsnoop_memcg_matches_ftrace", btf_file=True, unprivileged=True)
def _(t: Test, variant: str):
    # Also run with the old kernels' fall-backs forced (see FEATURE_VARIANTS): the same
    # numbers against the same oracle.
    env = variant_env(variant)
    with reader_under_limit() as (cg, reader):
        # The reader's cgroup id (its directory's inode), and below the kernel's name for it.
        cgroup_id, outside = os.stat(cg.path).st_ino, proc_memory_cgroup(reader.pid)
        with FtraceOracle(["vmscan/mm_vmscan_memcg_reclaim_begin",
                           "vmscan/mm_vmscan_memcg_reclaim_end"], reader.pid) as oracle, \
                Tool("drsnoop", "-v", "-j", "-p", str(reader.pid), env=env) as by_pid, \
                Tool("drsnoop", "-j", "-k", "memcg", "-G", cg.path, env=env) as by_cgroup:
            reader.release()
            # The kernel's name for the reader's cgroup, once it has moved itself there (the
            # first thing it does when released).
            deadline = time.monotonic() + 5
            while (in_proc := proc_memory_cgroup(reader.pid)) == outside and \
                    time.monotonic() < deadline:
                time.sleep(0.001)
            done = reader.wait_done(60)
            time.sleep(0.3)
            trace = oracle.stop()
            pages_oracle = [int(e["nr_reclaimed"]) for e in trace["mm_vmscan_memcg_reclaim_end"]]
            lat_oracle = oracle_durations_ns(trace["mm_vmscan_memcg_reclaim_begin"],
                                             trace["mm_vmscan_memcg_reclaim_end"])
        log(f"reader pid {reader.pid} read {done['iterations']} pass(es)")
    for name, tool in (("-p", by_pid), ("-G", by_cgroup)):
        res = tool.result
        t.check_eq(f"drsnoop {name} exit status", 0, res.rc)
        events = snoop_events(t, res)
        t.check_ge(f"{name}: memcg stalls reported", 10, len(events))
        t.check_eq(f"{name}: PIDs in the events (only the reader's)", {reader.pid},
                   {e["pid"] for e in events})
        t.check_eq(f"{name}: kinds in the events", {"memcg"}, {e["kind"] for e in events})
        t.check_eq(f"{name}: the events' cgroup, as /proc/PID/cgroup names it", {in_proc},
                   {e.get("cgroup") for e in events})
        t.check_eq(f"{name}: the events' cgroup_id, its directory's inode", {cgroup_id},
                   {e.get("cgroup_id") for e in events})
        t.check_eq(f"{name}: events with LAT > 0", len(events),
                   sum(1 for e in events if e["lat_ns"] > 0))
        t.check_ge(f"{name}: events with PAGES > 0 (most stalls free something)",
                   0.5 * len(events), sum(1 for e in events if e["pages"] > 0))
        t.check_eq(f"{name}: number of stalls vs the ftrace oracle (exact)", len(pages_oracle),
                   len(events))
        t.check_eq(f"{name}: sum of PAGES vs the ftrace oracle's nr_reclaimed (exact)",
                   sum(pages_oracle), sum(e["pages"] for e in events))
        # Perf buffers (old kernels) deliver each CPU's events in batches, not in time order:
        # pair by when each stall began, as the oracle's trace is ordered.
        check_latencies(t, f"{name}: LAT per stall vs the oracle's end - begin",
                        [e["lat_ns"] for e in sorted(events, key=lambda e: e["time_s"])],
                        lat_oracle)
        summary = [e for e in res.json_lines() if "summary" in e][0]["summary"]
        mine = [s for s in summary if s["pid"] == reader.pid and s["kind"] == "memcg"]
        t.require(len(mine) == 1, f"{name}: a summary row for the reader", "1", len(mine))
        t.check_eq(f"{name}: summary stalls", len(events), mine[0]["stalls"])
        t.check_eq(f"{name}: summary pages", sum(e["pages"] for e in events), mine[0]["pages"])
        t.check_close(f"{name}: summary max_ms", max(e["lat_ms"] for e in events),
                      mine[0]["max_ms"], rel_tol=1e-6)
        last = [e for e in res.json_lines() if "summary" in e][0]
        totals = {x["kind"]: x for x in last["totals"]}
        t.check_eq(f"{name}: totals' memcg stalls vs the ftrace oracle (exact)",
                   len(pages_oracle), field(t, totals.get("memcg"), "stalls", "totals"))
        t.check_eq(f"{name}: totals' memcg pages vs the ftrace oracle (exact)",
                   sum(pages_oracle), field(t, totals.get("memcg"), "pages", "totals"))
        t.check_eq(f"{name}: stalls in no row", [], last["left_out"])
    state = check_variant_chosen(t, variant, by_pid.result.stderr, events=True)
    # The reader's one thread made its entry at its first stall, kept it for the others, and
    # the thread-exit program removed it when the reader exited.
    t.check_eq("-p: hash-map entries created, one for the reader's thread", 1, state["created"])
    t.check_eq("-p: hash-map entries removed when the reader exited", 1,
               state["removed_at_exit"])
    t.check_eq("-p: hash-map entries left after the run", 0, state["left"])


@scenario("drsnoop_thread_state_full_of_idle_threads")
def _(t: Test):
    # More threads alive that have stalled than the per-thread map and its LRU overflow map
    # hold (shrunk to 32 entries each by MEMLAT_THREAD_STATES; by default 4096 and 1024), then
    # a thread the tool has not seen: the overflow map gives it an idle thread's entry, and its
    # stalls are timed exactly as the oracle's. (The hash map alone counted every one of them
    # in table_full.)
    map_entries, idle_threads = 32, 96
    env = {"MEMLAT_THREAD_STATES": str(map_entries)}
    with MemoryCgroup("drsnoop_lru", LIMIT) as cg, \
            TestFile(FILE_SIZE, "drsnoop_lru", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--idle-threads",
                     str(idle_threads), held=True) as reader:
        with FtraceOracle(["vmscan/mm_vmscan_memcg_reclaim_begin",
                           "vmscan/mm_vmscan_memcg_reclaim_end"], reader.pid,
                          threads=True) as oracle, \
                Tool("drsnoop", "-v", "-j", "-p", str(reader.pid), env=env) as tool:
            reader.release()
            reader.wait_done(60)
            time.sleep(0.3)
            trace = oracle.stop()
    begins, ends = trace["mm_vmscan_memcg_reclaim_begin"], trace["mm_vmscan_memcg_reclaim_end"]
    t.require(ends, "the oracle saw memcg reclaim in the reader's threads", ">0", len(ends))
    # The threads stall one after another: the last to stall is the new thread.
    final = ends[-1]["_tid"]
    first_final = next(i for i, e in enumerate(ends) if e["_tid"] == final)
    stalled_before = {e["_tid"] for e in ends[:first_final]}
    t.require(len(stalled_before) > 2 * map_entries,
              "threads that stalled before the new thread, more than the maps hold",
              f"> {2 * map_entries}", len(stalled_before))
    res = tool.result
    t.check_eq("drsnoop exit status", 0, res.rc)
    events = snoop_events(t, res)
    t.check_eq("stalls reported vs the ftrace oracle, all threads (exact)", len(ends),
               len(events))
    t.check_eq("sum of PAGES vs the oracle's nr_reclaimed, all threads (exact)",
               sum(int(e["nr_reclaimed"]) for e in ends), sum(e["pages"] for e in events))
    t.check_eq("threads with stalls: the tool's vs the oracle's",
               {int(e["_tid"]) for e in ends}, {e["tid"] for e in events})
    mine = sorted((e for e in events if e["tid"] == int(final)), key=lambda e: e["time_s"])
    final_ends = [e for e in ends if e["_tid"] == final]
    t.check_ge("the new thread's stalls (many: it reads the whole file)", 10, len(final_ends))
    t.check_eq("the new thread's stalls vs the oracle (exact)", len(final_ends), len(mine))
    t.check_eq("the new thread's PAGES vs the oracle (exact)",
               sum(int(e["nr_reclaimed"]) for e in final_ends), sum(e["pages"] for e in mine))
    check_latencies(t, "the new thread's LAT per stall vs the oracle's end - begin",
                    [e["lat_ns"] for e in mine],
                    oracle_durations_ns([b for b in begins if b["_tid"] == final], final_ends))
    summary = [e for e in res.json_lines() if "summary" in e][0]
    t.check_eq("stalls counted in table_full", 0, summary["table_full"])
    t.check_eq("ends without their begin (an open stall's entry evicted)", 0,
               summary["unpaired_ends"])
    state = check_variant_chosen(t, "", res.stderr, events=True)
    threads = len({e["_tid"] for e in ends})
    t.check_eq("-v: entries created, one per thread that stalled (an evicted idle thread "
               "never stalled again)", threads, state["created"])
    t.check_ge("-v: entries evicted (more threads than the maps hold)",
               threads - 2 * map_entries, state["evicted"])
    t.check_in("-v: the maps' sizes from MEMLAT_THREAD_STATES",
               f"the map holds {map_entries} threads, its LRU overflow {map_entries}:",
               res.stderr, "stderr")


@scenario("drsnoop_perf_sees_tracepoints")
def _(t: Test):
    """perf stat beside the classic tracepoint programs (forced): perf, counting machine-wide
    over a longer window, must count at least the stalls the tool reports for the reader."""
    names = ["vmscan:mm_vmscan_memcg_reclaim_begin", "vmscan:mm_vmscan_memcg_reclaim_end"]
    with reader_under_limit() as (cg, reader):
        with PerfStat(names) as perf:
            with Tool("drsnoop", "-v", "-j", "-p", str(reader.pid),
                      env={"MEMLAT_DISABLE_HOOKS": "tp_btf,raw_tp"}) as tool:
                reader.release()
                reader.wait_done(60)
                time.sleep(0.3)
    res = tool.result
    t.check_eq("exit status", 0, res.rc)
    t.check_in("-v: the classic tracepoints are attached", "using tracepoint", res.stderr,
               "stderr")
    stalls = len(snoop_events(t, res))
    t.check_ge("memcg stalls the tool reported for the reader", 10, stalls)
    for n in names:
        t.check_ge(f"perf stat's count of {n} vs the tool's stalls", stalls, perf.counts[n])


@scenario("drsnoop_hist_matches_lines", unprivileged=True)
def _(t: Test):
    # Both modes watch the same workload at the same time, so they see the same stalls.
    with reader_under_limit() as (cg, reader):
        with Tool("drsnoop", "-j", "-p", str(reader.pid)) as lines, \
                Tool("drsnoop", "-j", "-H", "-p", str(reader.pid)) as hist, \
                Tool("drsnoop", "-H", "-P", "-p", str(reader.pid)) as text_hist:
            reader.release()
            reader.wait_done(60)
            time.sleep(0.3)
    events = snoop_events(t, lines.result)
    hists = [h for j in hist.result.json_lines() if "histograms" in j for h in j["histograms"]]
    total = sum(h["count"] for h in hists if h["kind"] == "memcg")
    t.check_ge("stalls in line mode", 10, len(events))
    t.check_close("histogram total vs line-mode stalls", len(events), total, rel_tol=0.05)
    t.check_eq("histogram unit", {"usecs"}, {h["unit"] for h in hists})
    out = text_hist.result.stdout
    t.check_in("per-process histogram header", f"pid {reader.pid} (file_reader), memcg reclaim:",
               out)
    t.check_in("star-style histogram", "usecs               : count    distribution", out)


STORM_ENTRIES = 32  # drsnoop --max-entries for the storm
STORM_RATE = 10     # reclaiming processes a second at most: a third of the table an interval


@scenario("drsnoop_hist_process_storm")
def _(t: Test):
    """-H -P under many short-lived processes that stall in memcg reclaim, with a small table:
    each interval's histograms are that interval's processes. The table used to keep every
    process of the run, so after STORM_ENTRIES of them the histograms stopped."""
    readers = 3 * STORM_ENTRIES
    with MemoryCgroup("drsnoop_storm", 8 << 20) as cg, \
            TestFile(24 << 20, "drsnoop_storm", cold=True) as f:
        with Tool("drsnoop", "-H", "-P", "-j", "--max-entries", str(STORM_ENTRIES), "1") as tool:
            started = time.monotonic()
            ran = 0
            while ran < readers and time.monotonic() < started + 40:
                res = run([binary("file_reader"), "--file", f.path, "--cgroup", cg.path])
                ran += res.rc == 0
                ahead = ran / STORM_RATE - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            took = time.monotonic() - started
            time.sleep(1.2)
    log(f"  {ran} file_reader processes in {took:.1f} s")
    t.check_eq("exit status", 0, tool.result.rc)
    t.require(ran > 2 * STORM_ENTRIES, "processes run (more than the table holds, twice)",
              f"> {2 * STORM_ENTRIES}", ran)
    intervals = [o for o in tool.result.json_lines() if "histograms" in o]
    pids = set()
    for n, o in enumerate(intervals):
        mine = {h["pid"] for h in o["histograms"] if h.get("comm") == "file_reader"}
        pids |= mine
        # table_full also counts the exit summary's table, which keeps every process of the
        # run (at most --max-entries): not checked here.
        log(f"  interval {n}: {len(o['histograms'])} histograms ({len(mine)} file_reader), "
            f"table_full {o['table_full']}")
        t.check_le(f"interval {n}: file_reader histograms (processes of one interval)",
                   STORM_ENTRIES, len(mine))
    t.check_ge("file_readers with a histogram over the run vs readers run (each stalls in "
               "reclaim)", round(0.9 * ran), len(pids))
    # The exit summary keeps STORM_ENTRIES processes: the stalls of the others are in no row,
    # and the summary says how many, so that the rows and what was left out add up.
    last = [o for o in tool.result.json_lines() if "summary" in o][0]
    totals = {x["kind"]: x for x in last["totals"]}
    left = {x["kind"]: x for x in last["left_out"]}
    in_rows = sum(r["stalls"] for r in last["summary"] if r["kind"] == "memcg")
    t.check_le("summary rows (at most --max-entries)", STORM_ENTRIES, len(last["summary"]))
    t.check_ge("memcg stalls in no row (the table was full)", 1,
               field(t, left.get("memcg"), "stalls", "left_out"))
    t.check_eq("memcg stalls: the rows' + those in no row = the totals",
               field(t, totals.get("memcg"), "stalls", "totals"),
               in_rows + field(t, left.get("memcg"), "stalls", "left_out"))


@scenario("drsnoop_extended_text")
def _(t: Test):
    with reader_under_limit() as (cg, reader):
        with Tool("drsnoop", "-e", "-T", "-U", "-p", str(reader.pid)) as tool:
            reader.release()
            reader.wait_done(60)
            time.sleep(0.3)
            zone_free_kb = sum(int(m) for m in re.findall(r"^\s+pages free\s+(\d+)",
                                                         read_file("/proc/zoneinfo"), re.M)) * 4
    out = tool.result.stdout.splitlines()
    header = next((l for l in out if l.startswith("TIME(s)")), "")
    # BCC's columns first, in BCC's order (FREE(KB) where BCC's -v puts it), memlat's after.
    t.check_eq("header", ["TIME(s)", "UID", "COMM", "PID", "LAT(ms)", "PAGES", "FREE(KB)", "KIND",
                          "ORDER", "TID", "CGROUP", "GFP"], header.split())
    rows = [l.split() for l in out if re.match(r"^\d+\.\d+\s", l)]
    t.check_ge("event lines", 10, len(rows))
    if not rows:
        return
    t.check_eq("PID column", {str(reader.pid)}, {r[3] for r in rows})
    t.check_eq("KIND column", {"memcg"}, {r[7] for r in rows})
    t.check_eq("CGROUP column (one cgroup)", 1, len({r[10] for r in rows}))
    free = [int(r[6]) for r in rows]
    # The free memory when each stall began, against the zones' free pages at the end: the
    # workload uses at most its 32 MiB limit, so they agree within a few percent.
    t.check_close("FREE(KB) vs /proc/zoneinfo free pages", zone_free_kb, free[-1],
                  rel_tol=ZONE_FREE_PAGES.rel)
    t.check("GFP names decoded", all(r[11].startswith(("GFP_", "__GFP_")) for r in rows),
            "names like GFP_NOFS|...", rows[0][11])
    # The summary is on stderr: stdout holds the header and the rows, nothing else.
    t.check_eq("stdout lines other than the header and the rows", [],
               [l for l in out if l.strip() and l != header and not re.match(r"^\d+\.\d+\s", l)])
    t.check_in("summary table (stderr)", "Reclaim stalls by process:", tool.result.stderr)


@scenario("drsnoop_bad_input")
def _(t: Test):
    cases = shared_bad_arguments(tid=True, cgroup=True) + [
        (["-k", "bogus"], "unknown reclaim kind 'bogus'"),
        (["-P"], "-P goes with -H"),
        (["1"], "an interval goes with -H"),
        (["-n", "a-name-longer-than-15"], "longer than a task name"),
    ]
    check_bad_arguments(t, "drsnoop", cases)
    # Without privileges: its own message and status 1 (setpriv drops to nobody).
    check_refused_unprivileged(t, "drsnoop", "missing CAP_BPF and CAP_PERFMON: loading BPF "
                               "programs needs root, or the capabilities CAP_BPF and CAP_PERFMON")
    check_help(t, "drsnoop", (
        "--pid", "--tid", "--uid", "--name", "--print-uid", "--extended", "--kind", "--cgroup",
        "--hist", "--per-process", "--timestamp", "--duration", "--json", "--verbose",
        "interval", "FREE(KB)"), width=None)


if __name__ == "__main__":
    sys.exit(main())
