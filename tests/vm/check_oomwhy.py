"""Host checks of oomwhy's VM scenarios (tests/vm/scenarios/oomwhy.sh): each kill against the
guest kernel's own report of it (its log from the scenario's marker on) and memory.events."""
from __future__ import annotations

import re

from memlat_test import Test, log
from oom_oracle import check_against_log, oom_reports, rss_slack_kb
from vmcheck import Block, checker, required, show_hooks


def _since_marker(b: Block) -> list[str]:
    lines = b.file("dmesg").splitlines()
    at = max((i for i, line in enumerate(lines) if f"memlat-vm: {b.name} begins" in line),
             default=None)
    if at is None:
        raise AssertionError(f"the marker of {b.name} is not in the guest's log")
    return lines[at + 1:]


def _cpus(online: str) -> int:
    """The number of CPUs in a list such as 0-1 or 0,2-3."""
    n = 0
    for part in online.strip().split(","):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def _events(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+) (\d+)$", text, re.M)}


def _reports(t: Test, b: Block) -> tuple[list[dict], list[dict]]:
    res = b.tool("tool")
    show_hooks(res.stderr)
    t.check_eq("oomwhy exit status after SIGINT", 0, res.rc)
    ours = [r for r in res.json_lines() if r.get("type") == "kill"]
    kernel = oom_reports(_since_marker(b))
    for r in ours:
        log(f"  report: {r['constraint']}, oom_memcg {r['oom_memcg']} "
            f"(from {r['oom_memcg_from']}), limit {r['limit']}, cgroups {r['cgroups']}, "
            f"lead-up {r['lead_up']}")
    for k in kernel:
        log(f"  kernel: {k}")
    t.require(len(kernel) >= 1, "kills in the guest's kernel log", ">= 1", len(kernel))
    t.check_eq("reports = kills in the kernel log", len(kernel), len(ours))
    by_pid = {r["victim"]["tid"]: r for r in ours}
    for k in kernel:
        mine = by_pid.get(k["killed"]["pid"])
        if t.check(mine is not None, f"a report for the kill of {k['killed']['pid']}", "present",
                   sorted(by_pid)):
            slack = rss_slack_kb(b.facts.get("kernel", ""), _cpus(b.facts.get("cpus", "0-1")))
            check_against_log(t, mine, k, rss_slack=slack)
    return ours, kernel


@checker("oomwhy.memcg")
def memcg(t: Test, b: Block) -> None:
    res = b.tool("tool")
    t.check_in(f"-v: mark_victim uses {b.variant}",
               f"oom:mark_victim (each OOM kill): using {b.variant}", res.stderr, "stderr")
    ours, kernel = _reports(t, b)
    # As the tools name a cgroup: its path in the hierarchy (the guest's cgroup v2 mount).
    parent, child = (_in_hierarchy(b.meta[k]) for k in ("parent", "child"))
    for r in ours:
        t.check_eq("the cgroup whose limit fired: the parent", parent, r["oom_memcg"])
        t.check_eq("the limit: memory.max", "memory.max", r["limit"])
        if b.variant == "tracepoint":
            t.check("cgroup" not in r["victim"], "the classic tracepoint: no victim cgroup",
                    "absent", r["victim"].get("cgroup"))
        else:
            t.check_eq("the victim's cgroup: the child", child, r["victim"]["cgroup"])
        # Which of the two touchers the kernel kills is its choice (the lingering one has
        # oom_score_adj 1000; 6.12 once killed the trigger): the log is the oracle, checked above.
        log(f"  victim {r['victim']['tid']}, the lingering toucher {b.meta['victim_pid']}")
    # cgroup v2 counts a kill at the victim's cgroup and every level above it.
    t.check_eq("child memory.events oom_kill", len(kernel),
               _events(b.file("child.events")).get("oom_kill"))
    t.check_eq("parent memory.events oom_kill", len(kernel),
               _events(b.file("parent.events")).get("oom_kill"))


def _in_hierarchy(directory: str) -> str:
    """A cgroup directory of the guest (cgroup v2 at /sys/fs/cgroup) as the tools name it."""
    below = directory.removeprefix("/sys/fs/cgroup").rstrip("/")
    return below or "/"


@checker("oomwhy.high")
def high(t: Test, b: Block) -> None:
    ours, kernel = _reports(t, b)
    events = _events(b.file("parent.events"))
    log(f"  parent memory.events: {events}")
    t.check_ge("memory.high was exceeded before the kill", 1, events.get("high", 0))
    for r in ours:
        t.check_eq("the limit that fired: memory.max, not memory.high", "memory.max", r["limit"])
        t.check_eq("the parent's memory.high in the report (KiB)", 30 << 10,
                   next(c["high_kb"] for c in r["cgroups"]
                        if c["cgroup"] == _in_hierarchy(b.meta["parent"])))


@checker("oomwhy.global")
def global_oom(t: Test, b: Block) -> None:
    ours, kernel = _reports(t, b)
    for i, r in enumerate(ours):
        t.check_eq("constraint", "global", r["constraint"])
        # A second kill may follow while the hog's memory is not yet back: its victim is the
        # spare the scenario keeps for it (the tool runs at -1000, PID 1 is unkillable).
        if i == 0:
            t.check_eq("the first victim: the hog (oom_score_adj 1000)", ("anon_toucher", 1000),
                       (r["victim"]["comm"], r["victim"].get("oom_score_adj")))
        elif i == 1:
            t.check_eq("the second victim: the spare (oom_score_adj 500)",
                       (int(b.meta["spare_pid"]), 500),
                       (r["victim"]["tid"], r["victim"].get("oom_score_adj")))
        else:
            t.check(False, "at most two kills (the hog, then the spare)", "2", len(ours))
        # MemTotal + SwapTotal (none) in 4 KiB pages, as oomkill's totalpages.
        t.check_eq("pages: the guest's memory", int(b.meta["total_kb"]) // 4, r["pages"])
        log(f"  the page allocator checked {r['lead_up']['retry_checks']} times whether to "
            f"retry (last: {r['lead_up']['no_progress_loops']} reclaims without progress)")


@checker("oomwhy.mempolicy")
def mempolicy(t: Test, b: Block) -> None:
    if "," not in b.meta.get("nodes", "") and "-" not in b.meta.get("nodes", ""):
        raise AssertionError(f"the guest has one node with memory ({b.meta.get('nodes')}): "
                             "a memory policy constrains nothing")
    ours, kernel = _reports(t, b)
    for r, k in zip(ours, kernel):
        t.check_eq("constraint", "mempolicy", r["constraint"])
        t.check_eq("the nodes the policy allows", "0", r["allowed_nodes"])
        if "oom_kill" in k:
            t.check_eq("the nodes vs the log's nodemask=", k["oom_kill"].get("nodemask"),
                       r["allowed_nodes"])
        # Node 0's MemTotal (no swap) in 4 KiB pages, as oomkill's totalpages.
        t.check_eq("pages: node 0's memory", int(b.meta["node0_kb"]) // 4, r["pages"])


@checker("oomwhy.storm")
def storm(t: Test, b: Block) -> None:
    """A storm through a 4 KiB buffer that its stopped reader cannot empty: the reports and
    the kills counted as not reported add up to the kills, which memory.events and the kernel
    log count; the loss is said on stderr."""
    res = b.tool("tool")
    t.check_eq("oomwhy exit status after SIGINT", 0, res.rc)
    summary = [r for r in res.json_lines() if r.get("type") == "summary"]
    t.require(len(summary) == 1, "oomwhy's summary", 1, len(summary))
    s = summary[0]
    reports = [r for r in res.json_lines() if r.get("type") == "kill"]
    kills = _events(b.file("events")).get("oom_kill", 0)
    t.require(_events(b.file("events.after")).get("oom_kill") == kills,
              "no kill after the storm (memory.events oom_kill before and after the tool "
              "stopped)", kills, _events(b.file("events.after")).get("oom_kill"))
    # The kernel's reports of 200 kills overflow its log buffer (the scenario's marker is gone
    # by the end, and the oom-kill: summary lines are rate-limited): memory.events is the
    # count; the "Killed process" lines the log still holds give the rate.
    # From the scenario's marker where the log still has it (arm64's larger buffer keeps the
    # memcg scenarios' anon_toucher kills before it); the whole log where it rotated.
    lines = b.file("dmesg").splitlines()
    at = max((i for i, line in enumerate(lines) if f"memlat-vm: {b.name} begins" in line),
             default=-1)
    log_lines = [ln for ln in lines[at + 1:]
                 if "Killed process" in ln and "(anon_toucher)" in ln]
    stamps = [float(m.group(1)) for ln in log_lines if (m := re.match(r"\[\s*([\d.]+)\]", ln))]
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    rate = (len(stamps) - 1) / span if span else 0.0
    log(f"  {kills} kills (memory.events); the log's last {len(stamps)} over {span:.2f} s: "
        f"{rate:.0f} a second; oomwhy: {s}")
    t.require(kills >= 100, "kills in the storm (memory.events oom_kill)", ">= 100", kills)
    t.check_eq("kills seen (oom:mark_victim) = memory.events oom_kill", kills, s["kills"])
    t.check_le("the storm's kills in the kernel log <= memory.events oom_kill", kills,
               len(log_lines))
    t.check_eq("reports printed = the summary's", len(reports), s["reports"])
    t.check_ge("kills not reported (the 4 KiB buffer holds five records)", 1,
               s["kills_not_reported"] if s.get("kills_not_reported") is not None
               else float("nan"))
    t.check_eq("reports + kills not reported = kills", kills,
               s["reports"] + (s.get("kills_not_reported") or 0))
    t.check_ge("records lost >= kill records lost", s.get("kills_not_reported") or 0,
               s["lost_events"])
    t.check_in("stderr says how many kills were not reported",
               f"{s.get('kills_not_reported')} kills were not reported", res.stderr, "stderr")


# Every kernel of the matrix runs them (cgroup v2 with the memory controller in every guest):
# the hook paths in its two boots, global and high once, in its boot with kernel BTF.
required("oomwhy.memcg", lambda facts: True)
required("oomwhy.global", lambda facts: facts.get("kernel_btf") != "hidden")
required("oomwhy.high", lambda facts: facts.get("kernel_btf") != "hidden")
required("oomwhy.mempolicy", lambda facts: facts.get("kernel_btf") != "hidden")
required("oomwhy.storm", lambda facts: facts.get("kernel_btf") != "hidden")
