"""Host checks of memlat exporter's VM scenario (tests/vm/scenarios/exporter.sh): one process
with every tool on a Debian kernel, scraped once. Every tool runs (memlat_tool_up 1) but
tlbflush on arm64 and lockstall before 5.11 (no mmap_lock tracepoints), which must be down
with their one-line reason while the others serve; each
running tool exports its own families and its self metrics with its tool label, and the
exporter its own cost: the process_* families, each tool's BPF map memory, and (--bpf-stats:
BPF_ENABLE_STATS, Linux 5.8) its programs' runs."""
from __future__ import annotations

import os
import re
import subprocess

from memlat_test import Test, log
from vmcheck import Block, checker, show_hooks

TOOLS = ("cachestat", "compactsnoop", "drsnoop", "lockstall", "memstall", "numamove", "oomwhy",
         "tlbflush")
# A family of each tool's own, present from the first scrape.
OWN_FAMILY = {"tlbflush": "memlat_tlb_remote_shootdowns_total",
              "drsnoop": "memlat_reclaim_stalls_total",
              "compactsnoop": "memlat_compaction_kcompactd_wakes_total",
              "numamove": "memlat_numa_task_moves_total",
              "cachestat": "memlat_page_cache_misses_total",
              "memstall": "memlat_memstall_stalls_total",
              "oomwhy": "memlat_oom_kills_total",
              "lockstall": "memlat_mmap_lock_slow_waits_total"}
# The reason each tool that may be down gives, where it is down.
DOWN_REASONS = {"tlbflush": "arm64 has no TLB-shootdown IPIs",
                "lockstall": "It needs the mmap_lock tracepoints (Linux 5.11"}
PROMTOOL = "/usr/bin/promtool"


@checker("exporter.all")
def all_tools(t: Test, b: Block) -> None:
    res = b.tool("tool")
    show_hooks(res.stderr)
    t.check_eq("memlat exporter exit status after SIGINT", 0, res.rc)
    t.check_eq("wget of /metrics: exit status", "0", b.file("wget.rc").strip())
    text = b.file("metrics")
    arm64 = b.meta.get("arch") == "aarch64"
    release = re.match(r"(\d+)\.(\d+)", b.facts.get("kernel", ""))
    old_kernel = release is not None and (int(release.group(1)), int(release.group(2))) < (5, 11)
    down = ({"tlbflush"} if arm64 else set()) | ({"lockstall"} if old_kernel else set())
    up = {m.group(1): int(m.group(2))
          for m in re.finditer(r'^memlat_tool_up\{tool="(\w+)"\} (\d+)$', text, re.M)}
    t.check_eq("memlat_tool_up of every tool (tlbflush down on arm64, lockstall before 5.11)",
               {n: int(n not in down) for n in TOOLS}, up)
    for name in TOOLS:
        error = re.search(rf'^memlat_tool_error_info\{{tool="{name}",error="([^"]*)"', text, re.M)
        if name in down:
            t.check(error is not None and DOWN_REASONS[name] in error.group(1),
                    f"{name}: memlat_tool_error_info gives {name}'s own reason",
                    DOWN_REASONS[name], error.group(1)[:120] if error else "none")
            t.check_in(f"{name}: stderr says it does not run",
                       f"memlat exporter: {name} does not run: ", res.stderr, "stderr")
            continue
        if error:
            log(f"  {name} down: {error.group(1)}")
        found = re.search(rf"^{OWN_FAMILY[name]}(\{{| )", text, re.M) is not None
        t.check(found, f"{name}: {OWN_FAMILY[name]} exported", "present",
                "present" if found else "missing")
        t.check_in(f"{name}: its self metrics carry its tool label",
                   f'memlat_lost_events_total{{tool="{name}"}}', text, "/metrics")
        maps = [float(m.group(1)) for m in re.finditer(
            rf'^memlat_bpf_map_memory_bytes\{{tool="{name}",map="[^"]*"\}} (\S+)$', text, re.M)]
        t.check(len(maps) > 0 and min(maps) > 0, f"{name}: the memory of each of its BPF maps",
                "> 0 bytes each", maps[:6])
        runs = [float(m.group(1)) for m in re.finditer(
            rf'^memlat_bpf_program_runs_total\{{tool="{name}",program="[^"]*"\}} (\S+)$', text,
            re.M)]
        t.check(len(runs) > 0, f"{name}: its programs' runs (--bpf-stats)", "a series each",
                f"{len(runs)} series")
    rss = re.search(r"^process_resident_memory_bytes (\S+)$", text, re.M)
    t.check(rss is not None and float(rss.group(1)) > 0, "process_resident_memory_bytes",
            "> 0", rss.group(0) if rss else "missing")
    ran = sum(float(m.group(1)) for m in re.finditer(
        r'^memlat_bpf_program_runs_total\{[^}]*\} (\S+)$', text, re.M))
    t.check_ge("runs of the exporter's programs, all tools (--bpf-stats counts them)", 1, ran)
    if os.access(PROMTOOL, os.X_OK):
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                              text=True, timeout=30)
        t.check_eq(f"promtool check metrics ({(lint.stdout + lint.stderr).strip()[:200]!r})",
                   0, lint.returncode)
