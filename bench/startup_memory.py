#!/usr/bin/env python3
"""Start-up cost of each tool's default mode: exec -> ready, peak RSS and binary size.

    bench/startup_memory.py [--build-dir build] [--runs 7] [--json] [--multicall] [TOOL ...]
    bench/startup_memory.py --tool-args "--prometheus 127.0.0.1:0" drsnoop ... exporter

Each run starts the tool with MEMLAT_READY=1 (it prints "memlat: ready" on stderr once its
programs are attached), times exec -> that line, lets it trace for --hold seconds, reads VmHWM
from /proc/PID/status (the peak resident set of the process itself; wait4's ru_maxrss would
also count the forked copy of this Python process) and stops it with SIGINT. It prints the
median start-up, the largest VmHWM over the runs and the stripped binary's size. Needs root.
The tools run one after the other, never side by side, so that they do not share the CPUs.
Each tool runs through its link (BUILD/TOOL -> memlat); --multicall adds a row per tool run as
`memlat TOOL`, the same binary called by its own name.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

TOOLS = ["tlbflush", "drsnoop", "compactsnoop", "numamove", "cachestat", "memstall", "oomwhy"]
READY = b"memlat: ready"


def vm_hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cpu_ns(pid: int) -> int:
    """CPU time the process has used (all its threads, /proc/PID/task/*/schedstat), in ns."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0  # gone
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that exited since the listing: its time went with it
    return total


def one_run(argv: list[str], env_extra: dict[str, str], hold: float,
            timeout: float) -> tuple[float, float, int]:
    """(seconds from exec to the ready line, CPU seconds used by then, VmHWM in KiB)."""
    env = dict(os.environ, MEMLAT_READY="1", **env_extra)
    binary = argv[0]
    ready = threading.Event()
    ready_at: list[float] = []
    tail: list[bytes] = []
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    cpu_at_ready: list[int] = []

    def read() -> None:
        for line in iter(proc.stderr.readline, b""):
            if not ready_at and READY in line:
                ready_at.append(time.monotonic())
                cpu_at_ready.append(cpu_ns(proc.pid))
                ready.set()
            tail[:] = (tail + [line])[-5:]

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not ready.wait(timeout):
            raise RuntimeError(f"{binary} never printed 'memlat: ready':\n" +
                               b"".join(tail).decode(errors="replace"))
        time.sleep(hold)
        hwm = vm_hwm_kib(proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(2)
    return ready_at[0] - t0, cpu_at_ready[0] / 1e9, hwm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tools", nargs="*", default=TOOLS)
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--hold", type=float, default=0.3,
                        help="seconds each run traces before VmHWM is read (default 0.3)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--multicall", action="store_true",
                        help="also run each tool as `memlat TOOL`")
    parser.add_argument("--tool-args", default="",
                        help="arguments for every tool, e.g. '--btf FILE' (default: none, the "
                             "default mode)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="environment for the tools, e.g. MEMLAT_DISABLE_FEATURES=kernel_btf")
    args = parser.parse_args()
    env_extra = dict(e.split("=", 1) for e in args.env)
    if os.geteuid() != 0:
        sys.exit("startup_memory: needs root (the tools load BPF programs)")
    rows = []
    # "exporter": `memlat exporter` with every tool (--tool-args "--prometheus ADDR" runs
    # the tools and it alike: the exporter takes --prometheus for --web.listen-address).
    def command_of(tool):
        if tool == "exporter":
            return [os.path.join(args.build_dir, "memlat"), "exporter"]
        return [os.path.join(args.build_dir, tool)]
    runs = [(tool, command_of(tool)) for tool in args.tools]
    if args.multicall:
        memlat = os.path.join(args.build_dir, "memlat")
        runs += [(f"memlat {tool}", [memlat, tool]) for tool in args.tools if tool != "exporter"]
    for tool, command in runs:
        binary = command[0]
        if not os.access(binary, os.X_OK):
            sys.exit(f"startup_memory: {binary} missing; build first")
        argv = command + args.tool_args.split()
        one_run(argv, env_extra, 0.0, 30.0)  # warm the page cache and the kernel's BTF
        startups, cpus, hwms = [], [], []
        for _ in range(args.runs):
            startup, cpu, hwm = one_run(argv, env_extra, args.hold, 30.0)
            startups.append(startup * 1000)
            cpus.append(cpu * 1000)
            hwms.append(hwm)
        rows.append(dict(tool=tool, startup_ms_median=statistics.median(startups),
                         cpu_to_ready_ms_median=statistics.median(cpus),
                         startup_ms_min=min(startups), startup_ms_max=max(startups),
                         peak_rss_kib_max=max(hwms), peak_rss_kib_min=min(hwms),
                         binary_bytes=os.path.getsize(binary)))
    if args.json:
        json.dump(dict(runs=args.runs, kernel=os.uname().release, tools=rows), sys.stdout,
                  indent=2)
        print()
        return 0
    extra = " ".join([args.tool_args] + args.env).strip()
    print(f"kernel {os.uname().release}, {args.runs} runs per tool (after one warm-up run)"
          + (f", with {extra}" if extra else ""))
    print(f"{'tool':<22}{'exec->ready ms':>16}{'(min-max)':>16}{'CPU ms':>8}{'peak RSS MB':>13}"
          f"{'(MiB)':>8}{'binary MB':>11}")
    for r in rows:
        spread = f"{r['startup_ms_min']:.1f}-{r['startup_ms_max']:.1f}"
        print(f"{r['tool']:<22}{r['startup_ms_median']:>16.1f}{spread:>16}"
              f"{r['cpu_to_ready_ms_median']:>8.1f}"
              f"{r['peak_rss_kib_max'] * 1024 / 1e6:>13.2f}{r['peak_rss_kib_max'] / 1024:>8.2f}"
              f"{r['binary_bytes'] / 1e6:>11.2f}")
    print("exec->ready: median wall time; CPU ms: median CPU time the tool used until ready "
          "(user + system, what contention from other processes does not inflate); peak RSS: "
          "the largest VmHWM of the runs in decimal MB (10^6 bytes, the unit of issue 22's goal) "
          "and in MiB (2^20 bytes); binary: the file's size in MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
