#!/usr/bin/env python3
"""Runtime tests of memstall: real memory stalls on the live kernel, started by the tests.

Oracles, never inputs of the tool:
- Delay accounting (taskstats over generic netlink, a client of our own below): per task, the
  count and total time of reclaim ("freepages") and thrashing stalls. The tests enable
  kernel.task_delayacct before the workload starts and restore it after. Delay accounting
  starts its reclaim clock inside do_try_to_free_pages, within the tracepoint window memstall
  times, so its total is a little smaller than memstall's and never larger.
- An ftrace instance of our own: the memcg reclaim windows, and the balance_dirty_pages
  pauses, of the workload's PID.
"""
import contextlib
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tolerances import (FTRACE_WINDOW_TIME, TASKSTATS_THRASHING_COUNT,  # noqa: E402
                        TASKSTATS_THRASHING_OVER, TASKSTATS_THRASHING_UNDER)
from memlat_test import (STACK_NO_ROOM, Failure, FtraceOracle, MemoryCgroup,  # noqa: E402
                         PerfStat, Test, TestFile, Tool,
                         Workload, build_dir, own_name, pprof_raw, run,
                         check_bad_arguments, check_help, log, main,
                         field, oracle_durations_ns, read_file, scenario, skip, write_file,
                         check_refused_unprivileged, shared_bad_arguments)


from taskstats_oracle import Taskstats, delay_accounting  # noqa: E402


@contextlib.contextmanager
def low_dirty_limits(background_bytes: int, limit_bytes: int):
    """vm.dirty_background_bytes and vm.dirty_bytes for the block, then the machine's dirty
    limits back as they were. Each limit is a pair of knobs of which one is in force: writing
    one zeroes the other, so both are recorded and the one that was non-zero is written back
    (a 0 cannot be written back: it means "use the other")."""
    pairs = [("vm/dirty_background_bytes", "vm/dirty_background_ratio", background_bytes),
             ("vm/dirty_bytes", "vm/dirty_ratio", limit_bytes)]
    knobs = [k for by_bytes, by_ratio, _ in pairs for k in (by_bytes, by_ratio)]
    old = {k: read_file(f"/proc/sys/{k}").strip() for k in knobs}
    try:
        for by_bytes, _, value in pairs:
            write_file(f"/proc/sys/{by_bytes}", str(value))
        yield
    finally:
        for by_bytes, by_ratio, _ in pairs:
            in_force = by_bytes if old[by_bytes] != "0" else by_ratio
            write_file(f"/proc/sys/{in_force}", old[in_force])
        restored = {k: read_file(f"/proc/sys/{k}").strip() for k in knobs}
        if restored != old:
            raise Failure(f"the dirty limits could not be restored: {restored}, were {old}")


# ---------------------------------------------------------------- helpers

def last_rows(t: Test, tool: Tool, key: str = "processes") -> list[dict]:
    """The rows of the tool's last JSON line (one line at the end without an interval)."""
    res = tool.result
    t.check_eq(f"{' '.join(res.argv[1:])}: exit status", 0, res.rc)
    lines = [j for j in res.json_lines() if key in j]
    t.require(len(lines) >= 1, f"{' '.join(res.argv[1:])}: a JSON line with {key}", ">= 1",
              len(lines))
    last = lines[-1]
    t.check_eq(f"{' '.join(res.argv[1:])}: table_full", 0, last["table_full"])
    return last[key]


def cause(row: dict, name: str) -> dict:
    return row["causes"].get(name, {"stalls": 0, "ns": 0, "max_ns": 0})


def row_of(rows: list[dict], pid: int) -> dict:
    mine = [r for r in rows if r.get("pid") == pid]
    return mine[0] if mine else {"pid": pid, "stall_ns": 0, "causes": {}}


LIMIT = 32 << 20
FILE_SIZE = 128 << 20


@contextlib.contextmanager
def reader_and_idle_sibling(tag: str, passes: int = 2):
    """With delay accounting on: a file_reader held at the door (see Workload) to read a cold
    FILE_SIZE file `passes` times (twice) in a memory cgroup of our own limited to LIMIT bytes (memcg limit
    reclaim), and a sibling cgroup with the same limit whose only process, another reader, is
    held at the door for the whole block (never released): a process that never stalls.
    Yields (taskstats, cgroup, idle cgroup, reader, idle process)."""
    with delay_accounting() as taskstats, \
            MemoryCgroup(tag, LIMIT) as cg, MemoryCgroup(f"{tag}_idle", LIMIT) as idle_cg, \
            TestFile(FILE_SIZE, f"{tag}_reclaim", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes",
                     str(passes), "--linger", held=True) as reader, \
            Workload("file_reader", "--file", f.path, held=True) as idle:
        idle_cg.add(idle.pid)
        yield taskstats, cg, idle_cg, reader, idle


# ---------------------------------------------------------------- scenarios

@scenario("memstall_memcg_vs_taskstats")
def _(t: Test):
    """A reader in a 32 MiB memory cgroup reads a 128 MiB file twice: memcg limit reclaim.
    memstall's per-task reclaim stalls (-p, -G and -t) against delay accounting's freepages
    and the ftrace windows; a sibling cgroup with an idle process shows nothing; -p of a
    process that never stalls shows a zero row; -C charges the stalls to the reader's
    cgroup."""
    with reader_and_idle_sibling("memstall") as (taskstats, cg, idle_cg, reader, idle):
        with FtraceOracle(["vmscan/mm_vmscan_memcg_reclaim_begin",
                           "vmscan/mm_vmscan_memcg_reclaim_end",
                           "vmscan/mm_vmscan_direct_reclaim_begin",
                           "vmscan/mm_vmscan_direct_reclaim_end"], reader.pid) as oracle, \
                Tool("memstall", "-v", "-j", "-p", str(reader.pid)) as by_pid, \
                Tool("memstall", "-j", "-G", cg.path) as by_cgroup, \
                Tool("memstall", "-j", "-t", str(reader.pid)) as by_tid, \
                Tool("memstall", "-j", "-G", idle_cg.path) as sibling, \
                Tool("memstall", "-j", "-p", str(idle.pid)) as never, \
                Tool("memstall", "-j", "-C") as per_cgroup:
            reader.release()
            done = reader.wait_done(60)
            time.sleep(0.3)
            stats = taskstats.get(reader.pid)
            trace = oracle.stop()
        log(f"reader pid {reader.pid} read {done['iterations']} passes; taskstats {stats}")
    windows = oracle_durations_ns(trace["mm_vmscan_memcg_reclaim_begin"],
                                  trace["mm_vmscan_memcg_reclaim_end"])
    direct = oracle_durations_ns(trace["mm_vmscan_direct_reclaim_begin"],
                                 trace["mm_vmscan_direct_reclaim_end"])
    t.check_ge("memcg reclaim windows in the ftrace oracle", 10, len(windows))
    # The reader has one thread, whose id is the process's: -t selects the same stalls. Its
    # time is compared with -p's below, not with the oracles: seven tracers run on the reclaim
    # tracepoints here, and one attached later sees its windows shifted by the work of those
    # before it, more at the begin (thread-table inserts) than at the end: -t, attached third,
    # read 3.8 us a window short of ftrace once (-10.6%).
    reclaim_ns_of: dict[str, int] = {}
    for name, tool in (("-p", by_pid), ("-G", by_cgroup), ("-t", by_tid)):
        rows = last_rows(t, tool)
        mine = row_of(rows, reader.pid)
        memcg = cause(mine, "memcg")
        reclaim_stalls = memcg["stalls"] + cause(mine, "direct")["stalls"]
        reclaim_ns = memcg["ns"] + cause(mine, "direct")["ns"]
        t.check_eq(f"{name}: processes with stalls (only the reader)", [reader.pid],
                   [r["pid"] for r in rows if r["stall_ns"] > 0])
        t.check_eq(f"{name}: memcg stalls vs the ftrace windows (exact)", len(windows),
                   memcg["stalls"])
        t.check_eq(f"{name}: direct stalls vs the ftrace windows (exact)", len(direct),
                   cause(mine, "direct")["stalls"])
        t.check_eq(f"{name}: reclaim stalls vs taskstats freepages_count (exact)",
                   stats["freepages_count"], reclaim_stalls)
        t.check_eq(f"{name}: stall_ns is the sum of the causes",
                   sum(c["ns"] for c in mine["causes"].values()), mine["stall_ns"])
        freed = sum(int(e["nr_reclaimed"]) for e in trace["mm_vmscan_memcg_reclaim_end"] +
                    trace["mm_vmscan_direct_reclaim_end"])
        t.check_eq(f"{name}: reclaimed pages vs ftrace's nr_reclaimed (exact)", freed,
                   field(t, memcg, "reclaimed_pages", "memcg") +
                   cause(mine, "direct").get("reclaimed_pages", 0))
        log(f"  {name}: causes of the reader: {mine['causes']}")
        reclaim_ns_of[name] = reclaim_ns
        if name == "-t":
            continue
        # ftrace prints microseconds: each window is +/- 1 us, and the two tracers record the
        # same tracepoints a little apart (check_latencies in memlat_test.py).
        oracle_ns = sum(windows) + sum(direct)
        t.check_close(f"{name}: reclaim time vs the ftrace windows", oracle_ns, reclaim_ns,
                      rel_tol=FTRACE_WINDOW_TIME.rel,
                      abs_tol=FTRACE_WINDOW_TIME.abs * 1000 * (len(windows) + len(direct)))
        # Delay accounting's window lies inside the tracepoints' (it starts in
        # do_try_to_free_pages): never more than memstall's time. What lies between is a
        # little work per window, the programs attached after memstall's on the begin
        # tracepoint among it (six tracers here): 1.9 and 2.8 us per window in two runs, so
        # at most 10 us per window; and once 1 ms more, for the hypervisor of this VM, which
        # can take the CPU for that long inside one window (a CI run: 1.31 ms over 105
        # windows, the longest 665 us; check_latencies in memlat_test.py saw 966 us).
        gap = reclaim_ns - stats["freepages_delay_total"]
        log(f"  {name}: memstall - delay accounting: {gap} ns, "
            f"{gap / max(1, reclaim_stalls):.0f} ns per window")
        t.check_ge(f"{name}: memstall's reclaim time >= taskstats freepages_delay_total", 0, gap)
        t.check_le(f"{name}: memstall's reclaim time - freepages_delay_total <= 10 us per "
                   "window + 1 ms", 10_000 * reclaim_stalls + 1_000_000, gap)
    t.check_close("-t: reclaim time vs -p's (the same windows; 5 us a window for the tracers "
                  "between them)", reclaim_ns_of["-p"], reclaim_ns_of["-t"], rel_tol=0,
                  abs_tol=5_000 * (len(windows) + len(direct)))
    sibling_rows = last_rows(t, sibling)
    t.check_eq("-G sibling cgroup (an idle reader): rows with stalls", [],
               [r for r in sibling_rows if r["stall_ns"] > 0])
    never_rows = last_rows(t, never)
    t.check_eq("-p of a process that never stalls: its row, at zero",
               [(idle.pid, 0)], [(r["pid"], r["stall_ns"]) for r in never_rows])
    cgroups = last_rows(t, per_cgroup, "cgroups")
    mine = [r for r in cgroups if r["cgroup"] == cg.in_hierarchy]
    t.require(len(mine) == 1, "-C: a row for the reader's cgroup", "1", len(mine))
    t.check_ge("-C: the cgroup's memcg stalls include the reader's", len(windows),
               cause(mine[0], "memcg")["stalls"])
    t.check_eq("-C: no row for the idle sibling cgroup", [],
               [r for r in cgroups if r["cgroup"] == idle_cg.in_hierarchy])
    err = by_pid.result.stderr
    for line in ("memcg:   wall time between vmscan:mm_vmscan_memcg_reclaim_begin",
                 "thrash:  off-CPU time with task_struct->in_memstall set"):
        t.check_in(f"-v says how: {line[:20]}...", line, err, "stderr")


@scenario("memstall_tid_of_two_threads")
def _(t: Test):
    """-t selects one thread, not its process: a reader in a 32 MiB memory cgroup reads a cold
    128 MiB file once in its main thread while a second thread reads it three times, so the
    two threads stall in memcg reclaim a different number of times. The oracle is an ftrace
    instance of the reclaim tracepoints for every thread of the process (common_pid is the
    thread): memstall -t PID (the main thread) counts the main thread's windows exactly, -p
    PID every thread's. A -t that filtered by process would count the second thread's too."""
    with MemoryCgroup("memstall_tid", LIMIT) as cg, \
            TestFile(FILE_SIZE, "memstall_tid", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "1",
                     "--second-reader-passes", "3", held=True) as reader:
        with FtraceOracle(["vmscan/mm_vmscan_memcg_reclaim_begin",
                           "vmscan/mm_vmscan_memcg_reclaim_end"], reader.pid,
                          threads=True) as oracle, \
                Tool("memstall", "-j", "-t", str(reader.pid)) as by_tid, \
                Tool("memstall", "-j", "-p", str(reader.pid)) as by_pid:
            reader.release()
            reader.wait_done(120)
            time.sleep(0.3)
            trace = oracle.stop()
    begins: dict[int, list[dict]] = {}
    ends: dict[int, list[dict]] = {}
    for e in trace["mm_vmscan_memcg_reclaim_begin"]:
        begins.setdefault(int(e["_tid"]), []).append(e)
    for e in trace["mm_vmscan_memcg_reclaim_end"]:
        ends.setdefault(int(e["_tid"]), []).append(e)
    windows = {tid: len(oracle_durations_ns(begins[tid], ends.get(tid, []))) for tid in begins}
    main_thread = windows.get(reader.pid, 0)
    others = sum(n for tid, n in windows.items() if tid != reader.pid)
    log(f"  ftrace windows by thread: {windows}")
    # The precondition, from the oracle alone: both threads stalled, differently.
    if main_thread < 5 or others < 5:
        skip(f"the threads did not both stall in reclaim (ftrace windows by thread {windows})")
    rows_t = last_rows(t, by_tid)
    rows_p = last_rows(t, by_pid)
    memcg_t = cause(row_of(rows_t, reader.pid), "memcg")["stalls"]
    memcg_p = cause(row_of(rows_p, reader.pid), "memcg")["stalls"]
    t.check_eq("-t PID: memcg stalls vs the main thread's ftrace windows (exact)", main_thread,
               memcg_t)
    t.check_eq("-p PID: memcg stalls vs every thread's ftrace windows (exact)",
               main_thread + others, memcg_p)
    t.check_eq("-t PID: processes with stalls (the main thread's process only)", [reader.pid],
               [r["pid"] for r in rows_t if r["stall_ns"] > 0])


@scenario("memstall_rows_left_out")
def _(t: Test):
    """-r cuts rows, never stalls: two readers in one 32 MiB memory cgroup both stall in memcg
    reclaim (delay accounting, the precondition); memstall -r 1 -G CGROUP lists one of them
    and says what it left out, its rows plus left_out add up to its totals, and the totals
    equal every row of a run without -r over the same events. In text, the line that says how
    many rows were cut. (Against delay accounting the two readers' reclaim stalls read exact
    in two runs and 8 of 348 short in a third: do_try_to_free_pages() goes back to its retry
    label, which opens a new delay-accounting episode, when a pass skipped deactivation or a
    cgroup's protection (sc->skipped_deactivate, memcg_low_skipped), all inside one pair of
    reclaim tracepoints; two readers competing for one cgroup's pages make that happen. So
    memstall's windows are at most delay accounting's episodes, not asserted here;
    memstall_memcg_vs_taskstats holds one reader to them exactly, and
    memstall_thrashing_vs_taskstats bounds them from one side.)"""
    with delay_accounting() as taskstats, MemoryCgroup("memstall_rows", LIMIT) as cg, \
            TestFile(FILE_SIZE, "memstall_rows", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "1",
                     "--linger", held=True) as first, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "1",
                     "--offset-mb", "64", "--linger", held=True) as second:
        with Tool("memstall", "-j", "-r", "1", "-G", cg.path) as cut, \
                Tool("memstall", "-j", "-G", cg.path) as whole, \
                Tool("memstall", "-r", "1", "-G", cg.path) as text:
            first.release()
            second.release()
            first.wait_done(120)
            second.wait_done(120)
            time.sleep(0.3)
            episodes = {w.pid: taskstats.get(w.pid)["freepages_count"] for w in (first, second)}
    log(f"  delay accounting's reclaim episodes by reader: {episodes}")
    # The precondition, from the oracle: both readers reclaimed.
    if min(episodes.values()) == 0:
        skip(f"a reader never reclaimed (delay accounting {episodes})")
    t.check_eq("text: exit status", 0, text.result.rc)
    last = cut.result.json_lines()
    t.require(cut.result.rc == 0 and len(last) >= 1, "-j -r 1: exit 0 and a JSON line", "yes",
              f"exit {cut.result.rc}, {len(last)} lines")
    out = last[-1]
    rows = out.get("processes") or []
    left = out.get("left_out_total") or {}
    totals = (out.get("total") or {}).get("causes") or {}
    t.check_eq("-r 1: rows listed", 1, len(rows))
    t.check_eq("-r 1: left_out_total.rows", 1, left.get("rows"))
    t.check_eq("-r 1: the row's and left_out_total's stall_ns vs total's",
               (out.get("total") or {}).get("stall_ns"),
               sum(r["stall_ns"] for r in rows) + left.get("stall_ns", 0))
    reclaim = sum(totals.get(c, {}).get("stalls", 0) for c in ("memcg", "direct"))
    log(f"  -r 1 total's reclaim stalls {reclaim}; delay accounting {sum(episodes.values())}")
    all_rows = (whole.result.json_lines() or [{}])[-1].get("processes") or []
    t.check_eq("-r 1 total's stalls per cause vs every row of the run without -r",
               {c: v["stalls"] for c, v in totals.items()},
               {c: sum(r["causes"].get(c, {}).get("stalls", 0) for r in all_rows)
                for c in totals})
    t.check_eq("the run without -r: rows with stalls (both readers)", 2,
               sum(1 for r in all_rows if r["stall_ns"] > 0))
    for cause, total in totals.items():
        listed = sum(r["causes"].get(cause, {}).get("ns", 0) for r in rows)
        t.check_eq(f"{cause}: rows + left_out == totals (ns)", total["ns"],
                   listed + (left.get("causes") or {}).get(cause, {}).get("ns", 0))
    more = [line for line in text.result.stdout.splitlines() if "not shown: -r 1" in line]
    t.check_eq("text: one line says what -r left out", 1, len(more))
    t.check_in("that line counts one process", "1 more process (", more[0] if more else "",
               "the line")


def folded_lines(t: Test, text: str, what: str) -> list[tuple[list[str], int]]:
    """Folded stacks as (frames root first, value); every line must be `frames value`."""
    matches = [(line, re.fullmatch(r"(\S.*) (\d+)", line)) for line in text.splitlines()]
    t.require(all(m for _, m in matches), f"{what}: every line is 'frames value'", "all",
              [line for line, m in matches if not m][:3])
    return [(m.group(1).split(";"), int(m.group(2))) for _, m in matches]


@scenario("memstall_profiles_vs_taskstats")
def _(t: Test):
    """Stall profiles of a reader that faults a file in through mmap in a 32 MiB memory
    cgroup (memcg reclaim from one named function, mmap_pass): --folded-file and --pprof sum,
    per cause, to exactly the stall time of memstall's own table in the same run; Go's pprof
    reads the profile, whose memcg stacks end in the kernel function that reclaims and
    contain the workload's function; --folded --folded-counts counts as many reclaim stalls
    as delay accounting."""
    folded_path = os.path.join(build_dir(), own_name("memstall_profile") + ".folded")
    pprof_path = os.path.join(build_dir(), own_name("memstall_profile") + ".pb.gz")
    try:
        with delay_accounting() as taskstats, MemoryCgroup("memstall_profile", LIMIT) as cg, \
                TestFile(FILE_SIZE, "memstall_profile", cold=True) as f, \
                Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "2",
                         "--mmap", "--linger", held=True) as reader:
            with Tool("memstall", "-j", "-r", "1000", "-G", cg.path, "-f", folded_path,
                      "--pprof", pprof_path) as table, \
                    Tool("memstall", "--folded", "--folded-counts", "-p",
                         str(reader.pid)) as counts:
                reader.release()
                reader.wait_done(60)
                time.sleep(0.3)
                stats = taskstats.get(reader.pid)
        rows = last_rows(t, table)
        folded = folded_lines(t, read_file(folded_path), "--folded-file")
        samples, names = pprof_raw(t, pprof_path)
        # pprof names the source lines itself from the mappings' files where they have debug
        # information (the workloads are built with -g): the profile's mappings must be right.
        lines = run(["go", "tool", "pprof", "-symbolize=force", "-lines", "-top", pprof_path],
                    timeout=120)
    finally:
        for path in (folded_path, pprof_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    table_ns: dict[str, int] = {}
    for row in rows:
        for name, c in row["causes"].items():
            table_ns[name] = table_ns.get(name, 0) + c["ns"]
    folded_ns: dict[str, int] = {}
    for frames, value in folded:
        folded_ns[frames[0]] = folded_ns.get(frames[0], 0) + value
    pprof_ns: dict[str, int] = {}
    for sample in samples:
        cause_label = sample["labels"].get("cause", "?")
        pprof_ns[cause_label] = pprof_ns.get(cause_label, 0) + sample["values"][1]
    log(f"stall ns per cause: table {table_ns}, folded {folded_ns}, pprof {pprof_ns}")
    t.check_ge("memcg stall time in the table", 1, table_ns.get("memcg", 0))
    t.check_eq("--folded-file: ns per cause (the root frame) = the table's (exact)",
               {k: v for k, v in table_ns.items() if v}, folded_ns)
    t.check_eq("--pprof: stall_time per cause label = the table's (exact)",
               {k: v for k, v in table_ns.items() if v}, pprof_ns)
    t.check_eq("--pprof: every sample labelled with the cgroup", {cg.in_hierarchy},
               {s["labels"].get("cgroup") for s in samples})
    t.check_eq("--pprof: every sample labelled with the reader's pid", {str(reader.pid)},
               {s["labels"].get("pid") for s in samples})
    # By construction: the memcg window ends inside try_to_free_mem_cgroup_pages, where the
    # stack is taken (the BPF machinery above it is left out), and the reader faults the file
    # in from mmap_pass (built with frame pointers, not inlined). A stack the kernel's
    # stack-trace table could not keep (a hash collision) has no frames, hence "most".
    memcg = [s for s in samples if s["labels"].get("cause") == "memcg"]
    framed = [s for s in memcg if names.get(s["locations"][0], "").startswith("try_to_free")]
    framed_ns = sum(s["values"][1] for s in framed)
    t.check_ge("--pprof: memcg time whose innermost frame is try_to_free_mem_cgroup_pages "
               "(>= 95%)", 0.95 * sum(s["values"][1] for s in memcg), framed_ns)
    with_user = [s for s in framed
                 if any("mmap_pass" in names.get(loc, "") for loc in s["locations"])]
    t.check_ge("--pprof: of those, time with mmap_pass among the user frames (>= 95%)",
               0.95 * framed_ns, sum(s["values"][1] for s in with_user))
    t.check_in("go tool pprof -symbolize=force -lines: the workload's source lines",
               "file_reader.cpp:", lines.stdout, "its -top")
    t.check_in("--folded-file: kernel frames marked _[k]", "try_to_free_mem_cgroup_pages_[k]",
               " ".join(f[-1] for f, _ in folded), "innermost frames")
    # --folded --folded-counts: stall counts on stdout, the cause then the process as roots.
    counted = folded_lines(t, counts.result.stdout, "--folded --folded-counts")
    reclaim_stalls = sum(v for frames, v in counted if frames[0] in ("memcg", "direct"))
    t.check_eq("--folded --folded-counts: reclaim stalls vs taskstats freepages_count (exact)",
               stats["freepages_count"], reclaim_stalls)
    t.check_eq("--folded: the process frame", {f"file_reader-{reader.pid}"},
               {frames[1] for frames, _ in counted})


def steal_seconds() -> float:
    """CPU time the hypervisor gave to others while this machine's CPUs had work (the steal
    column of /proc/stat's cpu line, in USER_HZ ticks)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def stacks_without_room(tool: Tool, pid: int) -> bool:
    """Whether a stack the --stacks checks read (the hot reader's top thrash and memcg rows)
    found no room in memstall's stack map, as the tool said (its row and stacks_lost): a hash
    collision, whose chance is the share of the map's slots other stacks took (up to 38 stacks
    in 4,096 slots in the variants here: about 1% a stack, and a CI run of the variants lost
    one twice), and which the next round, with other user addresses, does not repeat."""
    lines = [j for j in tool.result.json_lines() if "stacks" in j]
    if len(lines) != 1 or not lines[0].get("stacks_lost"):
        return False
    for name in ("thrash", "memcg"):
        top = [s for s in lines[0]["stacks"] if s["cause"] == name and s["pid"] == pid]
        frames = (top[0].get("kernel_stack", []) + top[0].get("user_stack", [])) if top else []
        if STACK_NO_ROOM in frames:
            log(f"  the top {name} stack found no room in the stack map "
                f"({lines[0]['stacks_lost']} stacks lost): another round")
            return True
    return False


def hot_reader_under_pressure(taskstats: Taskstats, cg: MemoryCgroup, hot_path: str,
                              stream_path: str, env: dict) -> tuple[Tool, dict, dict, int]:
    """One round of the thrashing workload (see the scenario): (the tool, the hot reader's
    taskstats, the ftrace oracle's trace, the hot reader's pid)."""
    with Workload("file_reader", "--file", hot_path, "--cgroup", cg.path, "--passes", "400",
                  "--mmap", "--linger", held=True) as hot:
        with FtraceOracle(["vmscan/mm_vmscan_memcg_reclaim_begin",
                           "vmscan/mm_vmscan_memcg_reclaim_end"], hot.pid) as oracle, \
                Tool("memstall", "-v", "-j", "-s", "-p", str(hot.pid), env=env) as tool:
            with Workload("file_reader", "--file", stream_path, "--cgroup", cg.path,
                          "--passes", "100"):
                hot.release()
                hot.wait_done(90)
            time.sleep(0.3)
            stats = taskstats.get(hot.pid)
            trace = oracle.stop()
    return tool, stats, trace, hot.pid


# The hooks each variant of the thrashing scenario runs on: this kernel's own choice (tp_btf),
# raw tracepoints (sched_switch then reads in_memstall through probe reads), and as on a
# kernel without BTF of its own (raw tracepoints, CO-RE against a BTF file given with --btf).
HOOK_VARIANTS = {
    "": ({}, "tp_btf"),
    "_raw_tp": ({"MEMLAT_DISABLE_HOOKS": "tp_btf"}, "raw_tp"),
    "_no_kernel_btf": ({"MEMLAT_DISABLE_HOOKS": "tp_btf", "MEMLAT_DISABLE_FEATURES":
                        "kernel_btf"}, "raw_tp"),
    # The stack walked unrolled, as before 5.17 (no bpf_loop()).
    "_unrolled": ({"MEMLAT_DISABLE_HOOKS": "stack_loop"}, "tp_btf"),
    # As on a kernel booted with PSI disabled (Debian's default): task_struct->in_memstall is
    # ignored, and thrashing is told by in_thrashing on the reader's I/O sleeps. The VM tests
    # boot kernels with psi=0 for the real thing.
    "_psi_off": ({"MEMLAT_DISABLE_FEATURES": "psi"}, "tp_btf"),
}
# The causes each variant cannot measure (memstall -j's unmeasured_causes).
UNMEASURED = {"_psi_off": ["other"]}
# The sched_switch program each variant must use, where it is not the kind's first.
SWITCH_PROGRAM = {"_unrolled": "switch_unrolled_btf"}


def thrashing_vs_taskstats(t: Test, variant: str) -> None:
    """Refault thrashing in a 32 MiB memory cgroup: a reader maps a 20 MiB file and touches
    it again and again (its pages become active), while a second reader streams a 128 MiB
    file through the same cgroup. The stream's pressure deactivates the hot pages (which
    marks them workingset) and evicts them; touched again soon after, they are read back as
    workingset refaults, and the wait for each is a thrashing stall in folio_wait_bit_common.
    Whether the kernel sees them as workingset varies from run to run (here 3 of 7 runs
    showed none), so up to three rounds run until delay accounting counts thrashing (and the
    stacks --stacks is checked on were kept: stacks_without_room()).
    memstall's THRASH of the hot reader against delay accounting's thrashing, and its memcg
    reclaim against the ftrace windows and freepages."""
    with delay_accounting() as taskstats, MemoryCgroup("memstall_thrash", LIMIT) as cg, \
            TestFile(20 << 20, "memstall_hot") as hot_file, \
            TestFile(FILE_SIZE, "memstall_stream") as stream_file:
        for round_ in range(3):
            hot_file.evict()
            stream_file.evict()
            steal_before = steal_seconds()
            tool, stats, trace, pid = hot_reader_under_pressure(
                taskstats, cg, hot_file.path, stream_file.path, HOOK_VARIANTS[variant][0])
            log(f"round {round_ + 1}: taskstats of the hot reader: {stats}; the hypervisor "
                f"took {steal_seconds() - steal_before:.2f} s of this machine's CPUs (steal)")
            if stats["thrashing_count"] > 0 and not stacks_without_room(tool, pid):
                break
    mine = row_of(last_rows(t, tool), pid)
    thrash, memcg = cause(mine, "thrash"), cause(mine, "memcg")
    # Every cause measured here (PSI on; as nobody the frames named by the kernel); without PSI
    # all but OTHER.
    t.check_eq("-j: unmeasured_causes", UNMEASURED.get(variant, []),
               sorted([j for j in tool.result.json_lines()
                       if "processes" in j][-1]["unmeasured_causes"]))
    log(f"memstall's causes of the hot reader: {mine['causes']}")
    # On this 6.18 guest a task is now and then back on a CPU without a sched_switch that
    # names it (tracefs and bpftrace miss the same switch-ins): memstall then ends the stall
    # at the task's next switch-out, less the time it ran. Before, that stall was lost whole
    # (CI: 19 of 20 stalls, 41.6 ms of 44.2).
    log(f"stalls whose switch-in no sched_switch showed: "
        f"{[j.get('unseen_switch_ins') for j in tool.result.json_lines() if 'processes' in j]}")
    if stats["thrashing_count"] == 0:
        skip("in three rounds the kernel counted no thrashing for the hot reader (taskstats "
             "thrashing_count 0): its refaulting pages did not come back as workingset")
    windows = len(trace["mm_vmscan_memcg_reclaim_end"])
    t.check_eq("memcg stalls vs the ftrace windows (exact)", windows, memcg["stalls"])
    # do_try_to_free_pages ends its delay-accounting episode before it retries a pass that
    # freed nothing (two readers compete for the same pages here), so one window can count
    # several times there; with one reader the counts are equal (memcg_vs_taskstats).
    log(f"taskstats freepages_count - memcg windows: {stats['freepages_count'] - windows}")
    t.check_le("memcg stalls <= taskstats freepages_count", stats["freepages_count"],
               memcg["stalls"])
    # Delay accounting times each wait for a workingset folio in folio_wait_bit_common, on the
    # CPU too; memstall the time the task slept in it, and also the sleeps of the other
    # memstall that PSI charges to refaults (readahead of workingset pages, read_pages()),
    # which delay accounting does not count. Three runs here: 0.984, 0.996 and 1.0017 of
    # delay accounting's total, counts equal or one more. What delay accounting counts on the
    # CPU (before the sleep: io_schedule() flushes the task's plug of reads) is not memstall's:
    # 0.919 and 0.930 in two runs that took twice their usual time (280-320 us a stall, counts
    # equal; a busy host, we think: each round now logs this VM's steal time), 0.984-0.998 in
    # the five after. So
    # memstall's time is at most 5% over delay accounting's (the readahead sleeps) and at most
    # 10% under it.
    t.check_close("thrash stalls vs taskstats thrashing_count", stats["thrashing_count"],
                  thrash["stalls"], rel_tol=TASKSTATS_THRASHING_COUNT.rel,
                  abs_tol=TASKSTATS_THRASHING_COUNT.abs)
    t.check_le("thrash time <= taskstats thrashing_delay_total + 5%",
               (1 + TASKSTATS_THRASHING_OVER.rel) * stats["thrashing_delay_total"], thrash["ns"])
    t.check_ge("thrash time >= taskstats thrashing_delay_total - 10% (its on-CPU part)",
               (1 - TASKSTATS_THRASHING_UNDER.rel) * stats["thrashing_delay_total"],
               thrash["ns"])
    t.check_eq("no other memstall charged to the reader", 0, cause(mine, "other")["ns"])
    # --stacks, printed while the hot reader still lives (its user frames are symbolized
    # through its /proc/PID/maps and its binary's symbols; built with frame pointers, its
    # loop over the mapping inlined into main at -O2). The stacks printed are the top three
    # per cause: their time is at most the table's.
    stacks = [j for j in tool.result.json_lines() if "stacks" in j]
    t.require(len(stacks) == 1, "--stacks: one JSON line of stacks", "1", len(stacks))
    for name, kernel_frame, user_frame in (("thrash", "folio_wait_bit_common", "[file_reader]"),
                                           ("memcg", "try_charge_memcg", "[file_reader]")):
        top = [s for s in stacks[0]["stacks"] if s["cause"] == name]
        t.require(bool(top), f"--stacks: a {name} stack", ">= 1", len(top))
        t.check_eq(f"--stacks: the top {name} stack is the hot reader's", pid, top[0]["pid"])
        t.check(any(f.startswith(kernel_frame + "+") for f in top[0]["kernel_stack"]),
                f"--stacks: the top {name} stack's kernel frames include {kernel_frame}",
                kernel_frame, top[0]["kernel_stack"][:8])
        t.check(any(f.startswith("main+") and f.endswith(user_frame)
                    for f in top[0]["user_stack"]),
                f"--stacks: the top {name} stack's user frames include main {user_frame}",
                f"main+... {user_frame}", top[0]["user_stack"][:4])
        t.check_le(f"--stacks: {name} time in stacks <= the table's",
                   cause(mine, name)["ns"], sum(s["ns"] for s in stacks[0]["stacks"]
                                                if s["cause"] == name and s["pid"] == pid))
    # sched_switch reads the tasks' bits, directly through tp_btf where it can; the windows
    # read no argument and take raw_tp first on every kernel (cheaper to load).
    for probe, hook in (("sched:sched_switch", HOOK_VARIANTS[variant][1]),
                        ("vmscan:mm_vmscan_memcg_reclaim_begin", "raw_tp")):
        # sched_switch's first choices carry the family of their stack walk (stack_loop/).
        t.check(re.search(re.escape(probe) + r"\S*: using (stack_loop/|window/)?" + hook,
                          tool.result.stderr),
                f"-v: {probe} uses {hook}", hook, "see stderr")
    if variant in SWITCH_PROGRAM:
        t.check_in(f"-v: sched_switch uses {SWITCH_PROGRAM[variant]}",
                   f"({SWITCH_PROGRAM[variant]})", tool.result.stderr, "stderr")


# As user nobody (--unprivileged) the kernel's functions are told by name (kallsyms hides
# their addresses), and the kernel frames of -s named by the kernel too: the same checks.
for _variant in HOOK_VARIANTS:
    scenario("memstall_thrashing_vs_taskstats" + _variant, unprivileged=not _variant)(
        lambda t, v=_variant: thrashing_vs_taskstats(t, v))


def pause_bounds_ns(trace: dict, pid: int) -> list[tuple[int, int]]:
    """Per balance_dirty_pages pause of `pid` (a positive pause), the time from the tracepoint
    to the first time the task runs again after it gave up the CPU other than by preemption
    (prev_state "R+"; a task whose timer fired before schedule() dequeued it leaves with "R",
    and its pause ends when it runs again all the same), from the ftrace instance's events,
    in ns (the trace prints us): (lower, upper). Both are that time when the trace has the
    switch-in (next_pid == pid). This kernel's trace sometimes lacks it (seen when the task is
    switched in from the idle task); then the pause lies between the switch-out and the task's
    next event of its own (a switch-out or a balance_dirty_pages, which only a running task
    records)."""
    events = sorted([(float(e["_ts"]), "pause", e) for e in trace["balance_dirty_pages"]] +
                    [(float(e["_ts"]), "switch", e) for e in trace["sched_switch"]],
                    key=lambda x: x[0])
    out = []
    for i, (ts, kind, e) in enumerate(events):
        if kind != "pause" or int(e["pause"]) <= 0:
            continue
        asleep_at = None
        for ts2, kind2, e2 in events[i + 1:]:
            if kind2 == "switch" and asleep_at is None:
                if int(e2["prev_pid"]) == pid and e2["prev_state"] != "R+":
                    asleep_at = ts2
                continue
            if asleep_at is None:
                continue
            if kind2 == "switch" and int(e2["next_pid"]) == pid:
                out.append((round((ts2 - ts) * 1e9),) * 2)
                break
            if kind2 == "pause" or int(e2["prev_pid"]) == pid:
                out.append((round((asleep_at - ts) * 1e9), round((ts2 - ts) * 1e9)))
                break
    return out


@scenario("memstall_dirty_vs_ftrace")
def _(t: Test):
    """A writer past a small dirty limit (vm.dirty_bytes 4 MiB for the test, restored):
    balance_dirty_pages makes it pause. memstall's DIRTY against an ftrace instance of the
    writer's balance_dirty_pages events with a positive pause and its context switches: each
    pause lasts from the tracepoint until the writer runs again after its sleep."""
    with low_dirty_limits(1 << 20, 4 << 20), \
            TestFile(1 << 20, "memstall_dirty") as f, \
            Workload("cache_writer", "--file", f.path, "--mib", "256", held=True) as writer:
        switch_filter = f"prev_pid == {writer.pid} || next_pid == {writer.pid}"
        with FtraceOracle(["writeback/balance_dirty_pages", "sched/sched_switch"], writer.pid,
                          filters={"sched/sched_switch": switch_filter},
                          clock="mono") as oracle, \
                Tool("memstall", "-j", "-p", str(writer.pid)) as tool:
            writer.release()
            writer.wait_done(90)
            time.sleep(0.3)
            trace = oracle.stop()
    pauses = [int(e["pause"]) for e in trace["balance_dirty_pages"] if int(e["pause"]) > 0]
    bounds = pause_bounds_ns(trace, writer.pid)
    exact = sum(1 for low, high in bounds if low == high)
    log(f"ftrace: {len(trace['balance_dirty_pages'])} balance_dirty_pages events, "
        f"{len(pauses)} pauses of {sum(pauses)} ms planned; {exact} with the switch-in traced")
    if not pauses:
        skip("the writer was never paused (the disk kept up with the 4 MiB dirty limit)")
    mine = row_of(last_rows(t, tool), writer.pid)
    dirty = cause(mine, "dirty")
    log(f"memstall's causes of the writer: {mine['causes']}")
    t.check_eq("dirty stalls vs the ftrace pauses (exact)", len(pauses), dirty["stalls"])
    t.check_eq("pauses the oracle saw end", len(pauses), len(bounds))
    # The trace lacks the writer's switch-in for most pauses (1-7 of 26-29 in runs alone, 3 of
    # 12 in a CI run, 2 of 55 with a VM test beside it; cause not understood, see
    # pause_bounds_ns): those are bracketed by the switch-out and the writer's next event of
    # its own, a wide but true bracket (logged below). The exact count above is the strong
    # check here; the VM scenario (check_memstall.py) compares the times more closely.
    # The trace prints microseconds (each pause +/- 1 us at both ends), and the two tracers
    # record the same events a little apart (see check_latencies in memlat_test.py).
    tol = 5000 * len(bounds)
    low, high = sum(b[0] for b in bounds), sum(b[1] for b in bounds)
    log(f"the oracle's bracket of the total: {low} .. {high} ns; memstall: {dirty['ns']} ns")
    t.check_ge("dirty time >= the oracle's lower bound", low - tol, dirty["ns"])
    t.check_le("dirty time <= the oracle's upper bound", high + tol, dirty["ns"])


# The classic tracepoint of each probe that has one: every probe but sched_switch.
CLASSIC_ONLY = {"MEMLAT_DISABLE_HOOKS": "window/tp_btf,window/raw_tp,dirty/tp_btf,dirty/raw_tp,"
                                        "exit/raw_tp"}


@scenario("memstall_perf_sees_tracepoints")
def _(t: Test):
    """perf stat beside memstall's classic tracepoint programs (forced for every probe that
    has one): a reader under its memory cgroup's limit (memcg reclaim windows), a writer past
    a small dirty limit (balance_dirty_pages), both exiting under the tool. perf, counting the
    two processes' events, must count exactly what an ftrace instance saw of them (both
    started before the processes were released and stopped after they exited); a program
    that returns 0 drops the event for perf (memstall's did: perf counted 0 of 45 memcg
    reclaim windows and 0 of 18 pauses, issue 29)."""
    events = {"vmscan/mm_vmscan_memcg_reclaim_begin": "vmscan:mm_vmscan_memcg_reclaim_begin",
              "vmscan/mm_vmscan_memcg_reclaim_end": "vmscan:mm_vmscan_memcg_reclaim_end",
              "writeback/balance_dirty_pages": "writeback:balance_dirty_pages",
              "sched/sched_process_exit": "sched:sched_process_exit"}
    with low_dirty_limits(1 << 20, 4 << 20), MemoryCgroup("memstall_perf", LIMIT) as cg, \
            TestFile(FILE_SIZE, "memstall_perf", cold=True) as f, \
            TestFile(1 << 20, "memstall_perf_dirty") as out, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, held=True) as reader, \
            Workload("cache_writer", "--file", out.path, "--mib", "64", held=True) as writer:
        both = f"common_pid == {reader.pid} || common_pid == {writer.pid}"
        with PerfStat(list(events.values()), filter=both) as perf:
            with FtraceOracle(list(events), reader.pid,
                              filters={e: both for e in events}) as oracle, \
                    Tool("memstall", "-v", "-j", env=CLASSIC_ONLY) as tool:
                reader.release()
                writer.release()
                reader.wait_done(60)
                writer.wait_done(90)
                reader.proc.wait(10)
                writer.proc.wait(10)
                time.sleep(0.3)
                trace = oracle.stop()
    res = tool.result
    t.check_eq("exit status", 0, res.rc)
    for probe in ("vmscan:mm_vmscan_memcg_reclaim_begin", "writeback:balance_dirty_pages",
                  "sched:sched_process_exit"):
        t.check(re.search(re.escape(probe) + r"\S*: using (\w+/)?tracepoint", res.stderr),
                f"-v: {probe} uses its classic tracepoint", "tracepoint", "see stderr")
    t.check_ge("ftrace: memcg reclaim windows of the reader", 10,
               len(trace["mm_vmscan_memcg_reclaim_end"]))
    t.check_eq("ftrace: the two processes' exits", 2, len(trace["sched_process_exit"]))
    for ftrace_name, perf_name in events.items():
        name = ftrace_name.split("/")[1]
        t.check_eq(f"perf stat's count of {perf_name} vs ftrace's, of the two processes",
                   len(trace[name]), perf.counts[perf_name])


@scenario("memstall_interval_text")
def _(t: Test):
    """`memstall 1 2`: two interval tables, top style, with the columns -h documents."""
    with Tool("memstall", "1", "2", wait_exit=True) as tool:
        pass
    res = tool.result
    t.check_eq("exit status", 0, res.rc)
    headers = [l for l in res.stdout.splitlines() if l.startswith("PID")]
    t.check_eq("interval tables", 2, len(headers))
    t.check_eq("columns", ["PID", "COMM", "STALL%", "TOTAL(ms)", "DIRECT", "MEMCG", "COMPACT",
                           "DIRTY", "SWAPIN", "HIGH", "THRASH", "OTHER", "COMMAND"],
               headers[0].split() if headers else [])
    t.check_in("interval line", "memory stalls over 1.0 s", res.stdout)


@scenario("memstall_bad_input")
def _(t: Test):
    cases = shared_bad_arguments(tid=True, cgroup=True) + [
        (["-r", "0"], "-r takes a number of rows of at least 1"),
        (["0"], "interval"),
        (["-s", "--prometheus", "127.0.0.1:0"], "-s, -C, --folded"),
        (["--pprof", "/nonexistent/dir/p.pb.gz"],
         "--pprof /nonexistent/dir/p.pb.gz: cannot write there: No such file or directory"),
        (["-f", "/tmp"], "--folded-file /tmp: cannot write there: Is a directory"),
        (["--folded", "-j"], "--folded prints the folded stacks alone"),
        (["--folded", "1"], "--folded prints the folded stacks alone"),
        (["--folded-counts"], "--folded-counts goes with --folded or --folded-file"),
        (["--profiles"], "--profiles serves /debug/pprof/memstall beside the metrics"),
        (["--prometheus-labels", "cgroup"], "--prometheus"),
    ]
    check_bad_arguments(t, "memstall", cases)
    check_refused_unprivileged(t, "memstall", "needs root, or the capabilities CAP_BPF and "
                               "CAP_PERFMON")
    check_help(t, "memstall", (
        "--pid", "--tid", "--cgroup", "--cgroups", "--rows", "--stacks", "--timestamp",
        "--duration",        "--json", "--verbose", "interval", "DIRECT", "MEMCG", "COMPACT", "DIRTY", "SWAPIN",
        "HIGH", "THRASH", "OTHER", "STALL%", "CAP_SYSLOG", "--prometheus",
        "--prometheus-labels", "--folded", "--folded-file", "--folded-counts", "--pprof",
        "--profiles"), width=None)


if __name__ == "__main__":
    sys.exit(main())
