#!/usr/bin/env python3
"""Runtime tests of numamove: real page migrations on the live kernel, started by the tests.

Compaction migrates pages within a node through the same migrate_pages() and the same
migrate:mm_migrate_pages tracepoint as NUMA balancing, so it exercises everything but the
numa_misplaced reason on a one-node machine. The workload (migrate_fragmenter) maps 64 MiB
of base pages, frees every other one, and writes 1 to /proc/sys/vm/compact_memory, which
compacts every zone synchronously, in the workload's own process (again, up to 8 rounds of
64 MiB, until 8192 pages moved). It checks that its data survived the migrations and frees it all.

The oracles are independent of BPF:
- /proc/vmstat: migrate_pages() adds its succeeded pages to pgmigrate_success (and failed ones
  to pgmigrate_fail, THPs to thp_migration_success) right before it fires mm_migrate_pages
  with the same numbers, for every reason. Both count base pages (a THP counts 512). The tool
  counts from attach to SIGINT; vmstat is read at s0 (before the tool starts), s1 (tool
  ready), s2 (workload done) and s3 (tool stopped). So the tool's sum lies in
  [s2 - s1, s3 - s0], and equals the delta exactly when nothing migrated outside s1..s2
  (s3 - s0 == s2 - s1, the usual case on a quiet machine: then the check is exact).
- an ftrace instance of our own recording mm_migrate_pages for the workload's PID only (-p).
"""
import contextlib
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memlat_test import (FtraceOracle, PerfStat, Test, Tool, Workload, check_bad_arguments,  # noqa: E402
                         check_help, check_variant_chosen, log, main, read_file, run_workload,
                         scenario, skip, variant_env, variant_scenarios, vmstat, write_file,
                         shared_bad_arguments)

# Up to 16 rounds of 64 MiB: compaction's scanners may meet before they reach the holes, so
# the workload fragments and compacts again until 8192 pages moved (1 GiB mapped at most, half
# of it kept; 8 rounds moved under 256 pages once on a loaded machine).
FRAGMENT = ("--mib", "64", "--compact", "--rounds", "16", "--min-migrated", "8192")


class Windows:
    """vmstat snapshots s0..s3 around the tools (see the module docstring)."""

    KEYS = ("pgmigrate_success", "pgmigrate_fail", "thp_migration_success",
            "numa_pages_migrated")

    def __init__(self):
        self.s = [vmstat()]

    def mark(self) -> None:
        self.s.append(vmstat())

    def bracket(self, key: str) -> tuple:
        s0, s1, s2, s3 = self.s
        return s2[key] - s1[key], s3[key] - s0[key]

    def check(self, t: Test, what: str, key: str, actual: int) -> bool:
        lo, hi = self.bracket(key)
        how = ("exact: nothing migrated outside the workload's window" if lo == hi else
               f"other migrations ran outside the workload's window: {hi - lo} pages of slack")
        return t.check(lo <= actual <= hi, f"{what} vs /proc/vmstat {key} delta",
                       f"in [{lo}, {hi}] ({how})", actual)


def reason_sums(result) -> dict:
    """{reason: {field: sum over every interval}} from numamove -r -j."""
    sums: dict = {}
    for line in result.json_lines():
        for r in line.get("reasons", []):
            acc = sums.setdefault(r["reason"], {})
            for k, v in r.items():
                if isinstance(v, (int, float)) and k != "reason_id":
                    acc[k] = acc.get(k, 0) + v
    return sums


def total(sums: dict, field: str) -> int:
    return sum(r.get(field, 0) for r in sums.values())


def fragment_and_compact() -> dict:
    return run_workload("migrate_fragmenter", *FRAGMENT, timeout=90)


def compaction_watched(*tools: Tool) -> tuple[Windows, dict]:
    """Fragments and compacts memory while `tools` run, with the vmstat snapshots s0..s3 taken
    around them: (the Windows, the workload's result)."""
    w = Windows()
    with contextlib.ExitStack() as stack:
        for tool in tools:
            stack.enter_context(tool)
        w.mark()
        done = fragment_and_compact()
        w.mark()
    w.mark()
    return w, done


def number_list(text: str) -> list:
    """The numbers of a kernel list such as "0-3,8" (sysfs node and CPU lists)."""
    numbers = []
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            numbers.extend(range(int(a), int(b) + 1))
        elif part:
            numbers.append(int(part))
    return numbers


def numa_nodes() -> list:
    return number_list(read_file("/sys/devices/system/node/online", "0"))


def node_cpus(node: int) -> list:
    cpus = number_list(read_file(f"/sys/devices/system/node/node{node}/cpulist", ""))
    return [c for c in cpus if c in os.sched_getaffinity(0)]


# ---------------------------------------------------------------- scenarios

@scenario("numamove_compaction_matches_vmstat", btf_file=True, unprivileged=True)
def _(t: Test):
    tool = Tool("numamove", "--reasons", "-j")
    w, done = compaction_watched(tool)
    log(f"workload pid {done['pid']} fragmented and compacted memory {done['iterations']} time(s)")
    res = tool.result
    t.check_eq("numamove exit status", 0, res.rc)
    sums = reason_sums(res)
    log(f"reasons seen: { {k: v.get('succeeded') for k, v in sums.items()} }")
    t.require("compaction" in sums, "a compaction row (reason name from the kernel's BTF)",
              "present", sorted(sums))
    comp = sums["compaction"]
    t.check_ge("compaction pages succeeded (non-vacuous; the workload aims at 8192)", 256,
               comp["succeeded"])
    w.check(t, "pages succeeded, all reasons", "pgmigrate_success", total(sums, "succeeded"))
    others = total(sums, "succeeded") - comp["succeeded"]
    lo, hi = w.bracket("pgmigrate_success")
    t.check(lo - others <= comp["succeeded"] <= hi,
            "compaction pages succeeded vs pgmigrate_success delta minus other reasons",
            f"in [{lo - others}, {hi}] (other reasons: {others} pages)", comp["succeeded"])
    w.check(t, "pages failed, all reasons", "pgmigrate_fail", total(sums, "failed"))
    w.check(t, "THPs migrated, all reasons", "thp_migration_success",
            total(sums, "thp_succeeded"))
    t.check_ge("compaction calls timed (start seen)", comp["calls"] - 2, comp["timed_calls"],
               "at most a call or two in flight at attach")
    t.check(comp["total_ns"] > 0, "compaction total time", "> 0 ns", comp["total_ns"])
    t.check_close("total_ms is total_ns / 1e6", comp["total_ns"] / 1e6, comp["total_ms"],
                  rel_tol=1e-9, abs_tol=1e-6)


@scenario("numamove_pid_matches_ftrace", unprivileged=True)
def _(t: Test):
    with Workload("migrate_fragmenter", *FRAGMENT, held=True) as wl:
        pid = str(wl.pid)
        with FtraceOracle(["migrate/mm_migrate_pages"], wl.pid) as oracle, \
                Tool("numamove", "--reasons", "-j", "-p", pid) as by_pid, \
                Tool("numamove", "--reasons", "-H", "-j", "-p", pid) as hist, \
                Tool("numamove", "--reasons", "-P", "-j") as per_process, \
                Tool("numamove", "--reasons", "-P", "-p", pid) as text:
            wl.release()
            wl.wait_done(90)
            time.sleep(0.2)
            events = [(int(e["nr_succeeded"]), int(e["nr_failed"]), e["reason"])
                      for e in oracle.stop()["mm_migrate_pages"]]
    log(f"ftrace saw {len(events)} mm_migrate_pages events of pid {pid}")
    t.require(len(events) > 0, "the ftrace oracle saw migrations of the workload", "> 0",
              len(events))
    o_calls = [e for e in events if e[2] == "compaction"]
    o_succeeded = sum(e[0] for e in o_calls)
    o_failed = sum(e[1] for e in o_calls)
    for name, tool in (("-p", by_pid), ("-H -p", hist), ("-P", per_process), ("text -P -p", text)):
        t.check_eq(f"numamove {name} exit status", 0, tool.result.rc)

    sums = reason_sums(by_pid.result)
    t.check_eq("-p: reasons seen", {"compaction"}, set(sums))
    comp = sums.get("compaction", {})
    t.check_eq("-p: compaction calls vs ftrace events (exact)", len(o_calls), comp.get("calls"))
    t.check_eq("-p: pages succeeded vs ftrace nr_succeeded sum (exact)", o_succeeded,
               comp.get("succeeded"))
    t.check_eq("-p: pages failed vs ftrace nr_failed sum (exact)", o_failed, comp.get("failed"))
    t.check_eq("-p: every call timed (the tool started before the workload)", comp.get("calls"),
               comp.get("timed_calls"))

    hists = [h for line in hist.result.json_lines() for h in line.get("histograms", [])]
    t.check_eq("-H: histogram unit", {"usecs"}, {h["unit"] for h in hists})
    t.check_eq("-H: histogram total vs ftrace events (exact)", len(o_calls),
               sum(h["count"] for h in hists if h["what"] == "compaction"))

    rows = [r for line in per_process.result.json_lines() for r in line.get("processes", [])
            if r["pid"] == wl.pid and r["reason"] == "compaction"]
    t.check_eq("-P: the workload's pages succeeded vs ftrace (exact)", o_succeeded,
               sum(r["succeeded"] for r in rows))
    t.check_eq("-P: the workload's comm", {"migrate_fragmen"}, {r["comm"] for r in rows})
    # Every process's rows of an interval add up to its totals by reason (the totals go by the
    # table's epochs: before, a migration in flight as the interval closed made them differ by
    # 2-4 calls), and nothing is left out of a table that never filled.
    for n, line in enumerate(l for l in per_process.result.json_lines() if "processes" in l):
        fields = ("calls", "succeeded", "failed")
        summed: dict = {}
        for r in line["processes"] + line["left_out"]:
            summed[r["reason"]] = [a + r[f] for a, f in zip(summed.get(r["reason"], [0] * 3),
                                                            fields)]
        t.check_eq(f"-P interval {n}: rows + left_out vs totals (calls, succeeded, failed by "
                   "reason)", {r["reason"]: [r[f] for f in fields] for r in line["totals"]},
                   summed)
        t.check_eq(f"-P interval {n}: left out with table_full {line['table_full']}",
                   [] if line["table_full"] == 0 else "some", line["left_out"] or [])

    out = text.result.stdout
    t.check_in("text -P: table header", "PID      COMM             REASON              CALLS  "
               "SUCCEEDED", out)
    lines = [l.split() for l in out.splitlines() if l.startswith(pid + " ")]
    t.check_eq("text -P: the workload's pages succeeded (exact)", o_succeeded,
               sum(int(l[4]) for l in lines if l[2] == "compaction"))


@variant_scenarios("numamove_fallbacks_agree")
def _(t: Test, variant: str):
    # Each hook path, also with the old kernels' fall-backs forced (FEATURE_VARIANTS).
    variants = (("tp_btf", variant_env(variant)), ("raw_tp", variant_env(variant, "tp_btf")),
                ("tracepoint", variant_env(variant, "tp_btf,raw_tp")))
    if variant == "no_kernel_btf":
        variants = variants[1:]  # no tp_btf without the kernel's BTF
    tools = [Tool("numamove", "--reasons", "-j", "-v", env=env) for _, env in variants]
    w, _ = compaction_watched(*tools)
    for (hook, env), tool in zip(variants, tools):
        res = tool.result
        t.check_eq(f"{hook}: exit status", 0, res.rc)
        t.check_in(f"{hook}: -v names the hook", f"mm_migrate_pages: using {hook} ", res.stderr,
                   "stderr")
        sums = reason_sums(res)
        t.check_ge(f"{hook}: compaction calls seen", 1, sums.get("compaction", {}).get("calls", 0))
        t.check_ge(f"{hook}: compaction calls timed (start and end paired)", 1,
                   sums.get("compaction", {}).get("timed_calls", 0))
        w.check(t, f"{hook}: pages succeeded", "pgmigrate_success", total(sums, "succeeded"))
        w.check(t, f"{hook}: pages failed", "pgmigrate_fail", total(sums, "failed"))
        check_variant_chosen(t, variant, res.stderr)
    if not variant:
        t.check_in("-v explains the tp_btf argument layout", "from the kernel's BTF "
                   "(btf_trace_mm_migrate_pages): succeeded=0 failed=1", tools[0].result.stderr,
                   "stderr")


@scenario("numamove_perf_sees_tracepoints")
def _(t: Test):
    """perf stat beside the classic tracepoint programs (forced): perf, counting machine-wide
    over a longer window, must count at least every migrate_pages call the tool timed."""
    names = ["migrate:mm_migrate_pages_start", "migrate:mm_migrate_pages"]
    with PerfStat(names) as perf:
        with Tool("numamove", "--reasons", "-j", "-v",
                  env={"MEMLAT_DISABLE_HOOKS": "tp_btf,raw_tp"}) as tool:
            fragment_and_compact()
    res = tool.result
    t.check_eq("exit status", 0, res.rc)
    t.check_in("-v: the classic tracepoint is attached", "mm_migrate_pages: using tracepoint ",
               res.stderr, "stderr")
    sums = reason_sums(res)
    calls, timed = total(sums, "calls"), total(sums, "timed_calls")
    t.check_ge("the tool's migrate_pages calls (every reason)", 1, calls)
    t.check_ge("perf stat's count of migrate:mm_migrate_pages vs the tool's calls", calls,
               perf.counts["migrate:mm_migrate_pages"])
    t.check_ge("perf stat's count of migrate:mm_migrate_pages_start vs the tool's timed calls",
               timed, perf.counts["migrate:mm_migrate_pages_start"])


@scenario("numamove_no_start_tracepoint")
def _(t: Test):
    # Kernels before 5.16 have no mm_migrate_pages_start: numamove then times migrate_pages()
    # from its entry (fentry or kprobe). This kernel refuses fentry and has no kprobes, as a
    # kernel without either would: the counts must stay exact, the times absent, and the tool
    # must say so once on stderr.
    tool = Tool("numamove", "--reasons", "-j", "-v", env={"MEMLAT_DISABLE_HOOKS": "migrate_pages_start"})
    w, _ = compaction_watched(tool)
    res = tool.result
    t.check_eq("exit status", 0, res.rc)
    t.check_in("-v: the start tracepoints disabled", "migrate_pages_start/tp_btf: disabled "
               "by MEMLAT_DISABLE_HOOKS", res.stderr, "stderr")
    chosen = re.search(r"mm_migrate_pages_start \(times each migrate_pages\(\) call\): "
                       r"(using [\w/]+|not traced)", res.stderr)
    t.require(chosen is not None, "-v says how the start is observed", "a line", "none")
    if chosen.group(1) != "not traced":
        skip(f"this kernel accepted {chosen.group(1)} on migrate_pages(): the untimed path "
             "cannot be forced here")
    t.check_eq("stderr says once that migrations are not timed", 1,
               res.stderr.count("cannot time migrations on this kernel"))
    sums = reason_sums(res)
    t.check_ge("compaction calls seen", 1, sums.get("compaction", {}).get("calls", 0))
    t.check_eq("no call timed", 0, sum(r.get("timed_calls", 0) for r in sums.values()))
    w.check(t, "pages succeeded", "pgmigrate_success", total(sums, "succeeded"))
    w.check(t, "pages failed", "pgmigrate_fail", total(sums, "failed"))


@scenario("numamove_default_view")
def _(t: Test):
    nodes = numa_nodes()
    text = Tool("numamove", "-v", "1", "3", wait_exit=True)
    js = Tool("numamove", "-j", "1", "3", wait_exit=True)
    per_call = Tool("numamove", "--per-call", "-v", "-H", "1", "3", wait_exit=True)
    w, _ = compaction_watched(text, js, per_call)
    res = text.result
    t.check_eq("exit status after COUNT intervals", 0, res.rc)
    lines = res.stdout.splitlines()
    t.check_eq("header (the anchors' columns)", ["TIME", "NUMA_migrations", "NUMA_migrations_ms"],
               lines[0].split() if lines else [])
    rows = [l.split() for l in lines[1:] if l.strip()]
    t.check_eq("one line per interval", 3, len(rows))
    t.check(all(len(r) == 3 and re.fullmatch(r"\d+\.\d{3}", r[2]) for r in rows),
            "ms column has three decimals (from summed ns)", "like 0.000", rows)
    js_lines = js.result.json_lines()
    t.check_eq("JSON: one object per interval", 3, len(js_lines))
    if js_lines:
        t.check_eq("JSON keys", {"time", "numa_migrations", "numa_migrations_ms",
                                 "numa_migrations_ns", "view", "pages_succeeded",
                                 "pages_failed", "thp_succeeded", "table_full", "untimed_calls",
                                 "nesting_too_deep", "recursion_misses", "type", "timestamp",
                                 "epoch_ms"},
                   set(js_lines[0]))
    numa = sum(j.get("pages_succeeded", 0) for j in js_lines)
    if len(nodes) == 1:
        # Compaction migrated thousands of pages in the window, none of them numa_misplaced.
        t.check_eq("NUMA_migrations with one NUMA node (compaction is not counted)",
                   [0, 0, 0], [int(r[1]) for r in rows])
        t.check_eq("JSON numa pages with one NUMA node", 0, numa)
    else:
        w.check(t, "NUMA pages succeeded", "numa_pages_migrated", numa)
    err = per_call.result.stderr
    t.check_eq("-c exit status", 0, per_call.result.rc)
    t.check_in("-c -v says which per-call hook was used",
               "migrate_misplaced_folio/migrate_misplaced_page (per call): using ", err, "stderr")
    if "(per call): using migrate_tracepoints" in err:
        t.check_in("-c fell back, and says so without -v", "cannot time migrate_misplaced_folio",
                   err, "stderr")
        t.check_in("-v: why fentry was not used", "not migrate_misplaced_folio/fentry: ", err,
                   "stderr")
        t.check_in("-v: why kprobes were not used", "not migrate_misplaced_folio/kprobe: ", err,
                   "stderr")


@scenario("numamove_numa_misplaced")
def _(t: Test):
    nodes = numa_nodes()
    if len(nodes) < 2:
        skip(f"this machine has one NUMA node ({nodes}): NUMA-misplaced migrations cannot "
             "happen here (the VM harness with two nodes runs this scenario)")
    src, dst = nodes[1], nodes[0]
    src_cpus, dst_cpus = node_cpus(src), node_cpus(dst)
    if not src_cpus or not dst_cpus:
        skip(f"nodes {src} and {dst} need a usable CPU each (have {src_cpus}, {dst_cpus})")
    balancing = "/proc/sys/kernel/numa_balancing"
    if not os.path.exists(balancing):
        skip("the kernel has no automatic NUMA balancing (CONFIG_NUMA_BALANCING)")
    saved = read_file(balancing).strip()
    try:
        write_file(balancing, "1")
        w = Windows()
        with Workload("numa_misplacer", "--from-cpu", str(src_cpus[0]), "--to-cpu",
                      str(dst_cpus[0]), "--mib", "128", "--seconds", "15", held=True) as wl:
            with Tool("numamove", "-j") as default, \
                    Tool("numamove", "--reasons", "-j") as reasons, \
                    Tool("numamove", "-P", "-j", "-p", str(wl.pid)) as per_process, \
                    Tool("numamove", "--per-call", "-j", "-v", "-m") as per_call:
                w.mark()
                wl.release()
                wl.wait_done(60)
                w.mark()
        w.mark()
    finally:
        write_file(balancing, saved)
    lines = default.result.json_lines()
    calls = sum(j["numa_migrations"] for j in lines)
    pages = sum(j["pages_succeeded"] for j in lines)
    log(f"default view: {calls} NUMA migrations, {pages} pages")
    t.check_ge("NUMA migrations seen (128 MiB used from the other node for 15 s)", 100, calls)
    w.check(t, "default view: pages succeeded", "numa_pages_migrated", pages)
    sums = reason_sums(reasons.result)
    w.check(t, "-r numa_misplaced pages", "numa_pages_migrated",
            sums.get("numa_misplaced", {}).get("succeeded", 0))
    mine = [r for j in per_process.result.json_lines() for r in j.get("processes", [])]
    t.check_eq("-P -p: only the workload", {wl.pid}, {r["pid"] for r in mine})
    t.check_ge("-P -p: the workload's NUMA pages", 1, sum(r["succeeded"] for r in mine))
    err = per_call.result.stderr
    if "(per call): using migrate_tracepoints" not in err:
        pc = sum(j["numa_migrations"] for j in per_call.result.json_lines())
        t.check_ge("-c: calls of migrate_misplaced_* >= numa_misplaced migrate_pages() calls",
                   calls - 2, pc, "every such call comes from migrate_misplaced_*")
    t.check_eq("-c -m exit status", 0, per_call.result.rc)


@scenario("numamove_bad_input")
def _(t: Test):
    cases = shared_bad_arguments(interval_count=True) + [
        (["--per-call", "--reasons"], "--per-call times NUMA balancing's calls only"),
        (["-m", "--reasons"], "-m adds columns to the default view"),
    ]
    check_bad_arguments(t, "numamove", cases)
    check_help(t, "numamove", (
        "--reasons", "--per-process", "--pid", "--hist", "--per-call", "--task-moves",
        "--timestamp", "--duration", "--json", "--verbose", "interval", "count",
        "NUMA_migrations_ms", "MEMLAT_DISABLE_HOOKS"))


def binary_mappings(pid: int) -> list[tuple[int, str]]:
    """(Rss in KiB, VmFlags) of each mapping of the process's own binary that was never
    writable: code and read-only data (not RELRO, made read-only after relocation: "ac")."""
    exe = os.path.realpath(f"/proc/{pid}/exe")
    mappings, current = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+$", fields[0]):
                current = ("w" not in fields[1] and len(fields) >= 6
                           and fields[5] == exe) and [0, ""]
            elif current and fields[0] == "Rss:":
                current[0] = int(fields[1])
            elif current and fields[0] == "VmFlags:":
                current[1] = " ".join(fields[1:])
                if "ac" not in fields[1:]:
                    mappings.append((current[0], current[1]))
    return mappings


@scenario("numamove_binary_pages_mapped_singly")
def _(t: Test):
    # memlat turns the kernel's 64 KiB fault-around off for its own code and read-only data
    # (tools/main.cpp): those mappings carry userfaultfd's write-protect flag ("uw" in
    # smaps) and hold only the pages the tool touched, fewer than with
    # MEMLAT_DISABLE_FEATURES=uffd_wp_async, which plays a kernel before 6.7.
    release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    if release < (6, 7):
        skip("asynchronous userfaultfd write-protect (UFFD_FEATURE_WP_ASYNC) needs Linux 6.7")
    with Tool("numamove") as tool:
        singly = binary_mappings(tool.proc.pid)
    with Tool("numamove", env={"MEMLAT_DISABLE_FEATURES": "uffd_wp_async"}) as tool:
        around = binary_mappings(tool.proc.pid)
    t.check_eq("exit status", 0, tool.result.rc)
    t.check_ge("read-only mappings of the binary (code, read-only data)", 2, len(singly))
    t.check(all("uw" in f.split() for _, f in singly),
            "every read-only mapping of the binary registered for write-protect",
            "uw in each VmFlags", [f for _, f in singly])
    t.check(not any("uw" in f.split() for _, f in around),
            "with uffd_wp_async disabled, none registered", "no uw", [f for _, f in around])
    rss_singly, rss_around = sum(r for r, _ in singly), sum(r for r, _ in around)
    # Measured here: 0.6 MiB page by page against 1.4-1.5 MiB with fault-around.
    t.check_le("the binary's resident pages, page by page vs with fault-around (KiB)",
               rss_around * 0.75, rss_singly)


if __name__ == "__main__":
    sys.exit(main())
