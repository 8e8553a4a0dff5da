#!/usr/bin/env python3
"""Runtime tests of lockstall: an mmap_lock convoy made on purpose, against the kernel's own
trace of it.

The lock_convoy workload maps 256 MiB in small pages and touches them; its child, named
convoy_reader (the "monitor"), reads the parent's /proc/PID/smaps_rollup in a loop, holding
the parent's mmap_lock for reading for the whole walk (a few ms); a thread maps and unmaps a
page in a loop and two others flip a page's protection (both take the lock for writing, and
queue behind the reader).

The oracle is an ftrace instance of our own on the three mmap_lock events, for the workload
and every process and thread it makes (set_event_pid, event-fork), on the monotonic clock that
bpf_ktime_get_ns() reads: pairing start_locking with acquire_returned per thread gives every
wait, acquire_returned with released every hold. The workload is held at the door until both
lockstall and the oracle run, and has exited before either stops: both see the same waits.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lock_oracle import (EVENTS, MIN_WAIT_NS, EDGE_NS, check_holders, check_waits,  # noqa: E402
                         long_waits, pair)
from memlat_test import (FtraceOracle, Test, Tool, Workload, check_bad_arguments,  # noqa: E402
                         check_help, check_variant_chosen, log, main, scenario,
                         shared_bad_arguments, skip, variant_env, variant_scenarios)

SECONDS = "1"


def require_mmap_lock_events() -> None:
    if not os.path.isdir("/sys/kernel/tracing/events/mmap_lock"):
        skip("the kernel has no mmap_lock tracepoints (Linux 5.11+)")


def run_convoy(t: Test, *workload_args: str,
               variant: str = "") -> tuple[list[dict], list[dict], list[dict], dict]:
    """lockstall -j (its feature `variant`) beside the oracle around one run of lock_convoy;
    the tool's waits of the workload's processes, the oracle's waits and holds, and the
    workload's pids."""
    require_mmap_lock_events()
    with Tool("lockstall", "-v", "-j", env=variant_env(variant)) as tool:
        with Workload("lock_convoy", "--seconds", SECONDS, *workload_args, held=True) as w:
            # ~400,000 events a second in the convoy, 40-odd bytes each in the ring buffer.
            with FtraceOracle(EVENTS, w.pid, buffer_kb=65536, clock="mono",
                              threads=True) as oracle:
                w.release()
                if w.wait_exit(60) != 0:
                    t.require(False, "lock_convoy's exit status", 0, w.proc.returncode)
                events = oracle.stop()
        res = tool.stop()
    t.check_eq("lockstall exit status after SIGINT", 0, res.rc)
    check_variant_chosen(t, variant, res.stderr, events=True)
    first = w._out.lines[0] if w._out.lines else ""
    pids = dict(kv.split("=") for kv in first.split())
    ours = {int(pids.get("pid", 0)), int(pids.get("reader", 0))} - {0}
    waits, holds = pair(events)
    tool_waits = [e for e in res.json_lines() if e.get("type") == "event" and e["pid"] in ours]
    summary = [e for e in res.json_lines() if e.get("type") == "summary"]
    t.check_eq("lockstall: events lost", 0, summary[0]["lost_events"] if summary else None)
    log(f"  oracle: {sum(len(v) for v in events.values())} events, {len(waits)} waits, "
        f"{len(holds)} holds; lockstall: {len(tool_waits)} waits of the workload")
    return tool_waits, waits, holds, {k: int(v) for k, v in pids.items()}


@variant_scenarios("lockstall_convoy_vs_ftrace", btf_file=True, unprivileged=True)
def _(t: Test, variant: str):
    """The convoy: lockstall's waits of 1 ms or more are the oracle's, wait for wait; each names
    the holds of 0.1 ms or more released while it waited (the oracle's, by thread); the reader
    is named the root (the first holder) of every wait it was the root of. Also on the old
    kernels' paths (perf buffers, no kernel BTF), with a --btf file, and as nobody."""
    tool_waits, waits, holds, pids = run_convoy(t, variant=variant)
    t.require(len(long_waits(waits, MIN_WAIT_NS + EDGE_NS)) >= 50,
              "waits of 1 ms or more in the convoy (oracle)", ">= 50",
              len(long_waits(waits, MIN_WAIT_NS + EDGE_NS)))
    matched = check_waits(t, tool_waits, waits)
    compared, reader_root, named_reader = check_holders(t, tool_waits, waits, holds, matched,
                                                        pids["reader"])
    t.require(reader_root >= 20, "waits whose first holder was the reader (oracle)", ">= 20",
              reader_root)
    t.check_eq("of those, the reader named the root, reading smaps_rollup", reader_root,
               named_reader)


@scenario("lockstall_no_reader")
def _(t: Test):
    """The same work without the reader: no convoy behind a /proc reader. lockstall's waits of
    1 ms or more are still the oracle's (a writer preempted while it holds the lock, both CPUs
    busy, makes the others wait: 150-odd a run here), each with the oracle's holders, and no
    holder reads /proc."""
    tool_waits, waits, holds, pids = run_convoy(t, "--no-reader")
    t.check_eq("the workload ran without its reader", 0, pids.get("reader"))
    matched = check_waits(t, tool_waits, waits)
    if matched:
        check_holders(t, tool_waits, waits, holds, matched)
    t.check_eq("holders reading a /proc file", [],
               [(e["tid"], h["comm"], h["op"]) for e in tool_waits for h in e["holders"]
                if h["op"].startswith("/proc")][:5])


@scenario("lockstall_help")
def _(t: Test):
    check_help(t, "lockstall", ["--min-wait", "--min-hold", "--stacks", "--pid", "--cgroup",
                                "--json", "--duration"])


@scenario("lockstall_bad_input")
def _(t: Test):
    check_bad_arguments(t, "lockstall", [
        (["-m", "-1"], "-m takes milliseconds"),
        (["-m", "nan"], "-m takes milliseconds"),
        (["--min-hold", "-5"], "--min-hold takes milliseconds"),
        (["-m", "x"], "-m"),
        (["--prometheus", "127.0.0.1:0", "-s"], "-s goes with the per-wait output"),
        (["1"], "unexpected"),
    ] + shared_bad_arguments(cgroup=True))


if __name__ == "__main__":
    sys.exit(main())
