#!/usr/bin/env python3
"""What lockstall costs a program that maps and unmaps in a loop on every CPU (will-it-scale's
mmap1, our own: tests/lock_convoy --no-reader --writers 1 --mprotecters 0, a process per
CPU): every iteration takes its address space's mmap_lock for writing twice, so each
iteration runs lockstall's three programs twice. The loop's iterations a second, with the
tool and without it, runs interleaved (none, lockstall, lockstall --prometheus, perf lock
contention where this host's perf can run it), --reps of each, medians and the ratio to none.
Not a test: it prints a table and never fails on a figure.

    sudo python3 bench/lockstall_cost.py --build-dir build [--seconds 3] [--reps 5]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time


def loop_rate(build: str, seconds: float) -> float:
    """mmap/munmap iterations a second of one run of the loop on every CPU: a process per CPU,
    as will-it-scale's mmap1 in its processes mode (each its own address space: no process
    waits for another, so the figure is the cost of the lock operations themselves)."""
    cpus = os.cpu_count() or 1
    procs = [subprocess.Popen([os.path.join(build, "tests", "lock_convoy"), "--no-reader",
                               "--map-mb", "1", "--writers", "1", "--mprotecters", "0",
                               "--seconds", str(seconds)],
                              stdout=subprocess.PIPE, text=True) for _ in range(cpus)]
    total = 0
    for p in procs:
        out, _ = p.communicate()
        total += int(re.search(r"maps=(\d+)", out).group(1))
    return total / seconds


def start(argv: list[str], env: dict | None = None) -> subprocess.Popen:
    """A tracer started and, for memlat's tools, ready (MEMLAT_READY=1)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MEMLAT_READY": "1", **(env or {})})
    if "memlat" in os.path.basename(argv[0]) or os.path.basename(argv[0]) == "lockstall":
        for line in proc.stderr:
            if line.startswith("memlat: ready"):
                break
    else:
        time.sleep(1.0)  # perf has no ready line: its tracepoints are on within a second
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(2)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def perf_lock_contention() -> tuple[list[str] | None, str]:
    """perf lock contention's command line (BPF, -b, where perf was built with it; else its
    tracepoint mode), or None and why."""
    perf = shutil.which("perf")
    if perf is None:
        return None, "no perf"
    probe = subprocess.run([perf, "lock", "contention", "-b", "-a", "--", "true"],
                           capture_output=True, text=True)
    if "BUILD_BPF_SKEL" not in probe.stderr:
        return [perf, "lock", "contention", "-b", "-a"], ""
    return None, "this perf was built without BPF skeletons (no -b)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    lockstall = os.path.join(build, "lockstall")
    conditions: dict[str, list[str] | None] = {
        "none": None,
        "lockstall": [lockstall],
        "lockstall --prometheus": [lockstall, "--prometheus", "127.0.0.1:0"],
    }
    perf, why = perf_lock_contention()
    if perf:
        conditions["perf lock contention -b"] = perf
    else:
        print(f"perf lock contention -b left out: {why}", file=sys.stderr)
    rates: dict[str, list[float]] = {name: [] for name in conditions}
    loop_rate(build, 1.0)  # warm-up
    for rep in range(args.reps):
        for name, argv in conditions.items():
            tracer = start(argv) if argv else None
            try:
                rates[name].append(loop_rate(build, args.seconds))
            finally:
                if tracer:
                    stop(tracer)
        print(f"rep {rep + 1}: " + ", ".join(f"{n} {r[-1]:,.0f}/s" for n, r in rates.items()),
              file=sys.stderr)
    base = statistics.median(rates["none"])
    print(f"{'condition':<26} {'iterations/s (median)':>22} {'ratio':>7}  (of {args.reps} runs "
          f"of {args.seconds:g} s, {os.cpu_count()} CPUs)")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"{name:<26} {median:>22,.0f} {median / base:>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
