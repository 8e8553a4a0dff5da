"""Host checks of drsnoop's VM scenarios (tests/vm/scenarios/drsnoop.sh)."""
from __future__ import annotations

import re

from tolerances import RECLAIM_PAGES
from memlat_test import Test, log
from vmcheck import Block, check_hook, checker, oracle_trace, stopped_tool, vmstat_delta


def _events(t: Test, res) -> tuple[list[dict], list[dict]]:
    objs = res.json_lines()
    events = [e for e in objs if "kind" in e and "lat_ns" in e]
    summary = [e for e in objs if "summary" in e]
    t.require(len(summary) == 1, "drsnoop printed its exit summary (one JSON object)", "1",
              len(summary))
    return events, summary[0]["summary"]


@checker("drsnoop.memcg")
def memcg(t: Test, b: Block) -> None:
    res = stopped_tool(t, b, "drsnoop")
    reader = b.tool("reader")
    pid = int(b.meta["reader_pid"])
    t.check_eq("reader (dd in the memory cgroup) exit status", 0, reader.rc)
    check_hook(t, res.stderr, "vmscan:mm_vmscan_memcg_reclaim_begin/end", b.variant)
    trace = oracle_trace(t, b)
    oracle = [int(m) for m in re.findall(r"nr_reclaimed=(\d+)", trace)]
    events, summary = _events(t, res)
    log(f"  reader pid {pid}: drsnoop {len(events)} stalls, {sum(e['pages'] for e in events)} "
        f"pages; ftrace {len(oracle)} stalls, {sum(oracle)} pages")
    t.check_ge("memcg stalls reported", 10, len(events))
    t.check_eq("PIDs in the events (only the reader's)", {pid}, {e["pid"] for e in events})
    t.check_eq("kinds in the events", {"memcg"}, {e["kind"] for e in events})
    t.check_eq("number of stalls vs the ftrace oracle (exact)", len(oracle), len(events))
    t.check_eq("sum of PAGES vs the ftrace oracle's nr_reclaimed (exact)", sum(oracle),
               sum(e["pages"] for e in events))
    # The arguments of each begin (tp_btf and raw_tp read them by position; 7.3 put gfp
    # first): the same order and flags as ftrace's, stall by stall (flags as sets: ftrace and
    # drsnoop name the same bits in different orders).
    begins = re.findall(r"mm_vmscan_memcg_reclaim_begin: order=(\d+) gfp_flags=(\S+)", trace)
    t.require(len(begins) == len(events), "begins in the ftrace oracle, one per stall",
              len(events), len(begins))
    wrong = [(i, (int(o), g), (e["order"], e["gfp"])) for i, ((o, g), e) in
             enumerate(zip(begins, events))
             if int(o) != e["order"] or set(g.split("|")) != set(e["gfp"].split("|"))]
    t.check_eq("stalls whose order or gfp flags differ from ftrace's begin", [], wrong[:3])
    mine = [s for s in summary if s["pid"] == pid and s["kind"] == "memcg"]
    t.require(len(mine) == 1, "a summary row for the reader", "1", len(mine))
    t.check_eq("summary stalls", len(events), mine[0]["stalls"])


# nr_reclaimed at mm_vmscan_direct_reclaim_end is sc->nr_reclaimed, which adds the slab pages
# the shrinkers freed (reclaim_state) to the LRU pages pgsteal_direct counts (tolerances.py).
PAGES_TOL = RECLAIM_PAGES.rel


@checker("drsnoop.direct")
def direct(t: Test, b: Block) -> None:
    res = stopped_tool(t, b, "drsnoop")
    log(f"  round {b.meta.get('round', '1')} of at most 3 (a round is repeated while the hog "
        "stalled fewer than 5 times in direct reclaim)")
    for line in b.files.get("hog.err", "").splitlines():
        if "kswapd" in line:
            log(f"  {line}")
    t.check_eq("reclaim_hog exit status", 0, b.tool("hog").rc)
    d = vmstat_delta(b, "vmstat.before", "vmstat.after", "allocstall_*", "pgsteal_direct",
                     "pgsteal_kswapd")
    events, summary = _events(t, res)
    pages = sum(e["pages"] for e in events)
    log(f"  /proc/vmstat: allocstall_* +{d['allocstall_*']}, pgsteal_direct "
        f"+{d['pgsteal_direct']}, pgsteal_kswapd +{d['pgsteal_kswapd']}; drsnoop: "
        f"{len(events)} direct stalls, {pages} pages, by {sorted({e['comm'] for e in events})}")
    t.check_ge("direct reclaim happened in the guest (allocstall delta)", 5, d["allocstall_*"])
    t.check_eq("kinds in the events", {"direct"} if events else set(),
               {e["kind"] for e in events})
    # Both snapshots lie inside the tool's window: stalls that begin before the first
    # snapshot and end after it are the only difference (at most one per CPU at each edge).
    t.check_close("direct stalls vs allocstall_* delta", d["allocstall_*"], len(events),
                  rel_tol=0, abs_tol=2)
    t.check_ge("sum of PAGES vs pgsteal_direct (nr_reclaimed adds slab pages)",
               round(d["pgsteal_direct"] * (1 - PAGES_TOL)), pages, f"- {PAGES_TOL * 100:g}%")
    t.check_le("sum of PAGES vs pgsteal_direct", round(d["pgsteal_direct"] * (1 + PAGES_TOL)),
               pages, f"+ {PAGES_TOL * 100:g}%")
    t.check_eq("summary stalls == events", len(events), sum(s["stalls"] for s in summary))
