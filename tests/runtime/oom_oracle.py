"""The kernel's own report of each OOM kill, parsed from its log, and the checks of an oomwhy
report against it: shared by the runtime tests (test_oomwhy.py, reading /dev/kmsg) and the VM
tests (check_oomwhy.py, reading the guest's dmesg).

The kernel writes one report per kill (mm/oom_kill.c, mm/memcontrol.c):
  COMM invoked oom-killer: gfp_mask=0x...(...), order=N, oom_score_adj=A   the trigger
  CPU: C UID: U PID: P Comm: COMM ...                                       (dump_stack: its TID)
  memory: usage XkB, limit YkB, failcnt F                                   the OOM memcg's
  memory+swap: usage XkB, limit YkB, failcnt F                              counters (v1)
  oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/A,task_memcg=/A/B,task=COMM,pid=P,uid=U
  Memory cgroup out of memory: Killed process P (COMM) total-vm:XkB, anon-rss:XkB,
      file-rss:XkB, shmem-rss:XkB, UID:U pgtables:XkB oom_score_adj:A
The header (the first four) is rate-limited by the kernel (10 in 5 s); the last two never.
"""
import errno
import os
import re
import time

from memlat_test import (CGROUP_V1_MEMORY, CGROUP_V2_ROOT, Test, hierarchy_path, log, read_file,
                         skip)

HEADER = re.compile(r"^(?P<comm>.*) invoked oom-killer: gfp_mask=(?P<gfp>0x[0-9a-f]+)\((?P<gfp_names>[^)]*)\), order=(?P<order>-?\d+), oom_score_adj=(?P<adj>-?\d+)")
CPU = re.compile(r"^CPU: \d+ (?:UID: \d+ )?PID: (?P<pid>\d+) Comm: ")
COUNTER = re.compile(r"^(?P<name>memory|memory\+swap|swap): usage (?P<usage>\d+)kB, limit (?P<limit>\d+)kB, failcnt (?P<failcnt>\d+)")
KILLED = re.compile(r"Killed process (?P<pid>\d+) \((?P<comm>.*)\) total-vm:(?P<total_vm>\d+)kB, anon-rss:(?P<anon_rss>\d+)kB, file-rss:(?P<file_rss>\d+)kB, shmem-rss:(?P<shmem_rss>\d+)kB, UID:(?P<uid>\d+) pgtables:(?P<pgtables>\d+)kB oom_score_adj:(?P<adj>-?\d+)")
# dmesg's "[   12.345678] " before each message.
DMESG_TIME = re.compile(r"^\[\s*\d+\.\d+\] ")


def require_oom_kills_allowed() -> None:
    if os.geteuid() != 0:
        skip("needs root: memory cgroups and the kernel log")
    if read_file("/proc/sys/vm/panic_on_oom", "0").strip() != "0":
        skip("vm.panic_on_oom is set: an OOM kill would panic this machine")


def oom_reports(messages: list[str]) -> list[dict]:
    """One dict per "Killed process" line, with what the header before it said (when the
    kernel printed one)."""
    reports, current = [], {}
    for msg in messages:
        msg = DMESG_TIME.sub("", msg)
        if m := HEADER.match(msg):
            current = {"trigger_comm": m["comm"], "gfp": m["gfp_names"],
                       "order": int(m["order"]), "trigger_adj": int(m["adj"])}
        elif (m := CPU.match(msg)) and "trigger_comm" in current \
                and "trigger_pid" not in current:
            current["trigger_pid"] = int(m["pid"])
        elif m := COUNTER.match(msg):
            current.setdefault("counters", {})[m["name"]] = {
                k: int(m[k]) for k in ("usage", "limit", "failcnt")}
        elif msg.startswith("oom-kill:"):
            current["oom_kill"] = dict(kv.split("=", 1) if "=" in kv else (kv, "")
                                       for kv in msg[len("oom-kill:"):].split(","))
        elif m := KILLED.search(msg):
            current["killed"] = {k: (m[k] if k == "comm" else int(m[k]))
                                 for k in KILLED.groupindex}
            reports.append(current)
            current = {}
    return reports


def kmsg_records(fd: int) -> tuple[list[tuple[int, str]], bool]:
    """The records of /dev/kmsg open at `fd` (non-blocking) from its position on: (the
    kernel's monotonic time in us, the message's first line) each, and whether records were
    overwritten before they were read."""
    out, overrun = [], False
    while True:
        try:
            record = os.read(fd, 8192).decode(errors="replace")
        except OSError as e:
            if e.errno == errno.EAGAIN:
                break
            if e.errno == errno.EPIPE:  # overwritten before we read it
                overrun = True
                continue
            raise
        header, _, text = record.partition(";")
        out.append((int(header.split(",")[2]), text.split("\n", 1)[0]))
    return out, overrun


class KernelLog:
    """The kernel log's records written since this object was made (/dev/kmsg opened and
    moved to its end)."""

    def __init__(self):
        try:
            self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            skip(f"cannot read the kernel log (/dev/kmsg: {e.strerror}): it is the oracle")
        os.lseek(self.fd, 0, os.SEEK_END)
        self.overrun = False

    def messages(self) -> list[str]:
        records, overrun = kmsg_records(self.fd)
        self.overrun |= overrun
        return [text for _, text in records]

    def reports(self) -> list[dict]:
        return oom_reports(self.messages())

    def close(self) -> None:
        os.close(self.fd)


# mm/oom_kill.c's oom_rs: the headers of at most 10 reports in a window of 5 s
# (DEFAULT_RATELIMIT_INTERVAL, _BURST); a window starts at the first report after the last
# one ended.
OOM_HEADER_WINDOW_S = 5.0


def oom_kill_count(path: str) -> int:
    """The cgroup's own count of OOM kills: memory.oom_control's (v1) or memory.events' (v2)
    oom_kill."""
    for name in ("memory.oom_control", "memory.events"):
        text = read_file(os.path.join(path, name), "")
        if m := re.search(r"^oom_kill (\d+)$", text, re.M):
            return int(m.group(1))
    return 0


def wait_for_whole_oom_reports() -> float:
    """Waits until the kernel will print the next kills' reports whole (the oom-kill: line
    with oom_memcg is in the rate-limited header): until a header window has passed since the
    last kill in the kernel log, which ends any window that kill was in. A test that provokes
    several kills after others (the suite runs OOM tests back to back) needs it: 10 kills in 5 s
    leave the next ones without their oom_memcg. Returns the seconds waited."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return 0.0  # KernelLog() says why it cannot be the oracle
    try:
        records, _ = kmsg_records(fd)
    finally:
        os.close(fd)
    kills = [us for us, text in records
             if "Killed process" in text or text.startswith("oom-kill:")]
    last_us = max(kills, default=None)
    if last_us is None:
        return 0.0
    # The log's times are the kernel's monotonic clock, as CLOCK_MONOTONIC is; a margin for
    # the two being read a little apart.
    wait = last_us / 1e6 + OOM_HEADER_WINDOW_S + 0.2 - time.clock_gettime(time.CLOCK_MONOTONIC)
    if wait > 0:
        time.sleep(wait)
    return max(wait, 0.0)


def rss_slack_kb(kernel_release: str, cpus: int, page_kb: int = 4) -> int:
    """How far the log's "Killed process" rss may be from what oom:mark_victim saw (the
    tracepoint's fields and oomwhy read the same counters the same way).
    - Before 6.2 each thread kept up to 64 page-fault events of rss in its own cache
      (SPLIT_RSS_COUNTING, TASK_RSS_EVENTS_THRESH) and folds them into the mm's counters when it
      next faults or exits: the victim, woken by its SIGKILL, exits on the other CPU while the
      trigger goes from mark_victim to printing the line (seen: 3 pages on 6.1).
    - From 6.2 the counters are per-CPU counters. Up to 6.18 the report reads their shared
      count as mark_victim does: exact (6.12, 6.18). Later kernels' report sums the CPUs' parts
      (7.3: 13 to 53 pages more than the count), each under the counter's batch,
      max(32, 2 * CPUs) pages."""
    m = re.match(r"(\d+)\.(\d+)", kernel_release)
    version = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    if version < (6, 2):
        return 64 * page_kb
    if version < (6, 19):
        return 0
    return cpus * max(32, 2 * cpus) * page_kb


def check_against_log(t: Test, ours: dict, kernel: dict, page_kb: int = 4,
                      rss_slack: int = 0) -> None:
    """One report against the kernel's report of the same kill. `rss_slack` (kB): what the
    victim's rss may grow between the kill and the log's line (rss_slack_kb())."""
    killed = kernel["killed"]
    victim = ours["victim"]
    t.check_eq("victim pid (Killed process)", killed["pid"], victim["tid"])
    t.check_eq("victim comm", killed["comm"], victim["comm"])
    for ours_key, log_key in (("total_vm_kb", "total_vm"), ("anon_rss_kb", "anon_rss"),
                              ("file_rss_kb", "file_rss"), ("shmem_rss_kb", "shmem_rss"),
                              ("pgtables_kb", "pgtables")):
        # The same counters read at the same moment (mark_victim is right before the line);
        # only a victim running on another CPU could change them in between, and it sleeps.
        if rss_slack and log_key.endswith("_rss"):
            got = victim.get(ours_key, -1)
            t.check(abs(killed[log_key] - got) <= rss_slack, f"victim {log_key} (kB)",
                    f"{killed[log_key]} within {rss_slack} (rss_slack_kb())", got)
        else:
            t.check_eq(f"victim {log_key} (kB)", killed[log_key], victim.get(ours_key))
    t.check_eq("victim uid", killed["uid"], victim.get("uid"))
    t.check_eq("victim oom_score_adj", killed["adj"], victim.get("oom_score_adj"))
    oom_kill = kernel.get("oom_kill")
    if oom_kill is None:
        log("  the kernel printed no header for this kill (rate-limited): victim checks only")
        return
    t.check_eq("constraint", oom_kill["constraint"], ours["kernel_constraint"])
    if "task_memcg" in oom_kill and "cgroup" in victim:
        t.check_eq("task_memcg (the victim's cgroup)", oom_kill["task_memcg"], victim["cgroup"])
    if "trigger_pid" in kernel:
        t.check_eq("trigger (the task that ran the OOM killer)", kernel["trigger_pid"],
                   ours["trigger"]["tid"])
        t.check_eq("trigger comm", kernel["trigger_comm"], ours["trigger"]["comm"])
    t.check_eq("order of the allocation", kernel["order"], ours["lead_up"]["order"])
    if oom_kill["constraint"] != "CONSTRAINT_MEMCG":
        t.check_eq("a global OOM names no memory cgroup", None, ours["oom_memcg"])
        t.check_ge("direct reclaim rounds before the kill", 1, ours["lead_up"]["direct_rounds"])
        return
    t.check_eq("oom_memcg (the cgroup whose limit fired)", oom_kill.get("oom_memcg"),
               ours["oom_memcg"])
    t.check_ge("memcg reclaim rounds before the kill (the kernel retries 16 times)", 1,
               ours["lead_up"]["memcg_rounds"])
    counters = kernel.get("counters", {})
    fired = next((c for c in ours["cgroups"]
                  if c["cgroup"] == ours["oom_memcg"]), None)
    t.require(fired is not None, "the fired level among the reported cgroups", "present", None)
    if ours["limit"] == "memory.memsw.limit_in_bytes":
        log_counter, usage, limit = counters.get("memory+swap"), fired.get(
            "memsw_usage_kb"), fired.get("memsw_limit_kb")
    else:
        log_counter, usage, limit = counters.get("memory"), fired["usage_kb"], fired["limit_kb"]
    t.require(log_counter is not None, "the kernel's counter of the limit that fired", "printed",
              counters)
    t.check_eq("limit that fired (kB)", log_counter["limit"], limit)
    # The log reads the usage before the victim is sent SIGKILL, oomwhy right after
    # (mark_victim follows the signal): in between, the victim woken on the other CPU may
    # already free its memory (5.10's guest: 17-18 pages), and so may the victim of an earlier
    # kill still exiting (7.3's guest: 20 MiB, a second kill 2 ms after the first). So the
    # usage at the kill is at most the log's and the failed charge (8 pages); how much lower
    # is logged, not bounded.
    log(f"  usage at the kill: {usage} kB, the log's {log_counter['usage']} kB")
    t.check_le("usage at the kill vs the log's (kB, the failed charge above at most)",
               log_counter["usage"] + 8 * page_kb, usage)
    if ours["limit"] != "memory.memsw.limit_in_bytes":
        # (6.13+ keeps no failcnt for memory+swap: that case checks memory's instead.)
        t.check_ge("the memory counter's failcnt (charges that found it at its limit)", 1,
                   log_counter["failcnt"])


