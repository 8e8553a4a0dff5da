"""Host checks of numamove's VM scenarios (tests/vm/scenarios/numamove.sh): real NUMA-balancing
migrations between the guest's two nodes, against /proc/vmstat."""
from __future__ import annotations

import re

from tolerances import MIGRATION_EDGES
from memlat_test import Test, log
from vmcheck import Block, checker, hook_path, show_hooks, vmstat_delta

# Both vmstat snapshots lie inside both tools' windows, but the tools count everything from
# their start to their stop: NUMA balancing also moves pages of the guest's other processes
# (the shell, the tools themselves) that happen to run on the other node, in the moments
# between a tool's start and the first snapshot, and between the last snapshot and the stop.
# Measured on 6.1: +27 pages right after numa_balancing was switched on, +1 and 0 later, for
# ~8200 migrated. Allowed: 1% of the migrations, and at least EDGE_PAGES.
EDGE_PAGES = MIGRATION_EDGES.abs
EDGE_TOL = MIGRATION_EDGES.rel
# The per-call view counts migrate_misplaced_* calls, which include those that give up before
# migrate_pages() (page not isolated, target node short of memory): more calls than
# numa_misplaced migrations, never fewer.
PER_CALL_EXTRA = 0.25
MIN_MIGRATED = 1000     # pages: else the workload did not make NUMA balancing work


def _final(t: Test, res, label: str) -> dict:
    objs = res.json_lines()
    t.require(len(objs) >= 1, f"{label}: a JSON object at exit",
              ">= 1", len(objs))
    return objs[-1]


@checker("numamove.misplaced")
def misplaced(t: Test, b: Block) -> None:
    path_a, _, path_b = b.variant.partition("+")
    tp = b.tool("tracepoints")
    pc = b.tool("per_call")
    path_b = hook_path(t, b, path_b, pc.stderr)
    wl = b.tool("workload")
    log("  tool -r:")
    show_hooks(tp.stderr)
    log("  tool -c:")
    show_hooks(pc.stderr)
    m = re.search(r"pid=(\d+) iterations=(\d+) pages=(\d+) before_on_to_node=(-?\d+) "
                  r"after_on_to_node=(-?\d+)", wl.stdout)
    t.require(wl.rc == 0 and m is not None, "numa_toucher ran", "exit 0 and its report line",
              f"exit {wl.rc}: {wl.stdout.strip()!r} {wl.stderr.strip()[:200]!r}")
    pid, passes, pages, before, after = (int(x) for x in m.groups())
    d = vmstat_delta(b, "vmstat.before", "vmstat.after", "numa_pages_migrated",
                     "pgmigrate_success", "pgmigrate_fail", "numa_hint_faults")
    log(f"  workload pid {pid}: {pages} pages, on node 1 before {before}, after {after} "
        f"({passes} passes); /proc/vmstat: numa_pages_migrated +{d['numa_pages_migrated']}, "
        f"pgmigrate_success +{d['pgmigrate_success']}, pgmigrate_fail +{d['pgmigrate_fail']}, "
        f"numa_hint_faults +{d['numa_hint_faults']}")
    t.check_eq("tools' exit status after SIGINT (-r, -c)", (0, 0), (tp.rc, pc.rc))
    t.check_ge("pages NUMA balancing migrated (numa_pages_migrated delta)", MIN_MIGRATED,
               d["numa_pages_migrated"], "else nothing below means anything")
    t.check_ge("the workload's pages that moved to node 1 (move_pages)", pages // 2,
               after - before, "half of them at least")

    t.check_in(f"-r: migrate tracepoints through {path_a}",
               f"migrate:mm_migrate_pages: using {path_a}", tp.stderr,
               "stderr")
    obj = _final(t, tp, "numamove --reasons")
    reasons = {r["reason"]: r for r in obj.get("reasons") or []}
    numa = reasons.get("numa_misplaced", {})
    log("  -r reasons: " + "; ".join(f"{k}: calls {r['calls']} ok {r['succeeded']} failed "
                                     f"{r['failed']}" for k, r in reasons.items()))
    t.check_close("numa_misplaced pages succeeded vs numa_pages_migrated delta",
                  d["numa_pages_migrated"], numa.get("succeeded", 0), rel_tol=EDGE_TOL,
                  abs_tol=EDGE_PAGES)
    t.check_close("pages succeeded, all reasons, vs pgmigrate_success delta",
                  d["pgmigrate_success"], sum(r["succeeded"] for r in reasons.values()),
                  rel_tol=EDGE_TOL, abs_tol=EDGE_PAGES)
    t.check_close("pages failed, all reasons, vs pgmigrate_fail delta", d["pgmigrate_fail"],
                  sum(r["failed"] for r in reasons.values()), rel_tol=EDGE_TOL,
                  abs_tol=EDGE_PAGES)
    # -P (numamove.sh runs --reasons with it): the per-process table and the counts by reason go by
    # the same epochs, so the rows plus left_out add up to the totals, and the workload's
    # NUMA-balancing migrations are in its own row.
    fields = ("calls", "succeeded", "failed")
    summed: dict = {}
    for r in (obj.get("processes") or []) + (obj.get("left_out") or []):
        summed[r["reason"]] = [a + r[f] for a, f in zip(summed.get(r["reason"], [0] * 3), fields)]
    t.check_eq("-P: rows + left_out vs totals (calls, succeeded, failed by reason)",
               {r["reason"]: [r[f] for f in fields] for r in obj.get("totals") or []}, summed)
    mine = sum(r["succeeded"] for r in obj.get("processes") or []
               if r["pid"] == pid and r["reason"] == "numa_misplaced")
    t.check_close("-P: the workload's numa_misplaced pages vs numa_pages_migrated delta",
                  d["numa_pages_migrated"], mine, rel_tol=EDGE_TOL, abs_tol=EDGE_PAGES)

    calls_a = numa.get("calls", 0)
    pobj = _final(t, pc, "numamove --per-call")
    if path_b == "migrate_tracepoints":
        t.check_in("-c: no fentry/kprobe allowed, falls back to the tracepoints (-v)",
                   "(per call): using migrate_tracepoints", pc.stderr, "stderr")
        t.check_in("-c: says so without -v too", "cannot time migrate_misplaced_folio/_page",
                   pc.stderr, "stderr")
        t.check_eq("-c view", "tracepoints", pobj.get("view"))
        t.check_close("-c NUMA_migrations vs -r numa_misplaced calls", calls_a,
                      pobj.get("numa_migrations", 0), rel_tol=EDGE_TOL, abs_tol=EDGE_PAGES)
    else:
        function = ("migrate_misplaced_page" if "migrate_misplaced_folio" not in
                    b.facts.get("kernel_functions", "") else "migrate_misplaced_folio")
        t.check_in(f"-c: per-call view through {path_b} on {function}",
                   f"(per call): using {function}/{path_b}", pc.stderr, "stderr")
        t.check_eq("-c view", "per_call", pobj.get("view"))
        got = pobj.get("numa_migrations", 0)
        log(f"  -c: {got} calls of {function}, {pobj.get('numa_migrations_ms')} ms; -r: "
            f"{calls_a} numa_misplaced migrate_pages() calls")
        t.check_ge("-c calls vs -r numa_misplaced calls",
                   round(min(calls_a * (1 - EDGE_TOL), calls_a - EDGE_PAGES)), got,
                   f"-{EDGE_TOL * 100:g}%: the two tools' windows differ a little")
        t.check_le("-c calls vs -r numa_misplaced calls",
                   round(calls_a * (1 + PER_CALL_EXTRA)) + EDGE_PAGES, got,
                   f"+{PER_CALL_EXTRA * 100:g}%: calls that gave up before migrate_pages()")
        t.check(pobj.get("numa_migrations_ns", 0) > 0, "-c measured time", "> 0 ns",
                pobj.get("numa_migrations_ns"))
