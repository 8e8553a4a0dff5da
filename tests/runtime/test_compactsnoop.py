#!/usr/bin/env python3
"""Runtime tests of compactsnoop: real compaction on the live kernel, started by the tests.

Manual compaction: the compact_fragmenter workload fragments physical memory (it touches
256 MiB page by page and gives every other page back, so the pages it keeps pin a
checkerboard), then the test itself writes 1 to /proc/sys/vm/compact_memory, which compacts
every populated zone of every node in the writer's context. The oracle is the kernel's own
trace: an ftrace instance of our own, filtered to the writer's PID, records every
mm_compaction_end (with its status) and mm_compaction_migratepages. compactsnoop -p WRITER
must report the same runs, statuses and migrated pages (tolerance 0: both watch the same
tracepoints over a window that contains the whole write). The same instance records
mm_compaction_suitable, where BCC's compactsnoop starts its records: it fires 0 times for
manual compaction, so BCC's tool prints nothing for it.

Direct compaction: the fragmenter then faults THP memory with defrag=always (restored
afterwards). Where the kernel compacts directly, the tool's direct-compaction entries are
compared with /proc/vmstat compact_stall over the same window; where every THP fault finds a
free huge page, the scenario is skipped and says so.
"""
import contextlib
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tolerances import ZONE_WATERMARKS  # noqa: E402
from memlat_test import (FtraceOracle, PerfStat, Result, Test, Tool, Workload,  # noqa: E402
                         check_bad_arguments, check_help, check_latencies, check_variant_chosen,
                         log, main, oracle_durations_ns, read_file, run_workload, scenario,
                         skip, snoop_events, variant_env, variant_scenarios, vmstat, write_file,
                         shared_bad_arguments, pprof_raw)

COMPACT_MEMORY = "/proc/sys/vm/compact_memory"
MANUAL_ROUNDS = 4
THP = "/sys/kernel/mm/transparent_hugepage"
FRAGMENT_MIB = "256"


def compact_memory() -> float:
    """Compacts every zone, in this process (the writer); returns the seconds it took."""
    t0 = time.monotonic()
    write_file(COMPACT_MEMORY, "1")
    took = time.monotonic() - t0
    log(f"wrote 1 to {COMPACT_MEMORY} from pid {os.getpid()} ({took:.3f} s)")
    return took


def parse_zoneinfo(text: str) -> dict:
    """/proc/zoneinfo as {(nid, zone name lower-cased): {"present", "managed", "free", "boost",
    "min", "low", "high"}} (also used by the VM checker, tests/vm/check_compactsnoop.py). The
    watermarks include the boost, as the kernel prints them."""
    zones, key = {}, None
    for line in text.splitlines():
        m = re.match(r"Node (\d+), zone\s+(\S+)", line)
        if m:
            key = (int(m.group(1)), m.group(2).lower())
            zones[key] = {}
            continue
        m = re.match(r"\s+(pages free|boost|min|low|high|present|managed)\s+(\d+)$", line)
        if m and key is not None and m.group(1) not in zones[key]:
            zones[key]["free" if m.group(1) == "pages free" else m.group(1)] = int(m.group(2))
    return zones


def zoneinfo() -> dict:
    return parse_zoneinfo(read_file("/proc/zoneinfo"))


def boost_limits(zoneinfo_text: str, boost_factor_text: str | None,
                 pagetypeinfo_text: str | None) -> tuple[int | None, int | None]:
    """(vm.watermark_boost_factor, pages per pageblock) from the files' texts; None where a
    file is missing (kernels before 5.0 have no boost) or unreadable."""
    factor = int(boost_factor_text) if boost_factor_text and boost_factor_text.strip().isdigit() \
        else None
    m = re.search(r"Page block order:\s+(\d+)", pagetypeinfo_text or "")
    return factor, (1 << int(m.group(1))) if m else None


def max_watermark_boost(zone: dict, factor: int, pageblock_pages: int) -> int:
    """The largest watermark boost the kernel gives a zone (boost_watermark() in
    mm/page_alloc.c): vm.watermark_boost_factor ten-thousandths of its unboosted high
    watermark, at least one pageblock; 0 when the factor is 0 (boosting off)."""
    if factor == 0:
        return 0
    high = zone["high"] - zone.get("boost", 0)
    return max(pageblock_pages, high * factor // 10000)


def check_zone_state(t: Test, events: list, zones: dict, factor: int | None = None,
                     pageblock_pages: int | None = None) -> None:
    """-e: each run's zone as it began, against /proc/zoneinfo read right after the runs
    (`zones`, from parse_zoneinfo) and the boost limits (boost_limits()). Also used by the VM
    checker."""
    for e in events:
        z = (e["nid"], e["zone"])
        boost = e["wmark_boost"]
        t.check(e["wmark_min"] <= e["wmark_low"] <= e["wmark_high"],
                f"{z}: watermarks MIN <= LOW <= HIGH", "ordered",
                (e["wmark_min"], e["wmark_low"], e["wmark_high"]))
        # The boost comes and goes within seconds: a fallback allocation that steals a
        # pageblock raises it (the fragmenter's checkerboard does) and kswapd clears it. A CI
        # run on 6.12 read MIN 928 at the run's start and 286 in zoneinfo right after: a boost
        # of 642 gone in between. So the watermarks are compared without their boosts, and the
        # boost is bounded by the most the kernel gives.
        if factor is not None and pageblock_pages is not None:
            t.check_le(f"{z}: watermark boost <= the kernel's most (boost factor {factor})",
                       max_watermark_boost(zones[z], factor, pageblock_pages), boost)
        else:
            log(f"  {z}: boost {boost} not bounded: vm.watermark_boost_factor or the pageblock "
                "order unknown (no /proc/pagetypeinfo)")
        # Watermarks move only when the zones' managed pages change (this kernel grows its
        # Normal zone lazily): within 5%.
        for w in ("min", "low", "high"):
            t.check_close(f"{z}: {w.upper()} less its boost vs /proc/zoneinfo's less its boost",
                          zones[z][w] - zones[z].get("boost", 0), e[f"wmark_{w}"] - boost,
                          rel_tol=ZONE_WATERMARKS.rel)
        from_lists = sum(n << o for o, n in enumerate(e["nr_free"]))
        # NR_FREE_PAGES and the free lists are updated together under the zone lock; the
        # two reads are a few instructions apart.
        t.check_close(f"{z}: FREE vs the sum of its free lists (nr_free << order)",
                      from_lists, e["free_pages"], rel_tol=0.01, abs_tol=64)
        t.check_le(f"{z}: FREE <= managed pages", zones[z]["managed"], e["free_pages"])


def populated_zones() -> set:
    """The zones compact_node() visits: those with present pages."""
    return {k for k, v in zoneinfo().items() if v.get("present", 0) > 0}


def vmstat_counter(name: str) -> int:
    value = vmstat().get(name)
    if value is None:
        skip(f"/proc/vmstat has no {name} (CONFIG_COMPACTION off?)")
    return value


# The oracle's clock for the runs' durations: one for all CPUs (a manual run reschedules
# between zones and may end on another CPU than it began, where the default "local" clock of
# each CPU may run apart from another's).
RUN_CLOCK = "mono"
# How much shorter than the trace a run's LAT may be, whatever its length: with -e the BPF
# side reads the zone's state at the begin and stamps the run's start after it (so that a run
# excludes the tool's own work, compactsnoop.bpf.c), while ftrace, attached first, stamped
# the begin before that work, and before the other -e tool's. Measured on 2026-12-07 with two
# -e tools attached: every run shorter in the tool by 17-35 us (12 runs), up to 87 us in a CI
# run (46 us against 133); a short run then differs by more than 10%.
RUN_HANDLER_NS = 100_000


def check_manual_runs(t: Test, what: str, events: list, oracle: dict, zones: set) -> None:
    ends = oracle["mm_compaction_end"]
    # The trace is in time order; the tool's lines are in the order its buffers delivered
    # them, which with perf buffers (kernels before 5.8) is per CPU, in batches: the writer
    # may move to another CPU between runs. Compared in time order.
    events = sorted(events, key=lambda e: e["time_s"])
    me = os.getpid()
    t.check_eq(f"{what}: runs vs the ftrace oracle's mm_compaction_end for pid {me} (exact)",
               len(ends), len(events))
    t.check_eq(f"{what}: KIND of every run", {"manual"}, {e["kind"] for e in events})
    t.check_eq(f"{what}: PID of every run (the writer)", {me}, {e["pid"] for e in events})
    t.check_eq(f"{what}: ORDER of every run (whole zone)", {-1}, {e["order"] for e in events})
    t.check_eq(f"{what}: (node, zone) of the runs vs the populated zones of /proc/zoneinfo",
               sorted(zones), sorted({(e["nid"], e["zone"]) for e in events}))
    t.check_eq(f"{what}: runs with LAT > 0", len(events),
               sum(1 for e in events if e["lat_ns"] > 0))
    t.check_eq(f"{what}: STATUS of each run vs the oracle's status= (in order, exact)",
               [e["status"] for e in ends], [e["status"] for e in events])
    # Manual compaction runs back to back in this thread: each begin is followed by its end.
    check_latencies(t, f"{what}: LAT per run vs the oracle's end - begin",
                    [e["lat_ns"] for e in events],
                    oracle_durations_ns(oracle["mm_compaction_begin"], ends),
                    abs_tol_ns=RUN_HANDLER_NS)


def check_compact_control(t: Test, hook: str, events: list, stderr: str) -> bool:
    """What -e shows of the manual runs' struct compact_control through HOOK: their MODE
    (sync) and whole_zone where the hook reads the struct (tp_btf, raw_tp); where it does not
    (the classic tracepoints, which do not carry it), no zone state, and -v saying so. Whether
    HOOK reads the struct. Also used by the VM checker."""
    if hook in ("tp_btf", "raw_tp"):
        t.check_eq(f"{hook}: MODE read from struct compact_control", {"sync"},
                   {e["mode"] for e in events})
        t.check_eq(f"{hook}: whole_zone read from struct compact_control", {True},
                   {e["whole_zone"] for e in events})
        return True
    t.check_in(f"{hook}: -v says what the fall-back cannot show",
               "the classic tracepoints carry no struct compact_control", stderr, "stderr")
    t.check_eq(f"{hook}: no zone state with -e", {None}, {e["free_pages"] for e in events})
    return False


def summary_of(result: Result) -> dict:
    return [j for j in result.json_lines() if "summary" in j][0]


# ---------------------------------------------------------------- scenarios

@scenario("compactsnoop_manual_matches_ftrace", btf_file=True, unprivileged=True)
def _(t: Test):
    me = os.getpid()
    zones = populated_zones()
    log(f"populated zones: {sorted(zones)}")
    # -j also writes the runs' stacks as a profile; the tool may run as nobody: a directory
    # anyone may create files in.
    directory = tempfile.mkdtemp(prefix="memlat_compactsnoop_")
    os.chmod(directory, 0o1777)
    folded_path = os.path.join(directory, "runs.folded")
    pprof_path = os.path.join(directory, "runs.pb.gz")
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, directory, True)
        frag = cleanup.enter_context(Workload("compact_fragmenter", "--mib", FRAGMENT_MIB))
        done = frag.wait_done(60)
        log(f"fragmenter pid {frag.pid} left {done['iterations']} order-0 holes")
        with FtraceOracle(["compaction/mm_compaction_begin", "compaction/mm_compaction_end",
                           "compaction/mm_compaction_migratepages",
                           "compaction/mm_compaction_suitable"], me,
                          clock=RUN_CLOCK) as oracle, \
                Tool("compactsnoop", "-j", "-e", "-p", str(me), "--folded-file", folded_path,
                     "--pprof", pprof_path) as js, \
                Tool("compactsnoop", "-T", "-e", "-K", "-p", str(me)) as text:
            # One write sometimes moves nothing (the free scanner finds no target in the
            # lazily grown Normal zone, or another compaction got there first): write again,
            # a few times at most, until pages have moved. Every round lies inside both the
            # tool's and the oracle's window, so the comparisons stay exact. A CI run once
            # moved nothing in four writes (6 ms each; kcompactd had not run): then a new
            # checkerboard, twice at most, beside the first.
            moved_before = vmstat()["pgmigrate_success"]
            for attempt in range(3):
                if attempt > 0:
                    fresh = cleanup.enter_context(
                        Workload("compact_fragmenter", "--mib", FRAGMENT_MIB))
                    fresh.wait_done(60)
                    log(f"nothing moved: a new checkerboard (pid {fresh.pid})")
                for _ in range(MANUAL_ROUNDS):
                    compact_memory()
                    if vmstat()["pgmigrate_success"] > moved_before:
                        break
                if vmstat()["pgmigrate_success"] > moved_before:
                    break
            after_text = read_file("/proc/zoneinfo")
            time.sleep(0.3)
            trace = oracle.stop()
        folded = read_file(folded_path).splitlines()
        samples, names = pprof_raw(t, pprof_path)
    for name, tool in (("-j -e", js), ("-T -e -K", text)):
        t.check_eq(f"compactsnoop {name} exit status", 0, tool.result.rc)
    events = snoop_events(t, js.result)
    t.require(len(events) > 0, "manual-compaction runs reported", ">= 1", len(events))
    check_manual_runs(t, "-j", events, trace, zones)
    migrated = [int(e["nr_migrated"]) for e in trace["mm_compaction_migratepages"]]
    failed = [int(e["nr_failed"]) for e in trace["mm_compaction_migratepages"]]
    t.check_eq("sum of migrated pages vs the oracle's nr_migrated (exact)", sum(migrated),
               sum(e["migrated"] for e in events))
    t.check_eq("sum of failed pages vs the oracle's nr_failed (exact)", sum(failed),
               sum(e["failed"] for e in events))
    t.check_ge("pages migrated (the fragmenter's checkerboard was compacted)", 1,
               sum(e["migrated"] for e in events))
    t.check_eq("mm_compaction_suitable for the writer (where BCC's compactsnoop starts a "
               "record: it would print none of these runs)", 0,
               len(trace["mm_compaction_suitable"]))

    # The profile of the same run: made of its events, so their time and count exactly.
    t.require(all(re.fullmatch(r"\S.* \d+", line) for line in folded),
              "--folded-file: every line is 'frames value'", "all", folded[:2])
    t.check_eq("--folded-file: compaction time = the events' LAT sum (exact)",
               sum(e["lat_ns"] for e in events),
               sum(int(line.rsplit(" ", 1)[1]) for line in folded))
    t.check_eq("--folded-file: root frames (kind, then the writer)", {"manual;"},
               {line.split(";", 1)[0] + ";" for line in folded})
    t.check_eq("--pprof: runs = the events (exact)", len(events),
               sum(s["values"][0] for s in samples))
    # By construction the writer compacts from the compact_memory sysctl (compact_node).
    t.check_eq("--pprof: runs whose kernel stack holds compact_node", len(events),
               sum(s["values"][0] for s in samples
                   if any(names.get(loc) == "compact_node" for loc in s["locations"])))

    # -e: the zone as the run began.
    t.check_eq("FRAGIDX of whole-zone runs (no order to index)", {None},
               {e["fragindex"] for e in events})
    check_zone_state(t, events, parse_zoneinfo(after_text),
                     *boost_limits(after_text, read_file("/proc/sys/vm/watermark_boost_factor", ""),
                                   read_file("/proc/pagetypeinfo", "")))

    summary = summary_of(js.result)
    manual = [s for s in summary["summary"] if s["kind"] == "manual"]
    t.check_eq("summary runs (kind manual)", len(events), sum(s["runs"] for s in manual))
    t.check_close("summary max_ms (kind manual)", max(e["lat_ms"] for e in events),
                  max(s["max_ms"] for s in manual), rel_tol=1e-6)
    t.check_eq("summary: lost events", 0, summary["lost_events"])
    total = [k for k in summary["totals"] if k["kind"] == "manual"]
    t.check_eq("summary totals: runs of kind manual (every status)", len(events),
               sum(k["runs"] for k in total))
    t.check_eq("summary totals: migrated of kind manual vs the events'",
               sum(e["migrated"] for e in events), sum(k["migrated"] for k in total))

    out = text.result.stdout
    header = next((l for l in out.splitlines() if l.startswith("TIME(s)")), "")
    # BCC's columns first, in BCC's order; memlat's KIND MIGRATED FAILED after STATUS.
    t.check_eq("text header", ["TIME(s)", "COMM", "PID", "NODE", "ZONE", "ORDER", "MODE",
                               "FRAGIDX", "MIN", "LOW", "HIGH", "FREE", "LAT(ms)", "STATUS",
                               "KIND", "MIGRATED", "FAILED"], header.split())
    rows = [l.split() for l in out.splitlines() if re.match(r"^\d+\.\d+\s", l)]
    t.check_eq("text lines", len(events), len(rows))
    t.check_eq("text KIND column", {"manual"}, {r[14] for r in rows})
    t.check_eq("text PID column", {str(me)}, {r[2] for r in rows})
    t.check_in("-K stack names the manual path", "sysctl_compaction_handler", out)
    t.check_in("-K stack symbolized (compact_node)", "compact_node", out)
    # The summary is on stderr, so that stdout holds the header, the rows and -K's stacks.
    t.check_in("summary table (stderr)", "Compaction runs by kind and status:",
               text.result.stderr)
    t.check("no summary on stdout", "Compaction runs by kind" not in out, "absent", "present")


@variant_scenarios("compactsnoop_fallbacks")
def _(t: Test, variant: str):
    # Each hook path, also with the old kernels' fall-backs forced (FEATURE_VARIANTS).
    me = os.getpid()
    zones = populated_zones()
    for disabled, hook in (("tp_btf", "raw_tp"), ("tp_btf,raw_tp", "tracepoint")):
        with FtraceOracle(["compaction/mm_compaction_begin", "compaction/mm_compaction_end"], me,
                          clock=RUN_CLOCK) as oracle, \
                Tool("compactsnoop", "-j", "-v", "-e", "-p", str(me),
                     env=variant_env(variant, disabled)) as tool:
            compact_memory()
            time.sleep(0.3)
            trace = oracle.stop()
        res = tool.result
        t.check_eq(f"{hook}: exit status", 0, res.rc)
        t.check_in(f"{hook}: -v names the hook", f"compaction:mm_compaction_begin/end: using "
                   f"{hook}", res.stderr, "stderr")
        events = snoop_events(t, res)
        check_manual_runs(t, hook, events, trace, zones)
        check_compact_control(t, hook, events, res.stderr)
        state = check_variant_chosen(t, variant, res.stderr, events=True)
        # -p selects this process, whose one thread ran every compaction: one entry, kept
        # while the thread lives (it still does).
        t.check_eq(f"{hook}: hash-map entries created, one for this thread", 1,
                   state["created"])
        t.check_eq(f"{hook}: hash-map entries left (this thread's)", 1, state["left"])


@scenario("compactsnoop_perf_sees_tracepoints")
def _(t: Test):
    """perf stat beside the classic tracepoint programs (forced for every probe; the
    migratepages one is classic on every kernel): perf must count at least what an ftrace
    instance saw of this process. A program that returned 0 took perf's count of
    mm_compaction_migratepages from 1,372 to 0 (issue 23)."""
    me = os.getpid()
    names = ["mm_compaction_begin", "mm_compaction_end", "mm_compaction_migratepages"]
    with Workload("compact_fragmenter", "--mib", FRAGMENT_MIB) as frag:
        frag.wait_done(60)
        with PerfStat([f"compaction:{n}" for n in names]) as perf:
            with FtraceOracle([f"compaction/{n}" for n in names], me) as oracle, \
                    Tool("compactsnoop", "-j", "-v", "-p", str(me),
                         env={"MEMLAT_DISABLE_HOOKS": "tp_btf,raw_tp"}) as tool:
                moved_before = vmstat()["pgmigrate_success"]
                for _ in range(MANUAL_ROUNDS):
                    compact_memory()
                    if vmstat()["pgmigrate_success"] > moved_before:
                        break
                time.sleep(0.3)
                trace = oracle.stop()
    res = tool.result
    t.check_eq("exit status", 0, res.rc)
    t.check_in("-v: the classic tracepoints are attached",
               "compaction:mm_compaction_begin/end: using tracepoint", res.stderr, "stderr")
    t.check_eq("the tool's runs vs the ftrace oracle's", len(trace["mm_compaction_end"]),
               len(snoop_events(t, res)))
    t.check_ge("ftrace: migratepages events of this process", 1,
               len(trace["mm_compaction_migratepages"]))
    for n in names:
        t.check_ge(f"perf stat's count of compaction:{n} (machine-wide) vs ftrace's of this "
                   f"process", len(trace[n]), perf.counts[f"compaction:{n}"])


@scenario("compactsnoop_hist_and_kinds", unprivileged=True)
def _(t: Test):
    me = os.getpid()
    with FtraceOracle(["compaction/mm_compaction_begin", "compaction/mm_compaction_end"], me) as oracle, \
            Tool("compactsnoop", "-H", "-O", "-j", "-p", str(me)) as hist, \
            Tool("compactsnoop", "-H", "-p", str(me)) as text_hist, \
            Tool("compactsnoop", "-j", "-k", "manual", "-p", str(me)) as manual, \
            Tool("compactsnoop", "-j", "-k", "direct,kcompactd", "-p", str(me)) as others:
        compact_memory()
        time.sleep(0.3)
        runs = len(oracle.stop()["mm_compaction_end"])
    t.check_ge("runs in the oracle", 1, runs)
    hists = [h for j in hist.result.json_lines() if "histograms" in j for h in j["histograms"]]
    t.check_eq("-H -O: histogram total vs the oracle's runs (exact)", runs,
               sum(h["count"] for h in hists))
    t.check_eq("-H -O: (kind, order) of the histograms", {("manual", -1)},
               {(h["kind"], h["order"]) for h in hists})
    t.check_eq("-H: unit", {"usecs"}, {h["unit"] for h in hists})
    out = text_hist.result.stdout
    t.check_in("-H text: per-kind histogram", "manual compaction:", out)
    t.check_in("-H text: star-style histogram", "usecs               : count    distribution",
               out)
    t.check_eq("-k manual: runs vs the oracle (exact)", runs,
               len(snoop_events(t, manual.result)))
    t.check_eq("-k direct,kcompactd: no manual runs", 0, len(snoop_events(t, others.result)))
    t.check_eq("-k direct,kcompactd: summary is empty", [],
               summary_of(others.result)["summary"])


@scenario("compactsnoop_direct_vs_compact_stall")
def _(t: Test):
    defrag_path, enabled_path = os.path.join(THP, "defrag"), os.path.join(THP, "enabled")
    if not os.path.isfile(defrag_path):
        skip("no transparent huge pages on this kernel (needed to provoke direct compaction)")

    def selected(path: str) -> str:
        return re.search(r"\[(\S+)\]", read_file(path)).group(1)

    old_defrag, old_enabled = selected(defrag_path), selected(enabled_path)
    log(f"THP enabled={old_enabled} defrag={old_defrag}; setting defrag=always")
    try:
        write_file(defrag_path, "always")
        if old_enabled == "never":
            write_file(enabled_path, "madvise")
        with Tool("compactsnoop", "-j", "-k", "direct") as tool:
            stall0, alloc0 = vmstat_counter("compact_stall"), vmstat_counter("thp_fault_alloc")
            done = run_workload("compact_fragmenter", "--mib", FRAGMENT_MIB, "--thp-mib", "512",
                                "--linger", "0", timeout=90)
            stall1, alloc1 = vmstat_counter("compact_stall"), vmstat_counter("thp_fault_alloc")
            time.sleep(0.3)
    finally:
        write_file(defrag_path, old_defrag)
        if old_enabled == "never":
            write_file(enabled_path, old_enabled)
        log(f"restored THP defrag={selected(defrag_path)} enabled={selected(enabled_path)}")
    t.check_eq("compactsnoop exit status", 0, tool.result.rc)
    events = snoop_events(t, tool.result)
    summary = summary_of(tool.result)
    stalls = stall1 - stall0
    entries, entries_run = summary["direct_entries"], summary["direct_entries_run"]
    log(f"compact_stall +{stalls}, thp_fault_alloc +{alloc1 - alloc0}, fragmenter got "
        f"{done['iterations']} holes; tool: {entries} direct entries, {entries_run} with a run, "
        f"{len(events)} direct runs")
    if stalls == 0 and entries == 0 and not events:
        lazy = ("; this kernel also grows its zones on demand (deferred_init=lazy), handing "
                "out fresh free blocks before it would compact"
                if "deferred_init=lazy" in read_file("/proc/cmdline") else "")
        skip(f"the kernel never compacted directly: every THP fault found a free 2 MiB block "
             f"(compact_stall +0, thp_fault_alloc +{alloc1 - alloc0}). Direct compaction needs "
             f"every zone short of free high-order blocks, which takes more memory than a "
             f"test may use here{lazy}")
    # compact_stall counts try_to_compact_pages() calls whose result was not SKIPPED: every
    # entry that ran compaction in some zone, plus entries whose zones were all deferred or
    # already fine. So: entries with a run <= compact_stall <= entries. Slack 2 for an
    # allocation straddling the window's edges.
    t.check_le("direct entries that ran compaction <= compact_stall delta", stalls + 2,
               entries_run)
    t.check_le("compact_stall delta <= direct entries (mm_compaction_try_to_compact_pages)",
               entries + 2, stalls)
    t.check_ge("direct runs >= entries that ran compaction", entries_run, len(events))
    t.check_eq("KIND of the runs", {"direct"} if events else set(), {e["kind"] for e in events})
    t.check_eq("direct runs carry the entry's priority", len(events),
               sum(1 for e in events if "priority" in e))
    t.check("direct runs have an order >= 1", all(e["order"] >= 1 for e in events), "all >= 1",
            sorted({e["order"] for e in events}))


@scenario("compactsnoop_bad_input")
def _(t: Test):
    cases = shared_bad_arguments() + [
        (["-k", "bogus"], "unknown compaction kind 'bogus'"),
        (["-k", "direct,,manual"], "kind list"),
        (["-O"], "-O goes with -H"),
        (["-H", "-e"], "-e and -K go with the per-event output"),
        (["1"], "an interval goes with -H"),
        (["-H", "--folded"], "--folded, --folded-file and --pprof go with the per-run output"),
        (["--folded", "-j"], "--folded prints the folded stacks alone"),
        (["--pprof", "/nonexistent/dir/c.pb.gz"],
         "--pprof /nonexistent/dir/c.pb.gz: cannot write there"),
    ]
    check_bad_arguments(t, "compactsnoop", cases)
    check_help(t, "compactsnoop", (
        "--pid", "--kind", "--extended", "--kernel-stack", "--hist", "--per-order",
        "--timestamp", "--duration", "--json", "--verbose", "interval", "FRAGIDX",
        "MEMLAT_DISABLE_HOOKS", "--folded", "--folded-file", "--pprof"))


if __name__ == "__main__":
    sys.exit(main())
