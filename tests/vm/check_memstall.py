"""Host checks of memstall's VM scenarios (tests/vm/scenarios/memstall.sh)."""
from __future__ import annotations

import re

from memlat_test import Result, Skip, Test, log
from tolerances import FTRACE_SLEEP_TIME
from vmcheck import (Block, allowed_skip, check_hook, checker, oracle_trace, required,
                     stopped_tool)


# memory.high throttling runs on every kernel of the matrix, with PSI or without (the throttle
# is told by its functions either way): a skip there fails the kernel's run, but that of a hook
# path the boot does not run (vmcheck.BOOT_SKIPS). The other scenarios may find nothing to
# measure (a writer never paused, no thrashing, no direct compaction) and say so.
required("memstall.high", lambda facts: True)
# The skips that do not fail a kernel's run (every other one does: vmcheck.allowed_skip()).
allowed_skip("memstall.swapin", "the kernel has no swap (CONFIG_SWAP off",
             "a kernel without swap has no swap-in to measure")
allowed_skip("memstall.compact", "the fragmenter's ",
             "every attempt found its zones deferred or unsuitable and compacted none: delay "
             "accounting counts the attempts, no mm_compaction window exists to hold memstall to "
             "(a CI run on 6.1 had only such attempts)")


def _some_total_us(text: str) -> int:
    m = re.search(r"^some .*total=(\d+)", text, re.M)
    return int(m.group(1)) if m else -1


def _pressure_delta_us(b: Block) -> int:
    """How far the cgroup's memory.pressure "some" total moved over the scenario; -1 without
    PSI (the guest then sends no pressure files)."""
    if "pressure.before" not in b.files or "pressure.after" not in b.files:
        return -1
    return _some_total_us(b.file("pressure.after")) - _some_total_us(b.file("pressure.before"))


def guest_time_tolerance_ns(total_ns: float, events: int) -> float:
    """How far memstall's total time of `events` may be from ftrace's in these guests. Both
    read the clock at each event, one after the other; qemu's TCG runs both vCPUs on one host
    thread and may switch between them anywhere, also between the two reads, and a read of the
    guest's clock (the HPET: TSC marked unstable) takes tens of microseconds. Measured per
    event on average: direct reclaim 74-238 us (5.10: 1.5% in all), compaction up to 407 us
    (6.1, 18 windows), dirty pauses 120 us (7.3, 88 pauses) and 1.1 ms (6.1, 2 pauses, before
    memstall read the clock first). So 5%, 2 ms and 300 us an event; the host's scenarios hold
    3-5 us an event."""
    return 0.05 * total_ns + 2e6 + 300e3 * events


_WINDOW_EVENT = re.compile(r" (\d+\.\d+): mm_\w+_(begin|end):")


def _windows_ns(t: Test, b: Block) -> list[int]:
    """The workload's begin/end windows in the guest's ftrace instance (the "windows" file),
    in ns (the trace prints microseconds): each end with the begin before it."""
    out, begin = [], None
    for m in _WINDOW_EVENT.finditer(oracle_trace(t, b, "windows")):
        if m.group(2) == "begin":
            begin = float(m.group(1))
        elif begin is not None:
            out.append(round((float(m.group(1)) - begin) * 1e9))
            begin = None
    return out


def _check_windows(t: Test, what: str, windows: list[int], got: dict) -> None:
    """memstall's count and time of a cause against the workload's windows in ftrace: the same
    tracepoints, each window on both sides. The count is exact; the time within
    guest_time_tolerance_ns()."""
    log(f"  ftrace: {len(windows)} {what} windows of the workload, {sum(windows) / 1e6:.1f} ms")
    t.check_eq(f"{what} stalls vs the ftrace windows (exact)", len(windows), got["stalls"])
    # Once a run: the first window can hold qemu's translation of memstall's programs, which
    # TCG does when they first run, between ftrace's clock read and memstall's (7.3 in a CI
    # simulation: a first window of 7.43 ms, the others 0.17-0.39 ms, memstall's longest stall
    # 0.86 ms and delay accounting's total 2.2 ms against memstall's 3.4). Allowed: what the
    # first window has over the longest of the others, at most 10 ms, and below only:
    # memstall's time is never allowed above ftrace's by more than the tolerance.
    first_excess = (min(10e6, max(0, windows[0] - max(windows[1:])))
                    if len(windows) > 1 else 0)
    tol = guest_time_tolerance_ns(sum(windows), len(windows))
    t.check_ge(f"{what} time vs the ftrace windows, less the first window's translation",
               sum(windows) - first_excess - tol, got["ns"],
               f"{tol / 1e6:.2f} ms, first window {first_excess / 1e6:.2f} ms over the others")
    t.check_le(f"{what} time vs the ftrace windows", sum(windows) + tol, got["ns"],
               f"{tol / 1e6:.2f} ms")


def _events_high(text: str) -> int:
    m = re.search(r"^high (\d+)", text, re.M)
    return int(m.group(1)) if m else -1


def _clock_rate(b: Block) -> float | None:
    """How fast the scheduler's cpu_clock (PSI's clock) ran against CLOCK_MONOTONIC (ktime,
    memstall's) between the two snapshots of the scenario: 1.0 when they agree."""
    def clocks(label: str) -> dict[str, float]:
        return {k: float(v) for k, v in
                re.findall(r"^(ktime|cpu_clk)\s*:\s*([\d.]+)", b.files.get(label, ""), re.M)}
    before, after = clocks("clocks.before"), clocks("clocks.after")
    if len(before) != 2 or len(after) != 2 or after["ktime"] <= before["ktime"]:
        return None
    return (after["cpu_clk"] - before["cpu_clk"]) / (after["ktime"] - before["ktime"])


def _table(t: Test, res: Result) -> dict:
    """memstall -j's table: one JSON line, printed at the end (no interval given)."""
    lines = [j for j in res.json_lines() if "processes" in j]
    t.require(len(lines) == 1, "one JSON line at the end", "1", len(lines))
    return lines[0]


def _check_switch_hook(t: Test, b: Block, res: Result) -> None:
    """The hook of sched_switch, whose programs time the off-CPU stalls: the variant's.
    stack_loop/: the first choices of each kind, where the kernel has bpf_loop() (5.17)."""
    check_hook(t, res.stderr, "sched:sched_switch", b.variant, "stack_loop")


@checker("memstall.high")
def high(t: Test, b: Block) -> None:
    res = stopped_tool(t, b, "memstall")
    pid = int(b.meta["toucher_pid"])
    t.check_eq("anon_toucher exit status", 0, b.tool("toucher").rc)
    _check_switch_hook(t, b, res)
    t.check_in("-v: memory.high sleeps are told apart", "high:    off-CPU time", res.stderr,
               "stderr")
    table = _table(t, res)
    rows = [r for r in table["processes"] if r["pid"] == pid]
    t.require(len(rows) == 1, "a row for the toucher", "1", len(rows))
    causes = rows[0]["causes"]
    high_events = _events_high(b.file("events.after")) - _events_high(b.file("events.before"))
    t.check_ge("memory.events high moved", 1, high_events)
    high = causes.get("high", {"stalls": 0, "ns": 0})
    high_ns = high["ns"]
    t.check_ge("memory.high stalls counted", 1, high["stalls"])
    # Each throttle is one sleep (schedule_timeout_killable(), a D sleep in the trace): the
    # toucher's D sleeps in an ftrace instance of its switches. With PSI memstall also counts
    # the toucher's preemptions inside the throttle (a memstall), as PSI does.
    trace = oracle_trace(t, b)
    sleeps = _uninterruptible_sleeps(trace, pid)
    preempted, _ = _preemptions(trace, pid)
    slept_ns = sum(i - o for o, _, i in sleeps) * 1e9
    psi = b.meta.get("psi") == "on"
    log(f"  toucher pid {pid}: memstall {causes}; memory.events high +{high_events}; ftrace: "
        f"{len(sleeps)} D sleeps, {slept_ns / 1e6:.1f} ms, {preempted} preemptions; PSI "
        f"{'on' if psi else 'off'}")
    # Not every D sleep is a throttle's (7.3 without PSI: 12 D sleeps, 9 throttles), but each
    # throttle sleeps its penalty, tens of ms to 2 s (here 0.5 s on average); the toucher,
    # without swap or file I/O, has no other long D sleep.
    long_sleeps = sum(1 for o, _, i in sleeps if i - o >= 0.02)
    t.check_ge("memory.high stalls >= the toucher's D sleeps of 20 ms or more", long_sleeps,
               high["stalls"])
    t.check_le("memory.high stalls <= its D sleeps" + (" + its preemptions" if psi else ""),
               len(sleeps) + (preempted if psi else 0), high["stalls"])
    # The throttle's sleeps are seconds long (up to 1.3 s each): 99.5% of the D sleeps' time
    # without PSI and 99.8% with it on 7.3 (the one D sleep more is not a throttle's, and
    # short). 5% either way; with PSI the preemptions inside the throttle add a little.
    t.check_ge("memory.high time >= 95% of ftrace's D sleeps", 0.95 * slept_ns, high_ns)
    t.check_le("memory.high time <= 105% of ftrace's D sleeps", 1.05 * slept_ns, high_ns)
    # -G (the cgroup) and -C (per cgroup) on cgroup v2, the toucher the cgroup's only task:
    # the same stalls as -p's, timed by other instances of the programs at the same switches
    # (a few us apart a stall, of seconds).
    cg_name = b.meta.get("cgroup", "").rstrip("/").rsplit("/", 1)[-1]
    for label, key in (("by_cgroup", "processes"), ("per_cgroup", "cgroups")):
        other = b.tool(label)
        t.check_eq(f"memstall {' '.join(other.argv[1:])}: exit status", 0, other.rc)
        found = [j for j in other.json_lines() if key in j]
        t.require(len(found) == 1, f"{label}: one JSON line at the end", "1", len(found))
        mine = [r for r in found[0][key] if (r.get("pid") == pid if key == "processes" else
                                             r.get("cgroup", "").rstrip("/").endswith(cg_name))]
        t.require(len(mine) == 1, f"{label}: a row for the toucher's cgroup", "1", len(mine))
        log(f"  {label}: {mine[0]['stall_ns']} ns, {mine[0]['causes']}")
        t.check_close(f"{label}: the cgroup's stall time vs -p's", rows[0]["stall_ns"],
                      mine[0]["stall_ns"], rel_tol=0.01)
        # With PSI the preemptions inside the throttle are stalls too, and the instances see
        # them differently (we think: 7.3 preempts a task inside a BPF program, stacks through
        # preempt_schedule_thunk from bpf_get_stackid, so a preemption can fall inside one
        # instance's reclaim window and outside another's; 7.3: -p 12 and 13, -G and -C 11;
        # a CI run: -p 9, -G 11, -C 12, with 84 preemptions). Each instance is then held to
        # -p's bounds from ftrace; without PSI the counts are equal.
        other_high = mine[0]["causes"].get("high", {}).get("stalls", 0)
        if psi:
            t.check_ge(f"{label}: memory.high stalls >= the D sleeps of 20 ms or more",
                       long_sleeps, other_high)
            t.check_le(f"{label}: memory.high stalls <= its D sleeps + its preemptions",
                       len(sleeps) + preempted, other_high)
        else:
            t.check_eq(f"{label}: its memory.high stalls vs -p's", high["stalls"], other_high)
    _check_folded(t, b)
    _check_top(t, b, pid, high, long_sleeps, len(sleeps), preempted, psi)
    if not psi:
        # Without PSI no other memstall is seen, and the JSON says so.
        unmeasured = table.get("unmeasured_causes", {})
        t.check("other" in unmeasured and "high" not in unmeasured,
                "-j: unmeasured_causes has other, not high", "other, not high",
                sorted(unmeasured))
        return
    psi_us = _pressure_delta_us(b)
    log(f"  memory.pressure some +{psi_us} us")
    # A memstall sleep outside memory.high's (a refault, a reclaim sleep) is a stall PSI
    # counts too; one was 244 us of ~5 s once on 7.3. What this scenario makes is HIGH.
    t.check_le("what is counted as other (<= 1% of the total)", 0.01 * rows[0]["stall_ns"],
               causes.get("other", {}).get("ns", 0))
    # The cgroup's only task, kept on one CPU: PSI's "some" time is its memstall time, on
    # the CPU and off it. PSI's total of a cgroup is not a sum over CPUs: each sample averages
    # the CPUs' stall times weighted by their non-idle time (collect_percpu_times()), so a
    # task that stalls on one CPU and then runs on the other reads less than its wall time
    # stalled: most likely the 122% once seen on 6.12, when the scenario did not pin the
    # toucher (not reproduced since). On one CPU the weight cancels. memstall counts the sleeps and the reclaim
    # windows, not the on-CPU rest of the stall (a few ms): 99.7-99.9% of PSI's in 8 unpinned
    # runs on 5.10 and 7.3; 3% either way is the tolerance.
    total_ns = rows[0]["stall_ns"]
    rate = _clock_rate(b)
    log(f"  cpu_clock (PSI's clock) ran at {rate} of CLOCK_MONOTONIC's rate (memstall's)")
    t.check_close("memstall's total (sum over causes) vs the cgroup's PSI some total",
                  psi_us * 1000, total_ns, 0.03)
    t.check_ge("the memory.high sleeps are most of it", 0.5 * total_ns, high_ns)


def _check_folded(t: Test, b: Block) -> None:
    """-G's --folded-file (taken at each throttled task's switch-out): per cause (the root
    frame) exactly the time of the same run's table, and the memory.high time under the
    throttle's kernel function."""
    table = [j for j in b.tool("by_cgroup").json_lines() if "processes" in j][-1]["processes"]
    table_ns: dict[str, int] = {}
    for row in table:
        for name, c in row["causes"].items():
            if c["ns"]:
                table_ns[name] = table_ns.get(name, 0) + c["ns"]
    folded_ns: dict[str, int] = {}
    high_ns = under_throttle_ns = 0
    lines = b.file("folded").splitlines()
    t.require(all(re.fullmatch(r"\S.* \d+", line) for line in lines),
              "--folded-file: every line is 'frames value'", "all", lines[:2])
    for line in lines:
        stack, value = line.rsplit(" ", 1)
        frames = stack.split(";")
        folded_ns[frames[0]] = folded_ns.get(frames[0], 0) + int(value)
        if frames[0] == "high":
            high_ns += int(value)
            if any("mem_cgroup_handle_over_high" in f for f in frames):
                under_throttle_ns += int(value)
    t.check_eq("--folded-file: ns per cause = the table's of the same run (exact)", table_ns,
               folded_ns)
    # The throttle sleeps in (__)mem_cgroup_handle_over_high; a stack the kernel's table could
    # not keep has no frames, hence 95%.
    t.check_ge("--folded-file: memory.high time under mem_cgroup_handle_over_high (>= 95%)",
               0.95 * high_ns, under_throttle_ns)


def _check_top(t: Test, b: Block, pid: int, high: dict, long_sleeps: int, sleeps: int,
               preempted: int, psi: bool) -> None:
    """`memlat top -j -a 1`, watching the memory.high scenario, on cgroup v2: the cgroup's
    rows over its intervals against the oracles memstall's -G and -C are held to, and its
    cgroup-v2 columns (the limit from memory.high, PSI%, high events)."""
    res = b.tool("top")
    t.check_eq("memlat top -j -a 1: exit status after SIGINT", 0, res.rc)
    lines = [j for j in res.json_lines() if "cgroups" in j]
    t.require(len(lines) >= 1, "memlat top: intervals printed", ">= 1", len(lines))
    cg_name = b.meta.get("cgroup", "").rstrip("/").rsplit("/", 1)[-1]
    rows = [r for j in lines for r in j["cgroups"] if r["cgroup"].rstrip("/").endswith(cg_name)]
    t.require(len(rows) == len(lines), "memlat top: a row for the cgroup in every interval (-a)",
              len(lines), len(rows))
    top_high = sum(r["causes"].get("high", {}).get("stalls", 0) for r in rows)
    top_ns = sum(r["stall_ns"] for r in rows)
    top_psi = [r["psi_some_us"] for r in rows]
    log(f"  memlat top: {len(lines)} intervals, the cgroup's high stalls {top_high}, stall "
        f"{top_ns} ns, PSI% per interval (us) {top_psi}, last row {rows[-1]}")
    # The limit the scenario wrote: memory.high 16 MiB under memory.max "max".
    t.check_eq("memlat top: the cgroup's memory.high (the scenario's 16 MiB)", 16 << 20,
               rows[-1]["high_bytes"])
    t.check_eq("memlat top: the cgroup's memory.max (none)", None, rows[-1]["max_bytes"])
    # top reads memory.events itself: this checks what it counts from, its start (the
    # toucher was held until every tool was ready, and ended before top stopped).
    high_events = _events_high(b.file("events.after")) - _events_high(b.file("events.before"))
    t.check_eq("memlat top: high events since start vs memory.events high over the scenario",
               high_events, rows[-1]["events_since_start"].get("high"))
    # The same stalls as memstall -p's (another instance of the programs): held to -p's
    # bounds from ftrace with PSI (preemptions inside the throttle), equal without.
    if psi:
        t.check_ge("memlat top: memory.high stalls >= the D sleeps of 20 ms or more",
                   long_sleeps, top_high)
        t.check_le("memlat top: memory.high stalls <= its D sleeps + its preemptions",
                   sleeps + preempted, top_high)
    else:
        t.check_eq("memlat top: its memory.high stalls vs memstall -p's", high["stalls"],
                   top_high)
        t.check_eq("memlat top: PSI% without PSI (null in every interval)",
                   [None] * len(rows), top_psi)
        return
    psi_us = _pressure_delta_us(b)
    # As memstall's total above: the cgroup's one task on one CPU, 3% either way.
    t.check_close("memlat top: the cgroup's stall time over its intervals vs PSI some",
                  psi_us * 1000, top_ns, 0.03)
    # Its PSI% column is memory.pressure read at each refresh: the intervals, back to back,
    # cover top's run, which holds every stall of the toucher; the scenario's own reads are
    # just outside it. 1%: PSI's own per-CPU times are folded in at each read.
    t.check("memlat top: a PSI share in every interval (cgroup v2 with PSI)",
            None not in top_psi, "every interval", top_psi)
    t.check_close("memlat top: the sum of its PSI% intervals vs memory.pressure some",
                  psi_us, sum(p or 0 for p in top_psi), 0.01)


@checker("memstall.dirty")
def dirty(t: Test, b: Block) -> None:
    res = stopped_tool(t, b, "memstall")
    pid = int(b.meta["writer_pid"])
    t.check_eq("dd exit status", 0, b.tool("writer").rc)
    # raw_tp comes first (it reads no typed argument): the tp_btf variant disables raw_tp to
    # run the tp_btf programs (whose argument index differs before 5.18 too).
    check_hook(t, res.stderr, "writeback:balance_dirty_pages", b.variant, "dirty")
    trace = oracle_trace(t, b)
    pauses = [int(p) for p in re.findall(r" pause=(-?\d+)", trace) if int(p) > 0]
    table = _table(t, res)
    rows = [r for r in table["processes"] if r["pid"] == pid]
    dirty = rows[0]["causes"].get("dirty", {"stalls": 0, "ns": 0}) if rows else {"stalls": 0,
                                                                                  "ns": 0}
    log(f"  writer pid {pid}: ftrace {len(pauses)} pauses of {sum(pauses)} ms planned; "
        f"memstall {dirty}; switch-ins no sched_switch showed: "
        f"{table.get('unseen_switch_ins')}")
    rounds = b.meta.get("round", "1")
    log(f"  round {rounds} of at most 3 (a round is repeated while the writer is never paused)")
    if not pauses:
        # Writeback to a ram disk is a copy: in 2 of 14 runs the writer never got ahead.
        raise Skip(f"in {rounds} round(s) the writer was never paused (the ram disk's "
                   "writeback kept up)")
    # Exact on the host and mostly here, but on 7.3 memstall has missed whole pauses a few
    # times: 173 of 174, 34 of 35 and 182 of 185 (before a fix of unslept pauses), and 53 of
    # 55 in a run that also logged recursion_misses 0 and table_full 0, its time short by
    # 18.4 ms of the trace's 344.7 ms (two pauses' windows: missed whole, not merged). Cause
    # not found (an open defect, in the notes of issue 30's stop), so at most 4% (and two
    # pauses) short, never over.
    short = max(2, len(pauses) // 25)
    t.check(len(pauses) - short <= dirty["stalls"] <= len(pauses),
            "dirty stalls vs the ftrace pauses (at most 4% short: an open defect on 7.3)",
            f"{len(pauses)} (at most {short} short)", dirty["stalls"])
    # Each pause sleeps its jiffies (the trace prints ms) and then waits for the CPU: at
    # least the planned pauses less a jiffy each (HZ=250 in Debian's kernels: 4 ms).
    t.check_ge("dirty time >= the planned pauses less 4 ms each",
               (sum(pauses) - 4 * len(pauses)) * 1e6, dirty["ns"])
    # Both ways: each pause from its tracepoint to the writer's switch-in after its sleep, in
    # the trace's switches (a bracket where the trace lacks the switch-in: see
    # pause_bounds_ns, shared with the host's scenario), within guest_time_tolerance_ns().
    from test_memstall import pause_bounds_ns
    bounds = pause_bounds_ns(_trace_events(trace, ("balance_dirty_pages", "sched_switch")), pid)
    low, high = sum(x[0] for x in bounds), sum(x[1] for x in bounds)
    tol = guest_time_tolerance_ns(high, len(bounds))
    log(f"  the oracle's bracket of the total: {low} .. {high} ns ({len(bounds)} pauses, "
        f"{sum(1 for x in bounds if x[0] == x[1])} with the switch-in traced)")
    t.check_eq("pauses the oracle saw end", len(pauses), len(bounds))
    # A pause missed whole (the open defect the count above allows) takes its time with it:
    # the bound drops the `missed` longest pauses' lower bounds, as the count drops them
    # (a 7.3 run on 2026-12-07: 7 of 8 pauses, 45.3 ms of the bracket's 54.2 ms, one pause
    # of about 6.8 ms missed).
    missed = max(0, len(bounds) - dirty["stalls"])
    longest_missed = sum(sorted((x[0] for x in bounds), reverse=True)[:missed])
    t.check_ge(f"dirty time >= the oracle's lower bound, less the {missed} pause(s) missed",
               low - longest_missed - tol, dirty["ns"])
    t.check_le("dirty time <= the oracle's upper bound", high + tol, dirty["ns"])


def _trace_events(text: str, names: tuple[str, ...]) -> dict[str, list[dict[str, str]]]:
    """An ftrace text's events of `names`, as memlat_test.FtraceOracle.stop() gives them: their
    fields, with "_ts" their timestamp."""
    out: dict[str, list[dict[str, str]]] = {n: [] for n in names}
    line_re = re.compile(r" (\d+\.\d+): (" + "|".join(names) + r"): (.*)$")
    for line in text.splitlines():
        if m := line_re.search(line):
            fields = dict(re.findall(r"(\w+)=(\S+)", m.group(3)))
            fields["_ts"] = m.group(1)
            out[m.group(2)].append(fields)
    return out


def _vmstat(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+) (\d+)$", text, re.M)}


def _taskstats(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+) (\d+)$", text, re.M)}


_SWITCH = re.compile(r"\s(\d+\.\d+): sched_switch: .*prev_pid=(\d+) .*prev_state=(\S+) ==> "
                     r".*next_pid=(\d+) ")
_WAKEUP = re.compile(r"\s(\d+\.\d+): sched_wakeup: .*pid=(\d+) ")


def _preemptions(trace: str, pid: int) -> tuple[int, float]:
    """How often the task was switched out runnable (preempted, or yielding) in the trace, and
    for how long in all: from each such switch-out to its next switch-in, in nanoseconds."""
    count, waited_ns, out = 0, 0.0, None
    for line in trace.splitlines():
        if not (m := _SWITCH.search(line)):
            continue
        at, prev, state, nxt = float(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))
        if prev == pid:
            out = at if state.startswith("R") else None
            count += out is not None
        elif nxt == pid and out is not None:
            waited_ns += (at - out) * 1e9
            out = None
    return count, waited_ns


def _uninterruptible_sleeps(trace: str, pid: int) -> list[tuple[float, float | None, float]]:
    """The task's sleeps in D state in an ftrace of its switches and wake-ups: (switched out,
    woken or None, switched in), in seconds."""
    sleeps, out, woken = [], None, None
    for line in trace.splitlines():
        if m := _SWITCH.search(line):
            t, prev, state, nxt = float(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))
            if prev == pid:
                out, woken = (t if state.startswith("D") else None), None
            elif nxt == pid and out is not None:
                sleeps.append((out, woken, t))
                out = None
        elif (m := _WAKEUP.search(line)) and int(m.group(2)) == pid and woken is None:
            woken = float(m.group(1))
    return sleeps


def _stacked_switch_outs(trace: str, pid: int) -> list[tuple[str, float, float, list[str]]]:
    """The task's times off the CPU in an ftrace of its switches whose switch-outs carry a
    stacktrace trigger: (its state at the switch-out, switched out, switched in, the kernel
    frames of the switch-out), in seconds; a switch-out whose switch-in the trace does not
    hold is left out."""
    outs, out, frames, in_stack = [], None, [], False
    for line in trace.splitlines():
        if m := _SWITCH.search(line):
            in_stack = False
            at, prev, state, nxt = float(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))
            if prev == pid:
                out, frames = (state, at), []
            elif nxt == pid and out is not None:
                outs.append((out[0], out[1], at, frames))
                out = None
        elif "<stack trace>" in line:
            in_stack = out is not None and not frames
        elif in_stack and line.startswith(" => "):
            frames.append(line[4:].split("+")[0].strip())
        else:
            in_stack = False
    return outs


def _disk_scenario(t: Test, b: Block, who: str, done: str, cause: str, says: str
                   ) -> tuple[int, dict, dict[str, int], int, dict[str, int], dict]:
    """The common part of the scenarios on the guest's disk (swapin, thrash): the workload WHO
    (meta WHO_pid, its output LABEL WHO) read before and after by taskstats (stats.before,
    stats.after). Checks the disk, the workload's end (DONE in its stdout), memstall's exit,
    sched_switch's hook and that -v tells CAUSE apart (SAYS); returns (pid, memstall's
    result, the workload's taskstats delta and version, /proc/vmstat's before and after,
    memstall's row for it)."""
    res = stopped_tool(t, b, "memstall")
    pid = int(b.meta[f"{who}_pid"])
    t.require(b.meta.get("swapdisk") == "ok", "the disk (/dev/vda) was there", "ok",
              b.meta.get("swapdisk"))
    t.check_in(f"the {who} finished its work", done, b.tool(who).stdout, "its stdout")
    _check_switch_hook(t, b, res)
    t.check_in(f"-v: {cause} is told apart", says, res.stderr, "stderr")
    runs = [b.tool(label) for label in ("stats.before", "stats.after")]
    for run in runs:
        t.require(run.rc == 0, f"taskstats read the {who}'s delay accounting", "0",
                  f"{run.rc}: {run.stderr.strip()}")
    before, after = (_taskstats(run.stdout) for run in runs)
    stats = {k: after[k] - before[k] for k in after if k != "version"}
    vmstat = (_vmstat(b.file("vmstat.before")), _vmstat(b.file("vmstat.after")))
    rows = [r for r in _table(t, res)["processes"] if r["pid"] == pid]
    t.require(len(rows) == 1, f"a row for the {who}", "1", len(rows))
    return pid, res, stats, after["version"], vmstat, rows[0]


@checker("memstall.swapin")
def swapin(t: Test, b: Block) -> None:
    pid, res, stats, version, (vm_before, vm_after), row = _disk_scenario(
        t, b, "toucher", "iterations=2", "swap-in", "swapin:  off-CPU time")
    moved = {k: vm_after.get(k, 0) - vm_before.get(k, 0) for k in
             ("pswpin", "pswpout", "workingset_refault_anon", "workingset_restore_anon")}
    psi_us = _pressure_delta_us(b)
    trace = oracle_trace(t, b)
    sleeps = _uninterruptible_sleeps(trace, pid)
    slept_ns = sum(i - o for o, _, i in sleeps) * 1e9
    until_woken_ns = sum(w - o for o, w, _ in sleeps if w is not None) * 1e9
    causes = row["causes"]
    got = causes.get("swapin", {"stalls": 0, "ns": 0})
    log(f"  toucher pid {pid}: memstall {causes}")
    log(f"  taskstats over the second pass (version {version}): {stats}")
    log(f"  vmstat over it {moved}; memory.pressure some +{psi_us} us")
    log(f"  ftrace: {len(sleeps)} D sleeps, {slept_ns / 1e6:.1f} ms switched out, "
        f"{until_woken_ns / 1e6:.1f} ms until woken")
    t.check_ge("pages were swapped in (vmstat pswpin)", 1000, moved["pswpin"])
    # What delay accounting calls swap-in changed in 5.17, with the same release that added
    # the compaction delay to struct taskstats (version 11): before, the I/O sleeps of a
    # swap-in (do_swap_page with PF_SWAPIN set: all of them, as memstall counts); from then
    # on, the time in swap_read_folio (the read's submission, per page) and the sleep for the
    # page among the I/O sleeps (blkio). In this second pass the toucher does no other I/O.
    if "compact_count" in stats:
        oracle = {"what": "blkio (I/O sleeps)", "count": stats["blkio_count"],
                  "ns": stats["blkio_delay_total"]}
        log(f"  taskstats swapin counts pages read since 5.17: {stats['swapin_count']} "
            f"(vmstat pswpin {moved['pswpin']}), {stats['swapin_delay_total'] / 1e6:.1f} ms "
            f"submitting them")
    else:
        oracle = {"what": "swapin (I/O sleeps in do_swap_page)", "count": stats["swapin_count"],
                  "ns": stats["swapin_delay_total"]}
    log(f"  memstall swapin {got['stalls']} stalls, {got['ns'] / 1e6:.1f} ms; taskstats "
        f"{oracle['what']} {oracle['count']}, {oracle['ns'] / 1e6:.1f} ms")
    t.check_ge("swap-in stalls counted", 1, got["stalls"])
    # The same sleeps: every sleep of the toucher in this pass is a swap-in's, in D state in
    # ftrace's sched_switch (7.3: 128/128, 256/256; 6.1: 443/443). memstall also counts the
    # wait for the CPU of a task preempted inside a memstall (a workingset swap-in), as PSI
    # does: at most one per preemption the trace shows (5.10: 307 for 300 D sleeps).
    preempted, preempted_ns = _preemptions(trace, pid)
    log(f"  ftrace: the toucher was switched out runnable {preempted} times, "
        f"{preempted_ns / 1e6:.1f} ms until switched in")
    t.check_ge("swap-in stalls >= ftrace's D sleeps (less 1%)", 0.99 * len(sleeps) - 1,
               got["stalls"])
    t.check_le("swap-in stalls <= ftrace's D sleeps + its preemptions",
               len(sleeps) + preempted, got["stalls"])
    # Delay accounting counts the I/O sleeps (5.10: exactly ftrace's D sleeps, 67/67 and
    # 407/407, where memstall had 78 and 413 with the preemptions); a workingset swap-in may
    # also sleep in a memstall outside one (7.3: 245 of 256 D sleeps once).
    t.check_ge("swap-in stalls >= taskstats' I/O sleeps (less 5%)", 0.95 * oracle["count"] - 2,
               got["stalls"])
    # Above, only before 5.17: since then delay accounting counts the swap-in's sleeps in
    # io_schedule() (blkio) and no others, and a D sleep of the same swap-in outside one is
    # not among them (7.3 once: 519 D sleeps in ftrace, 519 stalls, 481 blkio). ftrace's
    # bound above holds on every kernel.
    if "compact_count" not in stats:
        t.check_le("swap-in stalls <= taskstats' I/O sleeps + ftrace's preemptions (+5%)",
                   1.05 * (oracle["count"] + preempted) + 2, got["stalls"])
    # The time: memstall times a sleep from the switch-out to the switch-in on
    # CLOCK_MONOTONIC, delay accounting to the wake-up, since 5.14 on local_clock(): each
    # CPU's own clock, which in this guest (TSC marked unstable) is not one clock across CPUs
    # (7.3 once: 36874 ms of blkio delay for 452 sleeps of 185 ms). Compared before that
    # (5.10: 0.94-1.32x); from 5.17 (the version split above) only logged. The upper bounds
    # add the toucher's runnable waits after a preemption, which memstall counts inside a
    # memstall as PSI does and neither delay accounting's swap-in time nor the D sleeps hold
    # (5.10 in a CI run: 25.9 ms against 11.5 ms of taskstats and 15.6 ms of D sleeps).
    if "compact_count" not in stats:
        t.check_ge("swap-in time >= taskstats' / 2", 0.5 * oracle["ns"], got["ns"])
        t.check_le("swap-in time <= 2 x taskstats' + ftrace's runnable waits",
                   2 * oracle["ns"] + preempted_ns, got["ns"])
    # ftrace (mono clock, memstall's) puts 7-27% more time into the same sleeps than memstall
    # on 6.1-7.3 (not understood: each side timestamps at the same tracepoint): only a bound.
    t.check_ge("swap-in time >= half of ftrace's D sleeps", 0.5 * slept_ns, got["ns"])
    t.check_le("swap-in time <= 1.5 x ftrace's D sleeps + its runnable waits",
               1.5 * slept_ns + preempted_ns, got["ns"])


# The functions a thrashing sleep is under: the wait for a workingset page (5.10:
# wait_on_page_bit_common) and the read-ahead of workingset pages, a memstall since 6.0.
_THRASH_FRAMES = {"folio_wait_bit_common", "wait_on_page_bit_common", "read_pages"}

# Workingset activations in one round that show the multi-gen LRU's refaults happened at the
# hot reader's scale (the runs that counted thrashing waits had 6,190-18,526; the rounds with
# reads throttled to 4 MiB/s, too slow to stay hot, 260-492).
_MGLRU_THRASHED = 1000


@checker("memstall.thrash")
def thrash(t: Test, b: Block) -> None:
    pid, res, stats, version, (vm_before, vm_after), row = _disk_scenario(
        t, b, "hot", "iterations=", "thrashing", "thrash:  off-CPU time")
    moved = {k: vm_after.get(k, 0) - vm_before.get(k, 0) for k in
             ("workingset_refault_file", "workingset_activate_file", "workingset_refault")}
    causes = row["causes"]
    got = causes.get("thrash", {"stalls": 0, "ns": 0})
    log(f"  hot reader pid {pid}: memstall {causes}")
    log(f"  taskstats over its reads (version {version}): {stats}")
    log(f"  vmstat over them {moved}; multi-gen LRU {b.meta.get('lru_gen')}")
    psi = b.meta.get("psi") == "on"
    psi_us = _pressure_delta_us(b)
    if psi:
        log(f"  memstall total {row['stall_ns'] / 1e6:.1f} ms; the hot cgroup's memory.pressure "
            f"some +{psi_us / 1e3:.1f} ms = {row['stall_ns'] / max(1, psi_us * 1e3):.3f}")
    for j in res.json_lines():
        for st in j.get("stacks", []):
            if st["pid"] == pid and st["cause"] in ("other", "thrash"):
                log(f"  stack {st['cause']} {st['ns'] / 1e6:.1f} ms: {st['kernel_stack'][:12]}")
    _thrash_waits(t, b, pid, got)
    rounds = b.meta.get("round", "1")
    log(f"  round {rounds} of at most 5 (a round is repeated while taskstats counts no "
        f"thrashing and the vmstat oracle below has too few activations)")
    activated = moved["workingset_activate_file"]
    multi_gen = b.meta.get("lru_gen", "none") not in ("none", "0x0000")
    waits_oracle = stats["thrashing_count"] > 0
    if not waits_oracle and not (psi and multi_gen and activated >= _MGLRU_THRASHED):
        raise Skip(f"in {rounds} round(s) the kernel counted no thrashing for the hot reader "
                   "(taskstats thrashing_count 0): its refaulting pages did not come back as "
                   "workingset")
    if not waits_oracle:
        # The multi-gen LRU refaulted the hot pages as workingset (vmstat), but delay
        # accounting counts a thrashing wait only when the task finds such a page still
        # being read, and the emulated disk mostly finished first: 0 waits in 3 rounds of a
        # 7.3 boot with 18,526 activations (memstall: 63 thrash stalls; others had 1 wait
        # with 6,190 and 7,425). PSI marks those refaults in read_pages() (6.0+), and
        # memstall counts them as thrash: then vmstat and PSI are the oracles, and the
        # checks against the waits, which would compare with 0, are not made.
        log(f"  delay accounting counted no thrashing wait in {rounds} round(s), vmstat "
            f"{activated} workingset activations: judged by vmstat and PSI")
        t.check_ge(f"thrash stalls while the hot pages came back as workingset ({activated} "
                   "activations)", 1, got["stalls"])
    else:
        _thrash_vs_waits(t, stats, got, psi)
        if not psi:
            lines = [j for j in res.json_lines() if "processes" in j]
            t.check_eq("-j: unmeasured_causes without PSI (delay accounting on)", ["other"],
                       sorted(lines[-1].get("unmeasured_causes", {})))
            return
    _thrash_vs_psi(t, b, row, causes, got, psi_us)


def _thrash_waits(t: Test, b: Block, pid: int, got: dict) -> None:
    """The hot reader's times off the CPU under a page wait or read_pages() in ftrace (its
    switches, each switch-out with its kernel stack), and the upper bounds they set on
    memstall's thrash stalls: its D sleeps there and its runnable waits after a preemption
    there, over the whole run and (logged) from the streamer's start on."""
    trace = oracle_trace(t, b)
    marker = re.search(r"\s(\d+\.\d+): tracing_mark_write: memlat: stream", trace)
    streamed = float(marker.group(1)) if marker else 0.0
    outs = _stacked_switch_outs(trace, pid)
    unstacked = sum(not frames for *_, frames in outs)
    waits: dict[str, list] = {}
    for state, out, back, frames in outs:
        kind = ("elsewhere" if not _THRASH_FRAMES & set(frames)
                else "sleeps" if state.startswith("D")
                else "preempted" if state.startswith("R") else "other")
        for key in (kind, f"{kind} after the stream began" if out >= streamed else None):
            if key:
                counted = waits.setdefault(key, [0, 0.0])
                counted[0] += 1
                counted[1] += (back - out) * 1e9
    log(f"  ftrace: {len(outs)} switch-outs ({unstacked} without a stack), under a page wait "
        "or read_pages() unless 'elsewhere': " +
        "; ".join(f"{k} {n} {ns / 1e6:.1f} ms" for k, (n, ns) in sorted(waits.items())))
    count = sum(waits.get(k, [0, 0.0])[0] for k in ("sleeps", "preempted"))
    oracle_ns = sum(waits.get(k, [0, 0.0])[1] for k in ("sleeps", "preempted"))
    log(f"  thrash: stalls {got['stalls']} of {count}, time {got['ns'] / 1e6:.1f} ms = "
        f"{got['ns'] / max(1.0, oracle_ns):.3f} of ftrace's")
    t.check_eq("every switch-out of the hot reader in ftrace has its kernel stack", 0, unstacked)
    t.check("the trace marks the streamer's start", marker is not None, "a marker",
            "none")
    # Every thrash stall memstall counts is one of these: a sleep in a memstall under the
    # page wait or read_pages(), or the runnable wait of a task preempted there. Not every
    # one of these is a memstall (a page not in the workingset, read in the same wait).
    t.check_le("thrash stalls <= ftrace's sleeps and preemptions under a page wait",
               count, got["stalls"])
    t.check_le(f"thrash time <= ftrace's time of those (+{FTRACE_SLEEP_TIME.allowed()})",
               (1 + FTRACE_SLEEP_TIME.rel) * oracle_ns, got["ns"])


def _thrash_vs_waits(t: Test, stats: dict[str, int], got: dict, psi: bool) -> None:
    """The thrash stalls against delay accounting's thrashing waits."""
    # Delay accounting counts each wait for a workingset page (in folio_wait_bit_common /
    # wait_on_page_bit_common), memstall each sleep there: a wait whose page is unlocked
    # before the task sleeps is delay accounting's only. On arm64 6.1 (emulated: its CPU is
    # slow against its disk, so more reads finish before the waiter sleeps) CI saw 329 of
    # 371, 280 of 322, 271 of 364 and once 177 of 280 (63%). memstall counts more, as PSI
    # does: sleeps and preemptions inside read_pages() while it reads workingset pages ahead
    # (PSI's memstall there; not delay accounting's), which the multi-gen LRU of 6.12 and 7.3
    # makes common (7.3: 13 against 3, 11 against 1; 5.10: 46/45, 30/24; 6.1: 106/102, 18/15;
    # 6.12: 16/10, 11/10). So 55%: below the 63% seen, and above half of any ratio up to
    # 1.1, so where the counts are near each other (5.10, 6.1, arm64) a memstall that counted
    # half of its thrash sleeps still fails.
    t.check_ge("thrash stalls >= 55% of taskstats thrashing_count (waits without a sleep)",
               0.55 * stats["thrashing_count"] - 2, got["stalls"])
    # Delay accounting times each of those waits on the CPU too, memstall the sleeps: in this
    # emulated guest the CPU part is large (io_schedule() first submits the plugged read to
    # the emulated disk, inside delay accounting's window, up to 2 ms a wait): 0.40-0.92 of
    # its time where the counts agreed within 4% (5.10, 6.1, 6.12; 6.12 once 12 stalls of 15
    # ms against 12 waits of 38 ms); the extra read_pages() stalls come on top (7.3:
    # 0.70-9.2x). Once, on 7.3 in CI (2026-11-29), 0.243: 11 stalls of 13.2 ms against 5 waits
    # of 54.1 ms, 10.8 ms a wait, most of it not asleep: the guest's two vCPUs share one host
    # thread (tcg,thread=single), so a wait's time on the CPU also holds the time the other
    # vCPU ran. Hence 15%, as far below that run as 25% was below 0.40: a memstall that did
    # not time the thrashing sleeps, or timed them short, still fails.
    ratio = got["ns"] / max(1, stats["thrashing_delay_total"])
    log(f"  thrash time {got['ns'] / 1e6:.1f} ms = {ratio:.3f} of taskstats' "
        f"{stats['thrashing_delay_total'] / 1e6:.1f} ms")
    t.check_ge("thrash time >= 15% of taskstats thrashing_delay_total",
               0.15 * stats["thrashing_delay_total"], got["ns"])
    if not psi:
        # Without PSI (psi=0) memstall counts the sleeps delay accounting marks
        # (task_struct->in_thrashing), each inside one of its waits, and not the read_pages()
        # memstalls: at most its count (a wait woken early sleeps again: 10%).
        t.check_le("without PSI: thrash stalls <= taskstats thrashing_count (+10%)",
                   1.1 * stats["thrashing_count"] + 2, got["stalls"])
        # The reader is pinned to one CPU, whose clock delay accounting reads (local_clock());
        # 10% for the two clocks' rates in this guest (see _clock_rate()).
        t.check_le("without PSI: thrash time <= taskstats thrashing_delay_total (+10%)",
                   1.1 * stats["thrashing_delay_total"], got["ns"])


def _thrash_vs_psi(t: Test, b: Block, row: dict, causes: dict, got: dict,
                   psi_us: float) -> None:
    """The reader's total against its cgroup's PSI, and what memstall called OTHER."""
    # PSI counts all of the reader's memory stall time, on the CPU or off it, in the
    # cgroup's "some" total (its only task, on one CPU: that CPU's clock, cpu_clock(), which
    # may run at another rate than memstall's CLOCK_MONOTONIC in this guest: scaled by the
    # rate measured over the scenario). memstall counts the reclaim windows (which PSI's
    # memstall encloses) and the sleeps in a memstall: never more than PSI. Far less here
    # (0.43-0.81 on 5.10-7.3): the guest runs the refault paths' code slowly, on the CPU.
    rate = _clock_rate(b) or 1.0
    psi_ns = psi_us * 1e3 / rate
    t.check_le("memstall's total for the reader <= its cgroup's PSI some total (+3%)",
               1.03 * psi_ns, row["stall_ns"])
    # OTHER: a task preempted inside memstall's own begin or end program of a reclaim
    # window (in a memstall, outside the window: 7.3's --stacks show memcg_reclaim_begin_btf reading
    # the guest's slow HPET clock, and memcg_reclaim_end_raw in bpf_get_stackid, which -s
    # calls once the window is closed) sleeps in no function memstall knows. Seen on 7.3
    # only. It comes per reclaim window, not per stall time, and the reader's total varies
    # 50-fold between runs (177 ms with 94 windows, 9.7 s with 4,756): 0.7-6.5% of the total
    # in long runs, 13.5% in that short one (24 ms). So at most a quarter of the total, and
    # at most one preemption in each window's begin and end program (+ the thrash stalls, in
    # whose readahead a task may be preempted as well).
    other = causes.get("other", {"stalls": 0, "ns": 0})
    t.check_le("what is counted as other (<= 25% of the reader's total)",
               0.25 * row["stall_ns"], other["ns"])
    t.check_le("other stalls <= 2 per memcg reclaim window + the thrash stalls",
               2 * causes.get("memcg", {}).get("stalls", 0) + got["stalls"], other["stalls"])


def _lingering_workload(t: Test, b: Block, label: str, done: str
                        ) -> tuple[int, dict[str, int], dict[str, int], dict]:
    """A scenario whose workload (LABEL, its pid in meta LABEL_pid) lingers after its work so
    that taskstats read it: its pid, its delay accounting, how /proc/vmstat moved, and its
    causes in memstall's last JSON line."""
    res = stopped_tool(t, b, "memstall")
    pid = int(b.meta[f"{label}_pid"])
    t.check_in(f"{label} finished its work", done, b.tool(label).stdout, "its stdout")
    stats_run = b.tool("stats")
    t.require(stats_run.rc == 0, f"taskstats read the {label}'s delay accounting", "0",
              f"{stats_run.rc}: {stats_run.stderr.strip()}")
    vm_before, vm_after = _vmstat(b.file("vmstat.before")), _vmstat(b.file("vmstat.after"))
    rows = [r for r in _table(t, res)["processes"] if r["pid"] == pid]
    return (pid, _taskstats(stats_run.stdout),
            {k: v - vm_before.get(k, 0) for k, v in vm_after.items()},
            rows[0]["causes"] if rows else {})


# Ten scheduler ticks at Debian's CONFIG_HZ=250 (every kernel of the matrix).
_TEN_TICKS_NS = 10 * 4_000_000


# A stock Debian host: booted with psi=0 and kernel.task_delayacct=0. Only the boot with psi=0
# runs it (vm.K.psi0), where it must run.
required("memstall.thrash_stock", lambda facts: "psi=0" in facts.get("cmdline", "").split())


@checker("memstall.thrash_stock")
def thrash_stock(t: Test, b: Block) -> None:
    """The thrashing workload where neither PSI nor delay accounting marks a memory stall:
    memstall cannot tell THRASH or OTHER, says so once at start and in the JSON, and counts
    nothing in their place. The oracle that thrashing happened is /proc/vmstat's workingset
    refaults over the reads, which need neither."""
    # The preconditions, from the guest's own files, before anything of the tool is checked.
    t.require(b.meta.get("psi") == "off", "the boot has no PSI (psi=0)", "off", b.meta.get("psi"))
    t.require(b.meta.get("delayacct") == "0", "delay accounting off (kernel.task_delayacct 0)",
              "0", b.meta.get("delayacct"))
    before, after = _vmstat(b.file("vmstat.before")), _vmstat(b.file("vmstat.after"))
    refaults = (after.get("workingset_refault_file", 0) + after.get("workingset_refault", 0)
                - before.get("workingset_refault_file", 0) - before.get("workingset_refault", 0))
    log(f"  workingset refaults over the reads: {refaults}")
    t.require(refaults >= 100, "the hot reader's pages came back as refaults (/proc/vmstat)",
              ">= 100", refaults)
    res = stopped_tool(t, b, "memstall")
    pid = int(b.meta["hot_pid"])
    said = [line for line in res.stderr.splitlines()
            if line.startswith("memstall: not measured on this host: ")]
    t.check_eq("stderr says once which causes are not measured", 1, len(said))
    for cause, why in (("thrash", "kernel.task_delayacct=1"), ("other", "PSI")):
        t.check_in(f"that line names {cause} and why", why,
                   said[0].split(f"{cause} (", 1)[-1] if said and f"{cause} (" in said[0] else "",
                   "the line")
    table = _table(t, res)
    t.check_eq("JSON unmeasured_causes", ["other", "thrash"],
               sorted((table.get("unmeasured_causes") or {}).keys()))
    rows = [r for r in table["processes"] if r["pid"] == pid]
    t.require(len(rows) == 1, "a row for the hot reader (-p)", "1", len(rows))
    causes = rows[0]["causes"]
    log(f"  hot reader pid {pid}: memstall {causes}")
    for cause in ("thrash", "other"):
        t.check_eq(f"{cause}: nothing counted where it is not measured", 0,
                   causes.get(cause, {"ns": 0})["ns"])
    t.check_eq("stall_ns is the sum of the causes measured",
               sum(c["ns"] for c in causes.values()), rows[0]["stall_ns"])


@checker("memstall.compact")
def compact(t: Test, b: Block) -> None:
    pid, stats, vmstat, causes = _lingering_workload(t, b, "frag", "thp_kb=")
    moved = {k: vmstat.get(k, 0) for k in
             ("compact_stall", "compact_fail", "compact_success", "thp_fault_alloc")}
    got = causes.get("compact", {"stalls": 0, "ns": 0})
    log(f"  fragmenter pid {pid}: memstall {causes}")
    log(f"  taskstats {stats}; vmstat {moved}")
    # Delay accounting has no compaction delay before 5.17 (taskstats version 10): there the
    # ftrace windows, which need no taskstats, are the oracle alone.
    has_taskstats = "compact_count" in stats
    if has_taskstats and stats["compact_count"] == 0:
        raise Skip("the fragmenter never compacted directly (taskstats compact_count 0)")
    windows = _windows_ns(t, b)
    # An attempt compacts no zone when every zone is deferred (after failures) or unsuitable
    # (too little free memory): delay accounting counts it, the tracepoints see nothing. A CI
    # run on 6.1 had only such attempts.
    if not windows and got["stalls"] == 0:
        attempts = f"{stats['compact_count']} " if has_taskstats else ""
        raise Skip(f"the fragmenter's {attempts}direct compaction attempts compacted no zone: "
                   "no mm_compaction_begin in ftrace")
    t.check_ge("compaction stalls counted", 1, got["stalls"])
    _check_windows(t, "compaction", windows, got)
    if not has_taskstats:
        log(f"  taskstats version {stats.get('version')} has no compaction delay (5.17): "
            f"memstall's {got['stalls']} compactions held to the ftrace windows only")
        return
    log(f"  memstall compact {got['stalls']} windows, {got['ns'] / 1e6:.1f} ms; taskstats "
        f"compact {stats['compact_count']}, {stats['compact_delay_total'] / 1e6:.1f} ms")
    # Delay accounting times each direct compaction attempt (__alloc_pages_direct_compact
    # around try_to_compact_pages), memstall the mm_compaction_begin/end windows inside it, one
    # per zone compacted (none for a zone deferred or not suitable): a count per attempt
    # against one per window (7.3: 78 attempts, 81 windows; 6.12: 7, 8; 6.1: 27, 31), and a
    # time inside delay accounting's: 80% on 7.3, 75% on 6.12, 44% on 6.1. The rest is the
    # zone checks before each window (compaction_suitable(), a restarted zone's pageblock
    # reset), and delay accounting's clock: local_clock(), each CPU's own, which in this guest
    # (TSC marked unstable) may be a tick apart from the other CPU's when the attempt ends on
    # another CPU than it began (not measured separately). Asserted: within [30%, 105%], the
    # lower bound only when every attempt compacted a zone (as many windows as attempts) and
    # delay accounting's total is at least 10 ticks (40 ms at Debian's HZ=250): the costs
    # outside the windows are per attempt, not in proportion (a CI run on 7.3 had 3.65 ms of
    # delay accounting against 0.82 ms of windows, a difference under one tick).
    t.check_le("compaction time <= taskstats' (+5%: the two clocks)",
               1.05 * stats["compact_delay_total"], got["ns"])
    if len(windows) < stats["compact_count"]:
        log(f"  not compared with 30% of taskstats' time: {len(windows)} windows for "
            f"{stats['compact_count']} attempts, some of which compacted no zone")
    elif stats["compact_delay_total"] < _TEN_TICKS_NS:
        log(f"  not compared with 30% of taskstats' time: "
            f"{stats['compact_delay_total'] / 1e6:.2f} ms is under 10 ticks, where the costs "
            "outside the windows and the clocks' tick can outweigh the windows")
    else:
        t.check_ge("compaction time >= 30% of taskstats'", 0.3 * stats["compact_delay_total"],
                   got["ns"])


@checker("memstall.direct")
def direct(t: Test, b: Block) -> None:
    pid, stats, vmstat, causes = _lingering_workload(t, b, "hog", "iterations=")
    stalls = sum(v for k, v in vmstat.items() if k.startswith("allocstall_"))
    got = causes.get("direct", {"stalls": 0, "ns": 0})
    log(f"  hog pid {pid}: memstall {causes}")
    log(f"  taskstats {stats}; vmstat allocstall_* +{stalls}")
    log(f"  memstall direct {got['stalls']} windows, {got['ns'] / 1e6:.1f} ms; taskstats "
        f"freepages {stats['freepages_count']}, {stats['freepages_delay_total'] / 1e6:.1f} ms")
    if stats["freepages_count"] == 0:
        raise Skip("the hog never reclaimed directly (taskstats freepages_count 0)")
    # Delay accounting times each direct reclaim episode inside do_try_to_free_pages(),
    # memstall the mm_vmscan_direct_reclaim_begin/end window of try_to_free_pages() around
    # it: one each (the hog runs on one CPU: delay accounting's per-CPU clock is one clock
    # here), the window a little longer (7.3: 28 windows, 27 episodes, 4.8 ms against 4.3:
    # 18 us a window in this emulated guest; on the 6.18 host memcg reclaim, 2-3.5 us).
    # Delay accounting counts an episode only when local_clock() moved during it
    # (delayacct_end: ns > 0), and in this guest (TSC marked unstable) local_clock() is the
    # raw clock held within a tick of the last tick's time, so it can stand still for a short
    # episode (the likeliest reason, not measured apart: 6.12 in a CI run had 294 windows in
    # memstall and in ftrace, 256 episodes in delay accounting). So taskstats bounds the windows from below only (less 5%: a retried reclaim,
    # memcg_low_skipped or skipped_deactivate, is two episodes in one window), and
    # /proc/vmstat's allocstall_*, counted at each episode's start on every kernel whatever
    # the clock (global reclaim only, as the hog's), from above.
    t.check_ge("direct reclaim windows >= taskstats' episodes (less 5%: retries)",
               0.95 * stats["freepages_count"] - 2, got["stalls"])
    t.check_le("direct reclaim windows <= /proc/vmstat allocstall_* (an episode each)",
               stalls, got["stalls"])
    t.check_ge("direct reclaim time >= 95% of taskstats'", 0.95 * stats["freepages_delay_total"],
               got["ns"])
    # The code around the episode costs per window, not per cent: 16 us a window in a CI run
    # (18 windows: 1.3 ms against 1.0, 129%), and 39 in another (16 windows: 2.4 ms against
    # 1.8, one window of 0.78 ms: an interrupt of the emulated guest inside a window, outside
    # the episode; another CI run on 7.3: 17 windows of 2.8 ms against 0.8, the longest 1.7
    # ms; and a full-CI simulation on 7.3: 20 windows of 5.02 ms against 2.14, the longest
    # 1.73 ms, 52 us a window besides it, while ftrace's windows were 5.13 ms; the next run:
    # 19 windows of 9.10 ms against 5.31, about 62 us a window besides the longest). So 5%
    # plus 150 us a window plus the longest window (or 1 ms, if longer) once; the ftrace
    # windows below hold the time tightly.
    t.check_le("direct reclaim time <= taskstats' + 5% + 150 us a window + the longest window "
               "(the code around it, one interrupt of the guest)",
               1.05 * stats["freepages_delay_total"] + 150e3 * got["stalls"] +
               max(1e6, got.get("max_ns", 0)), got["ns"])
    # That bound lets much through (3.5x once); the windows themselves, in ftrace, do not.
    _check_windows(t, "direct reclaim", _windows_ns(t, b), got)
