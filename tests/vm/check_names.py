"""Host checks of the names' VM scenario (tests/vm/scenarios/names.sh): a Kubernetes
container's cgroup on cgroup v2, named from its containerd bundle."""
from __future__ import annotations

from memlat_test import Test, log
from vmcheck import Block, checker, required

# cgroup v2 and memory.high are on every kernel of the matrix: the scenario runs on each.
required("names.k8s_v2", lambda facts: True)
required("names.brief_v2", lambda facts: True)

WANT = {"kind": "container", "runtime": "containerd", "namespace": "shop",
        "pod": "checkout-7d9f", "container": "web", "qos": "burstable"}


def cgroup_row(t: Test, per_cgroup, path: str, what: str) -> dict | None:
    """memstall -C's row of cgroup `path` in its one JSON line at the end, if there is one."""
    t.check_eq("memstall -C: exit status", 0, per_cgroup.rc)
    lines = [j for j in per_cgroup.json_lines() if "cgroups" in j]
    t.require(len(lines) == 1, "memstall -C: one JSON line at the end", "1", len(lines))
    mine = [r for r in lines[0]["cgroups"] if r.get("cgroup") == path]
    if not t.check(len(mine) == 1, f"memstall -C: {what}", "1",
                   [r.get("cgroup") for r in lines[0]["cgroups"]]):
        return None
    return mine[0]


@checker("names.k8s_v2")
def k8s_v2(t: Test, b: Block) -> None:
    path = b.meta["cgroup"]
    pid = int(b.meta["toucher_pid"])
    per_cgroup = b.tool("per_cgroup")
    if row := cgroup_row(t, per_cgroup, path, "the container's row"):
        got = row.get("workload") or {}
        t.check_eq("memstall -C: its names, from the bundle", WANT, {k: got.get(k) for k in WANT})
        t.check(row["causes"].get("high", {}).get("stalls", 0) > 0,
                "memstall -C: its memory.high stalls", "> 0", row["causes"])
    t.check_in("memstall -v: which file named it", f"names: {path} is shop/checkout-7d9f/web "
               "(from /run/containerd/io.containerd.runtime.v2.task/k8s.io/", per_cgroup.stderr,
               "stderr")
    by_name = b.tool("by_name")
    t.check_eq("memstall -G NAMESPACE/POD/CONTAINER: exit status", 0, by_name.rc)
    lines = [j for j in by_name.json_lines() if "processes" in j]
    stalled = [r["pid"] for line in lines for r in line["processes"] if r["stall_ns"] > 0]
    t.check_eq("memstall -G shop/checkout-7d9f/web: only the toucher stalls", [pid], stalled)
    top = b.tool("top")
    t.check_eq("memlat top: exit status", 0, top.rc)
    rows = [r for j in top.json_lines() for r in j.get("cgroups", []) if r["cgroup"] == path]
    log(f"  top: {len(rows)} rows of the container, named {sorted({r['name'] for r in rows})}")
    t.check(len(rows) >= 1 and all(r["name"] == "shop/checkout-7d9f/web" for r in rows),
            "memlat top: every row of the container named shop/checkout-7d9f/web",
            "shop/checkout-7d9f/web", sorted({r["name"] for r in rows}))


@checker("names.brief_v2")
def brief_v2(t: Test, b: Block) -> None:
    path = b.meta["cgroup"]
    toucher = b.tool("toucher")
    t.check_eq("the toucher: exit status", 0, toucher.rc)
    brief = b.tool("brief")
    if row := cgroup_row(t, brief, path, "the removed container's row, by its path"):
        got = row.get("workload") or {}
        want = {"namespace": "jobs", "pod": "batch-1", "container": "job"}
        t.check_eq("memstall -C: its names, read as its cgroup was made", want,
                   {k: got.get(k) for k in want})
    t.check_in("memstall -v: named as the cgroup was made",
               f"names: {path} is jobs/batch-1/job (from /run/containerd/", brief.stderr, "stderr")
    t.check_in("memstall -v: the cgroup tracepoints attached", "cgroup:cgroup_mkdir, "
               "cgroup:cgroup_rmdir: using", brief.stderr, "stderr")
