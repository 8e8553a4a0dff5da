"""Host checks of lockstall's VM scenarios (tests/vm/scenarios/lockstall.sh): the convoy of
lock_convoy against the guest's ftrace instance on the mmap_lock events, paired and compared
as the host's runtime.lockstall_convoy_vs_ftrace does (tests/runtime/lock_oracle.py); on a
kernel without those tracepoints, the tool's refusal."""
from __future__ import annotations

from lock_oracle import (EDGE_NS, MIN_WAIT_NS, check_holders, check_waits, events_of_trace,
                         long_waits, pair)
from memlat_test import Test, log
from tolerances import LOCK_ROOT_GUEST
from vmcheck import Block, check_hook, checker, oracle_trace, required

# The tracepoints came in 5.11: every kernel of the matrix but 5.10 runs the convoy, and 5.10
# must say why it cannot.
required("lockstall.convoy", lambda facts: True)

PROBE = "mmap_lock:mmap_lock_start_locking/acquire_returned/released"
# The workload's thread names (lock_convoy.cpp): the other processes of the guest are in the
# trace too.
WORKLOAD_COMMS = {"lock_convoy", "convoy_reader", "convoy_mapper", "convoy_mprotect"}


@checker("lockstall.convoy")
def convoy(t: Test, b: Block) -> None:
    res = b.tool("tool")
    if b.meta.get("tracepoints") == "none":
        t.check_eq("lockstall without the mmap_lock tracepoints: exit status", 1, res.rc)
        t.check_in("it says what it needs", "It needs the mmap_lock tracepoints (Linux 5.11",
                   res.stderr, "stderr")
        t.check_eq("nothing on stdout", "", res.stdout)
        return
    t.check_eq("lockstall exit status after SIGINT", 0, res.rc)
    check_hook(t, res.stderr, PROBE, b.name.rsplit(".", 1)[1])
    work = b.tool("workload")
    t.require(work.rc == 0, "lock_convoy's exit status", 0, work.rc)
    pids = dict(kv.split("=") for kv in work.stdout.split()[:2])
    ours = {int(pids["pid"]), int(pids["reader"])}
    events = events_of_trace(oracle_trace(t, b))
    tool_waits = [e for e in res.json_lines() if e.get("type") == "event" and e["pid"] in ours]
    tids = {int(e["_tid"]) for kind in events.values() for e in kind
            if e["_comm"] in WORKLOAD_COMMS}
    waits, holds = pair(events)
    waits = [w for w in waits if w["tid"] in tids]
    summary = [e for e in res.json_lines() if e.get("type") == "summary"]
    t.check_eq("events lost", 0, summary[0]["lost_events"] if summary else None)
    log(f"  oracle: {sum(len(v) for v in events.values())} events, {len(waits)} waits of the "
        f"workload's threads, {len(holds)} holds; lockstall: {len(tool_waits)} waits")
    t.require(len(long_waits(waits, MIN_WAIT_NS + EDGE_NS)) >= 10,
              "waits of 1 ms or more in the convoy (oracle)", ">= 10",
              len(long_waits(waits, MIN_WAIT_NS + EDGE_NS)))
    matched = check_waits(t, tool_waits, waits, guest=True)
    _, reader_root, named_reader = check_holders(t, tool_waits, waits, holds, matched,
                                                 int(pids["reader"]))
    t.require(reader_root >= 3, "waits whose first holder was the reader (oracle)", ">= 3",
              reader_root)
    t.check_ge(f"of those, the reader named the root, reading smaps_rollup (% of them; "
               f"{LOCK_ROOT_GUEST.name})", 100 * (1 - LOCK_ROOT_GUEST.rel),
               100 * named_reader / reader_root)
