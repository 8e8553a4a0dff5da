#!/usr/bin/env python3
"""Runtime tests of oomwhy: real OOM kills in small memory cgroups of the tests' own, each
checked against the kernel's own report of it in the kernel log (/dev/kmsg, read from where
it stood when the scenario began; oomwhy never reads it) and the cgroup's own counters.

The kernel's report and how it is parsed: oom_oracle.py.

A memory cgroup's failcnt counts the charges that found it at its limit, so a fresh cgroup's
memory failcnt says whether the memory counter (memory.limit_in_bytes / memory.max) fired or,
on cgroup v1, memory+swap (memory.memsw.limit_in_bytes: memory's failcnt stays 0; 6.13+
keeps no failcnt for memory+swap itself).

The workloads are anon_toucher processes: a victim that maps 40 MiB, touches it and waits
(--linger: pause(), no allocation), made the preferred victim with oom_score_adj 1000, and a
trigger that touches 40 MiB more in a 64 MiB cgroup. Which task triggers is the kernel's
business (a victim's own kernel allocation may find the limit first): the checks compare with
the log, not with the plan. Machines with vm.panic_on_oom set are skipped: a kill there
would be a panic.
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tolerances import FTRACE_WINDOW_TIME  # noqa: E402
from memlat_test import (FtraceOracle, MemoryCgroup, Test, Tool, Workload, binary,  # noqa: E402
                         check_bad_arguments, check_help, hierarchy_path, log, main, read_file,
                         oracle_durations_ns, remove_cgroup_dir, scenario, skip, write_file)
from oom_oracle import (KernelLog, check_against_log, oom_kill_count,  # noqa: E402
                        require_oom_kills_allowed, rss_slack_kb)

MIB = 1 << 20
LIMIT = 64 * MIB


class ChildCgroup:
    """A cgroup below `parent` (a MemoryCgroup), without a limit of its own."""

    def __init__(self, parent: MemoryCgroup, name: str):
        self.parent = parent
        self.path = os.path.join(parent.path, name)
        self.in_hierarchy = hierarchy_path(self.path)
        self.enabled = False

    def __enter__(self) -> "ChildCgroup":
        if not self.parent.v1:
            write_file(os.path.join(self.parent.path, "cgroup.subtree_control"), "+memory")
            self.enabled = True
        os.mkdir(self.path)
        return self

    def __exit__(self, *exc) -> None:
        remove_cgroup_dir(self.path)
        if self.enabled:
            write_file(os.path.join(self.parent.path, "cgroup.subtree_control"), "-memory")


def provoke_oom(victim_cgroup: str, trigger_cgroup: str) -> int:
    """The victim (40 MiB, oom_score_adj 1000) and the trigger (40 MiB more) in 64 MiB: one
    kill. Returns the victim's pid."""
    with Workload("anon_toucher", "--mb", "40", "--cgroup", victim_cgroup, "--linger") as victim:
        victim.wait_done(30)
        write_file(f"/proc/{victim.pid}/oom_score_adj", "1000")
        with Workload("anon_toucher", "--mb", "40", "--cgroup", trigger_cgroup) as trigger:
            trigger.wait_done(60)
            trigger.wait_exit(30)
        deadline = time.monotonic() + 10
        while victim.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return victim.pid


def run_oom(t: Test, *tool_args: str, victim_cgroup: str, trigger_cgroup: str,
            count_cgroup: str) -> tuple[list[dict], list[dict], int]:
    """oomwhy -j around one provoked OOM: (its reports, the kernel log's, the oom_kill delta of
    `count_cgroup`)."""
    before = oom_kill_count(count_cgroup)
    klog = KernelLog()
    try:
        with Tool("oomwhy", "-j", *tool_args) as tool:
            provoke_oom(victim_cgroup, trigger_cgroup)
            time.sleep(1.5)  # the victim's exit is in its report, due a second after the kill
        kernel = klog.reports()
    finally:
        klog.close()
    res = tool.result
    t.check_eq("oomwhy exit status", 0, res.rc)
    reports = [r for r in res.json_lines() if r.get("type") == "kill"]
    return reports, kernel, oom_kill_count(count_cgroup) - before


def check_one_kill(t: Test, reports: list[dict], kernel: list[dict], delta: int) -> None:
    t.require(len(kernel) >= 1, "kills in the kernel log", ">= 1", len(kernel))
    t.check_eq("reports = kills in the kernel log", len(kernel), len(reports))
    t.check_eq("reports = the cgroup's oom_kill count delta", delta, len(reports))
    for r in reports:
        log(f"  report: {r['constraint']}, oom_memcg {r['oom_memcg']}, limit {r['limit']}, "
            f"cgroups {r['cgroups']}, lead-up {r['lead_up']}")
    for k in kernel:
        log(f"  kernel: {k}")
    by_pid = {r["victim"]["tid"]: r for r in reports}
    for k in kernel:
        ours = by_pid.get(k["killed"]["pid"])
        if t.check(ours is not None, f"a report for the kill of {k['killed']['pid']}",
                   "present", sorted(by_pid)):
            check_against_log(t, ours, k, rss_slack=rss_slack_kb(os.uname().release,
                                                                 os.cpu_count() or 1))
            t.check(ours["after_kill"]["victim_exit_ns"] is not None,
                    "the victim's exit is in the report", "a time", None)


@scenario("oomwhy_memcg_limit_vs_kernel_log", btf_file=True, unprivileged=True)
def _(t: Test):
    """A leaf cgroup's memory limit fires: the report against the kernel's."""
    require_oom_kills_allowed()
    with MemoryCgroup("oom", limit=LIMIT) as cg:
        reports, kernel, delta = run_oom(t, victim_cgroup=cg.path, trigger_cgroup=cg.path,
                                         count_cgroup=cg.path)
    check_one_kill(t, reports, kernel, delta)
    for r in reports:
        t.check_eq("the limit that fired", "memory.limit_in_bytes" if cg.v1 else "memory.max",
                   r["limit"])
        t.check_eq("constraint", "memcg", r["constraint"])
        if cg.v1:
            # Every kernel takes the memcg OOM lock on cgroup v1: the level is the kernel's.
            t.check_eq("the fired level found by the kernel's OOM lock", "oom_lock",
                       r["oom_memcg_from"])


@scenario("oomwhy_parent_limit_vs_kernel_log")
def _(t: Test):
    """The parent's limit fires while the tasks are in a child without one: oom_memcg is the
    parent, task_memcg the child."""
    require_oom_kills_allowed()
    with MemoryCgroup("oomparent", limit=LIMIT) as parent, ChildCgroup(parent, "child") as child:
        reports, kernel, delta = run_oom(t, victim_cgroup=child.path, trigger_cgroup=child.path,
                                         count_cgroup=child.path)
        parent_kills = oom_kill_count(parent.path)
    check_one_kill(t, reports, kernel, delta)
    for r in reports:
        t.check_eq("the cgroup whose limit fired: the parent", parent.in_hierarchy, r["oom_memcg"])
        t.check_eq("the victim's cgroup: the child", child.in_hierarchy, r["victim"]["cgroup"])
        t.check_eq("levels reported: the child, then the parent",
                   [child.in_hierarchy, parent.in_hierarchy], [c["cgroup"] for c in r["cgroups"]])
    # cgroup v1 counts a kill in the victim's cgroup only; v2 in every level above it too.
    t.check_eq("the parent's oom_kill count", 0 if parent.v1 else len(reports), parent_kills)


@scenario("oomwhy_memsw_limit_vs_kernel_log")
def _(t: Test):
    """cgroup v1 with memory.memsw.limit_in_bytes at the memory limit: try_charge_memcg
    charges memory+swap first, so that counter fires (its failcnt grows, memory's does not)."""
    require_oom_kills_allowed()
    with MemoryCgroup("oommemsw", limit=LIMIT) as cg:
        memsw = os.path.join(cg.path, "memory.memsw.limit_in_bytes")
        if not cg.v1 or not os.path.exists(memsw):
            skip("needs cgroup v1 with swap accounting (memory.memsw.limit_in_bytes)")
        write_file(memsw, str(LIMIT))
        reports, kernel, delta = run_oom(t, victim_cgroup=cg.path, trigger_cgroup=cg.path,
                                         count_cgroup=cg.path)
    check_one_kill(t, reports, kernel, delta)
    for r, k in zip(reports, kernel):
        t.check_eq("the limit that fired", "memory.memsw.limit_in_bytes", r["limit"])
        if "counters" in k:
            t.check_eq("memory's failcnt (memory+swap fired first)", 0,
                       k["counters"]["memory"]["failcnt"])


def start_to_dev_full() -> subprocess.Popen:
    """oomwhy with its stdout on /dev/full, once it is ready."""
    with open("/dev/full", "w") as full:
        proc = subprocess.Popen([binary("oomwhy")], stdin=subprocess.DEVNULL, stdout=full,
                                stderr=subprocess.PIPE, env=dict(os.environ, MEMLAT_READY="1"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line or line.strip() == b"memlat: ready":
            break
    return proc


@scenario("oomwhy_text_oomkill_and_report_dir")
def _(t: Test):
    """The text report, BCC's oomkill line and --report-dir hold the same kill."""
    require_oom_kills_allowed()
    directory = f"/tmp/memlat_oomwhy_{os.getpid()}"
    os.mkdir(directory)
    try:
        with MemoryCgroup("oomtext", limit=LIMIT) as cg:
            klog = KernelLog()
            full = start_to_dev_full()
            with Tool("oomwhy", "--report-dir", directory) as text, \
                    Tool("oomwhy", "--oomkill") as short:
                victim = provoke_oom(cg.path, cg.path)
                time.sleep(1.5)
            try:
                _, full_err = full.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                full.kill()
                _, full_err = full.communicate()
            kernel = klog.reports()
            klog.close()
        files = sorted(os.listdir(directory))
        t.require(len(kernel) == 1, "kills in the kernel log", "1", len(kernel))
        killed = kernel[0]["killed"]
        line = re.compile(r'^\d\d:\d\d:\d\d Triggered by PID (\d+) \("([^"]*)"\), OOM kill of '
                          r'PID (\d+) \("([^"]*)"\), (\d+) pages, loadavg: \S+ \S+ \S+ \S+ \S+$')
        for name, tool in (("text", text), ("--oomkill", short)):
            lines = [l for l in tool.result.stdout.splitlines() if line.match(l)]
            t.require(len(lines) == 1, f"{name}: oomkill lines", "1", lines)
            m = line.match(lines[0])
            t.check_eq(f"{name}: victim", (killed["pid"], killed["comm"]),
                       (int(m.group(3)), m.group(4)))
            t.check_eq(f"{name}: pages (the limit that fired, in pages)",
                       LIMIT // os.sysconf("SC_PAGE_SIZE"), int(m.group(5)))
        t.check_eq("--oomkill prints the line only", 1, len(short.result.stdout.splitlines()))
        t.check_in("text: the victim's memory", f"anon-rss {killed['anon_rss']} KiB",
                   text.result.stdout)
        t.check_in("text: why", f"memory cgroup {cg.in_hierarchy} at its", text.result.stdout)
        t.check_eq("--report-dir: one .txt and one .json",
                   [".json", ".txt"], sorted(os.path.splitext(f)[1] for f in files))
        for f in files:
            content = open(os.path.join(directory, f)).read()
            if f.endswith(".txt"):
                t.check_eq("the kept text report is the one printed", text.result.stdout.strip(),
                           content.strip())
            else:
                t.check_eq("the kept JSON report's victim", killed["pid"],
                           json.loads(content)["victim"]["tid"])
        t.check_eq("victim pid as the workload said", victim, killed["pid"])
        # The report could not be written: the run ends there, with the reason.
        t.check_eq("oomwhy >/dev/full: exit status after the kill", 1, full.returncode)
        t.check_in("oomwhy >/dev/full: says why", "No space left on device",
                   full_err.decode(errors="replace"), "stderr")
    finally:
        for f in os.listdir(directory):
            os.unlink(os.path.join(directory, f))
        os.rmdir(directory)


@scenario("oomwhy_full_report_dir")
def _(t: Test):
    """--report-dir on a file system that is full (a 4 KiB tmpfs, filled): each report that
    cannot be kept is said, and still printed; the exit summary counts the failures."""
    require_oom_kills_allowed()
    directory = f"/tmp/memlat_oomwhy_full_{os.getpid()}"
    os.mkdir(directory)
    mounted = False
    try:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "memlat_full", directory],
                          capture_output=True).returncode != 0:
            skip("cannot mount a tmpfs to fill")
        mounted = True
        with open(os.path.join(directory, "filler"), "wb") as f:
            try:
                f.write(b"x" * 65536)
            except OSError:
                pass  # full: what was wanted
        with MemoryCgroup("oomfull", limit=LIMIT) as cg:
            with Tool("oomwhy", "-j", "--report-dir", directory) as tool:
                provoke_oom(cg.path, cg.path)
                time.sleep(1.5)
        res = tool.result
        kills = [r for r in res.json_lines() if r.get("type") == "kill"]
        summary = [r for r in res.json_lines() if r.get("type") == "summary"]
        t.check_eq("exit status", 0, res.rc)
        t.check_eq("reports on stdout", 1, len(kills))
        t.check_in("each report that could not be kept is said",
                   f"could not keep the report in {directory}/oom-", res.stderr, "stderr")
        t.check_in("with the reason", "No space left on device", res.stderr, "stderr")
        t.require(len(summary) == 1, "the exit summary", "1", len(summary))
        t.check_ge("report_dir_errors in the summary", 1, summary[0]["report_dir_errors"])
        t.check_eq("no partial report left behind", ["filler"], sorted(os.listdir(directory)))
    finally:
        if mounted:
            subprocess.run(["umount", directory])
        os.rmdir(directory)


@scenario("oomwhy_lead_up_vs_ftrace")
def _(t: Test):
    """The lead-up (the trigger's reclaim rounds, and memstall's stall history with
    --lead-up) against an ftrace instance recording the trigger's reclaim windows and its
    oom:mark_victim: the windows that ended before the kill are the lead-up. (Delay
    accounting cannot be cut at the kill: the trigger goes on reclaiming while the victim
    exits, 20 more rounds in one run.)"""
    require_oom_kills_allowed()
    with MemoryCgroup("oomlead", limit=LIMIT) as cg, \
            Workload("anon_toucher", "--mb", "40", "--cgroup", cg.path, "--linger",
                     held=True) as trigger:
        klog = KernelLog()
        with FtraceOracle(["vmscan/mm_vmscan_memcg_reclaim_begin",
                           "vmscan/mm_vmscan_memcg_reclaim_end",
                           "vmscan/mm_vmscan_direct_reclaim_begin",
                           "vmscan/mm_vmscan_direct_reclaim_end",
                           "oom/mark_victim"], trigger.pid) as oracle, \
                Tool("oomwhy", "-j", "--lead-up", "10") as tool:
            with Workload("anon_toucher", "--mb", "40", "--cgroup", cg.path,
                          "--linger") as victim:
                victim.wait_done(30)
                write_file(f"/proc/{victim.pid}/oom_score_adj", "1000")
                trigger.release()
                trigger.wait_done(60)
                time.sleep(1.5)
            trace = oracle.stop()
        kernel = klog.reports()
        klog.close()
    reports = [r for r in tool.result.json_lines() if r.get("type") == "kill"]
    t.require(len(reports) == 1 and len(kernel) == 1, "one kill, reported",
              "1 and 1", (len(reports), len(kernel)))
    if kernel[0].get("trigger_pid") != trigger.pid:
        skip(f"the kernel's trigger was {kernel[0].get('trigger_pid')}, not the toucher "
             f"{trigger.pid} (a kernel allocation of the victim found the limit first)")
    kills = trace["mark_victim"]
    t.require(len(kills) == 1, "the trigger's mark_victim in the ftrace oracle", "1", len(kills))
    kill_ts = float(kills[0]["_ts"])
    report = reports[0]
    # The history runs to when oomwhy read memstall's table, a little after the kill.
    read_ts = kill_ts + report["lead_up"].get("stall_history", {}).get("read_after_kill_ns", 0) / 1e9
    windows, to_read, longest = [], [], 0
    for kind in ("memcg", "direct"):
        begins = trace[f"mm_vmscan_{kind}_reclaim_begin"]
        ends = trace[f"mm_vmscan_{kind}_reclaim_end"]
        for d, e in zip(oracle_durations_ns(begins, ends), ends):
            longest = max(longest, d)
            if float(e["_ts"]) < kill_ts:
                windows.append(d)
            if float(e["_ts"]) < read_ts:
                to_read.append(d)
    lead = report["lead_up"]
    stalls = lead.get("stall_history")
    t.require(stalls is not None, "the lead-up's stall history", "present", sorted(lead))
    mine = [x for x in stalls["most_stalled"] if x["tid"] == trigger.pid]
    t.require(len(mine) == 1, "the trigger among the most stalled", "1",
              [x["tid"] for x in stalls["most_stalled"]])
    history_ns = mine[0]["causes"]["memcg"]["ns"] + mine[0]["causes"]["direct"]["ns"]
    log(f"  ftrace: {len(windows)} reclaim windows before the kill, {sum(windows)} ns, "
        f"{len(to_read)} to oomwhy's read, {sum(to_read)} ns; "
        f"oomwhy: {lead['reclaim_rounds']} rounds, {lead['reclaim_ns']} ns; memstall's "
        f"history: {history_ns} ns")
    t.check_eq("the history's domain: the cgroup that fired", cg.in_hierarchy, stalls["domain"])
    t.check_eq("reclaim rounds before the kill vs the ftrace windows (exact)", len(windows),
               lead["reclaim_rounds"])
    # ftrace prints microseconds (each window +/- 1 us), and the tracers see the same
    # tracepoints a little apart: 3 us a window, as memstall's tests allow.
    slack = FTRACE_WINDOW_TIME.abs * 1000 * max(1, len(windows))
    t.check_close("reclaim time before the kill vs the ftrace windows", sum(windows),
                  lead["reclaim_ns"], rel_tol=FTRACE_WINDOW_TIME.rel, abs_tol=slack)
    # The history ends at the read: the windows that ended by then, and perhaps one that
    # ended while the table was read (the time is taken before it).
    t.check_ge("memstall's history of the trigger vs the ftrace windows to the read",
               sum(to_read) - slack, history_ns)
    t.check_le("memstall's history of the trigger vs the ftrace windows to the read (and "
               "one ending during the read)", sum(to_read) + longest + slack, history_ns)
    def ns(causes: dict) -> int:
        return sum(c["ns"] for c in causes.values())
    total = sum(ns(second["causes"]) for second in stalls["seconds"])
    t.check_eq("the per-second history adds up to its total", ns(stalls["causes"]), total)
    t.check_le("seconds of history (--lead-up 10, and the second of the kill)", 11,
               len(stalls["seconds"]))


@scenario("oomwhy_storm_loses_nothing")
def _(t: Test):
    """An OOM storm: 10 batches of 12 processes of 24 MiB each, holding their memory, in a
    64 MiB cgroup: two fit, so about ten are killed a batch, within milliseconds of each
    other. Every kill the cgroup counts is reported, none invented."""
    require_oom_kills_allowed()
    with MemoryCgroup("oomstorm", limit=LIMIT) as cg:
        before = oom_kill_count(cg.path)
        klog = KernelLog()
        with Tool("oomwhy", "-j") as tool:
            for batch in range(10):
                procs = [Workload("anon_toucher", "--mb", "24", "--cgroup", cg.path, "--linger")
                         for _ in range(12)]
                try:
                    for p in procs:
                        p.__enter__()
                    # Each has touched its memory (and lingers) or was killed.
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline and not all(
                            p._pid_line.is_set() or p.proc.poll() is not None for p in procs):
                        time.sleep(0.05)
                finally:
                    for p in procs:
                        p.__exit__()
            time.sleep(1.5)
            status = read_file(f"/proc/{tool.proc.pid}/status", "")
            m = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
            peak_rss_kb = int(m.group(1)) if m else 0
            log(f"  oomwhy's peak RSS: {peak_rss_kb} kB")
        kills = oom_kill_count(cg.path) - before
        kernel = klog.reports()
        overrun = klog.overrun
        klog.close()
    res = tool.result
    reports = [r for r in res.json_lines() if r.get("type") == "kill"]
    log(f"  {kills} kills counted by the cgroup, {len(kernel)} in the kernel log "
        f"(overrun: {overrun}), {len(reports)} reported")
    # 12 processes of 24 MiB where two fit: ten kills a batch unless the kernel kills one
    # before it touched all of its memory (then one more fits); 40 is far below that.
    t.require(kills >= 40, "kills in the storm (enough to be one)", ">= 40", kills)
    t.check_eq("reports = the cgroup's oom_kill count", kills, len(reports))
    if not overrun:
        t.check_eq("reported victims = the kernel log's",
                   sorted(k["killed"]["pid"] for k in kernel),
                   sorted(r["victim"]["tid"] for r in reports))
    t.check("lost" not in res.stderr, "no record lost", "no loss message", res.stderr[-300:])
    t.check_eq("oomwhy exit status", 0, res.rc)
    # Its memory through the storm: the kernel's high-water mark of its RSS, read before it
    # stopped. What it keeps is bounded (1,024 victims for the reaper's late steps, the lead-up's
    # 31 seconds); 64 MiB is far above what a run takes (the binary maps ~3 MB).
    t.check_le("peak RSS through the storm (VmHWM, MiB)", 64, peak_rss_kb / 1024)


@scenario("oomwhy_bad_input")
def _(t: Test):
    check_help(t, "oomwhy", ["--report-dir", "--oomkill", "--json", "--prometheus",
                             "Triggered by PID"])
    check_bad_arguments(t, "oomwhy", [
        (["--oomkill", "-j"], "--oomkill prints BCC's text line; it does not go with -j"),
        (["--prometheus", "9999", "--report-dir", "/tmp"], "--prometheus serves counts only"),
        (["--nonsense"], "unrecognized option"),
        (["5"], "unexpected argument '5'"),
        (["--buffer-size", "3K"], "--buffer-size 3K"),
        (["--prometheus", "127.0.0.1:0", "--buffer-size", "4K"],
         "--buffer-size sizes the buffer of the reports"),
    ])
    # A directory that cannot take reports is said at start; the tool runs on.
    with Tool("oomwhy", "--report-dir", "/proc/memlat-none", "-d", "1", wait_exit=True) as tool:
        pass
    res = tool.result
    t.check_eq("unwritable --report-dir: exit status", 0, res.rc)
    t.check_in("unwritable --report-dir: said at start",
               "cannot write reports to /proc/memlat-none", res.stderr, "stderr")


if __name__ == "__main__":
    sys.exit(main())
