#!/usr/bin/env python3
"""Side-by-side benchmark of tlbflush against an empty BPF program and the bpftrace one-liner.

Measures, in one run (python3 stdlib only; needs root, bpftool and optionally bpftrace):
  1. BPF cost per event (run_time_ns / run_cnt with kernel.bpf_stats_enabled=1) of
     bench_empty (the floor), tlbflush count mode, tlbflush -t and the bpftrace one-liner,
     while tests/tlb_workload runs a fixed number of iterations. Contenders are interleaved
     (A B C D A B C D ...) and the median over the repetitions is reported.
  2. Startup (exec to readiness line / bpftrace's "Attaching" line) and peak RSS, taken from
     the same runs.
  3. The size of each tool binary in the build directory.

It prints numbers and ratios; it never fails on a timing (it is not a test). The exit status
is non-zero only when the benchmark itself could not run.

  python3 bench/run_bench.py --build-dir build [--json results.json]
"""

import argparse
import ctypes
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
ONE_LINER = "tracepoint:tlb:tlb_flush { @[cpu, args->reason] = count(); }"
TOOLS = ["tlbflush", "drsnoop", "compactsnoop", "numamove", "cachestat"]
# Targets from the issue, reported (not asserted).
TARGET_OVER_FLOOR_NS = 40.0

_children = set()          # live Popen objects, killed on any exit path
_libc = None


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- child handling

def _set_pdeathsig():
    # Runs in the child between fork and exec: die with the benchmark even if it is SIGKILLed.
    if _libc is not None:
        _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class Child:
    """A contender process with its output lines time-stamped by reader threads."""

    def __init__(self, name, argv, ready_stream, ready_text, stdout_wanted):
        self.name = name
        self.ready_text = ready_text
        self.ready_at = None
        self.ready = threading.Event()
        self.lines = []            # (stream, monotonic time, text)
        self.hwm_kib = 0           # last VmHWM read from /proc/PID/status
        self.rusage = None
        self.status = None
        env = dict(os.environ, MEMLAT_READY="1")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout_wanted else subprocess.DEVNULL,
            stderr=subprocess.PIPE, preexec_fn=_set_pdeathsig)
        _children.add(self)
        self.threads = []
        streams = [("stderr", self.proc.stderr)]
        if stdout_wanted:
            streams.append(("stdout", self.proc.stdout))
        for label, f in streams:
            t = threading.Thread(target=self._read, args=(label, f, label == ready_stream),
                                 daemon=True)
            t.start()
            self.threads.append(t)

    def _read(self, label, f, watch):
        for raw in iter(f.readline, b""):
            now = time.monotonic()
            text = raw.decode(errors="replace").rstrip("\n")
            if len(self.lines) < 2000:
                self.lines.append((label, now, text))
            if watch and self.ready_at is None and self.ready_text in text:
                self.ready_at = now
                self.ready.set()
        f.close()

    def alive(self):
        return self.status is None and self._reap(os.WNOHANG) is None

    def _reap(self, flags):
        # os.wait4 (not Popen.wait) so that the child's rusage is kept.
        if self.status is not None:
            return self.status
        try:
            pid, status, ru = os.wait4(self.proc.pid, flags)
        except ChildProcessError:
            self.status = -1
            self.proc.returncode = -1
            return self.status
        if pid == 0:
            return None
        self.status, self.rusage = status, ru
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        return status

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready.wait(0.05):
                return self.ready_at - self.t0
            if not self.alive():
                break
        return None

    def sample_hwm(self):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        self.hwm_kib = max(self.hwm_kib, int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            pass

    def stop(self, grace=5.0):
        """SIGINT, wait up to `grace` seconds (sampling VmHWM meanwhile), then SIGKILL."""
        if self.status is None:
            self.sample_hwm()
            try:
                self.proc.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + grace
            while self._reap(os.WNOHANG) is None and time.monotonic() < deadline:
                self.sample_hwm()
                time.sleep(0.01)
            if self.status is None:
                try:
                    self.proc.kill()
                except ProcessLookupError:
                    pass
                self._reap(0)
        for t in self.threads:
            t.join(2)
        _children.discard(self)

    def tail(self, n=6):
        return "\n".join(f"    [{s}] {t}" for s, _, t in self.lines[-n:])


def cleanup_children():
    for c in list(_children):
        try:
            c.stop(grace=2.0)
        except Exception as e:  # keep going: every child must be stopped
            log(f"warning: stopping {c.name}: {e}")


# --------------------------------------------------------------------------- bpftool

def prog_table():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    return {p["id"]: p for p in json.loads(out or b"[]")}


def find_new_progs(before, name, kind, timeout=5.0):
    """Ids of programs loaded since `before`; filtered by name (ours) or type (bpftrace)."""
    deadline = time.monotonic() + timeout
    while True:
        table = prog_table()
        new = {i: p for i, p in table.items() if i not in before}
        if name:
            picked = [i for i, p in new.items() if p.get("name") == name[:15]]
        else:
            picked = [i for i, p in new.items() if p.get("type") == kind]
        if picked or time.monotonic() >= deadline:
            return sorted(picked), {i: new[i].get("name") for i in new}
        time.sleep(0.05)


def prog_stats(ids):
    table = prog_table()
    t = sum(table.get(i, {}).get("run_time_ns", 0) for i in ids)
    c = sum(table.get(i, {}).get("run_cnt", 0) for i in ids)
    return t, c


# --------------------------------------------------------------------------- measurements

def run_workload(path, iterations):
    r = subprocess.run([path, "--iterations", str(iterations)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"tlb_workload failed ({r.returncode}): {r.stderr.decode()[-400:]}")


def one_run(c, iterations, workload):
    """Start contender c, run the workload, return a dict of measurements."""
    before = set(prog_table())
    child = Child(c["name"], c["argv"], c["ready_stream"], c["ready_text"], c["stdout"])
    res = {"contender": c["name"]}
    try:
        startup = child.wait_ready(30.0)
        if startup is None:
            raise RuntimeError(f"{c['name']} never became ready "
                               f"(exit status {child.status}):\n{child.tail()}")
        res["startup_s"] = startup
        ids, new_names = find_new_progs(before, c.get("prog_name"), c.get("prog_type"))
        if not ids:
            raise RuntimeError(f"{c['name']}: no new program found (new: {new_names})")
        if c.get("settle"):
            time.sleep(c["settle"])
        res["prog_ids"] = ids
        res["prog_names"] = [new_names[i] for i in ids]
        t0, n0 = prog_stats(ids)
        run_workload(workload, iterations)
        t1, n1 = prog_stats(ids)
        if not child.alive():
            raise RuntimeError(f"{c['name']} exited during the workload "
                               f"(exit status {child.status}):\n{child.tail()}")
        res["run_time_ns"], res["run_cnt"] = t1 - t0, n1 - n0
        res["ns_per_run"] = (t1 - t0) / (n1 - n0) if n1 > n0 else None
        child.sample_hwm()
    finally:
        child.stop()
    res["peak_rss_kib"] = child.hwm_kib or None
    res["ru_maxrss_kib"] = child.rusage.ru_maxrss if child.rusage else None
    return res


def maxrss_floor():
    """ru_maxrss of a trivial child spawned like the contenders: on Linux exec folds the
    forked copy of this Python process into the child's maxrss, so wait4's ru_maxrss can
    never be below this."""
    p = subprocess.Popen(["/bin/true"], preexec_fn=_set_pdeathsig)
    _, _, ru = os.wait4(p.pid, 0)
    p.returncode = 0
    return ru.ru_maxrss


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"kernel": platform.release(), "cpu_model": model, "nproc": os.cpu_count(),
            "machine": platform.machine()}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec, unit=""):
    return "-" if x is None else format(x, spec) + unit


def ratio(a, b):
    return a / b if a is not None and b else None


# --------------------------------------------------------------------------- main

def locate_build_dir(arg):
    if os.path.isdir(arg):
        return os.path.abspath(arg)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    alt = os.path.join(repo, arg)
    if os.path.isdir(alt):
        return alt
    sys.exit(f"run_bench: build directory {arg!r} not found")


def main():
    global _libc
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default="build", help="CMake build directory (default: build)")
    ap.add_argument("--iterations", type=int, default=50000,
                    help="tlb_workload iterations per measurement (default: 50000)")
    ap.add_argument("--reps", type=int, default=7,
                    help="interleaved repetitions per contender (default: 7)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    ap.add_argument("--no-bpftrace", action="store_true", help="skip the bpftrace one-liner")
    args = ap.parse_args()

    if os.geteuid() != 0:
        sys.exit("run_bench: needs root (bpf_stats_enabled, BPF programs)")
    if not shutil.which("bpftool"):
        sys.exit("run_bench: bpftool not found")
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        _libc = None

    bd = locate_build_dir(args.build_dir)
    bench_empty = os.path.join(bd, "bench_empty")
    tlbflush = os.path.join(bd, "tlbflush")
    workload = os.path.join(bd, "tests", "tlb_workload")
    for p in (bench_empty, tlbflush, workload):
        if not os.access(p, os.X_OK):
            sys.exit(f"run_bench: {p} missing; build first (cmake --build {args.build_dir})")

    notes = []
    ours = dict(ready_stream="stderr", ready_text="memlat: ready", stdout=False)
    contenders = [
        dict(ours, name="bench_empty", argv=[bench_empty], prog_name="empty_tlb_flush"),
        dict(ours, name="tlbflush", argv=[tlbflush], prog_name="tlb_flush_btf"),
        dict(ours, name="tlbflush -t", argv=[tlbflush, "-t"], prog_name="tlb_flush_btf"),
    ]
    bpftrace = shutil.which("bpftrace")
    if args.no_bpftrace:
        notes.append("bpftrace one-liner skipped (--no-bpftrace)")
    elif not bpftrace:
        notes.append("bpftrace one-liner skipped: bpftrace not found in PATH")
    else:
        # "Attaching 1 probe..." is printed just before attaching: wait for the new program
        # to show up, then a short settle.
        contenders.append(dict(name="bpftrace", argv=[bpftrace, "-e", ONE_LINER],
                               ready_stream="stdout", ready_text="Attaching", stdout=True,
                               prog_type="tracepoint", settle=0.3))

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    # Explicitly, since a shell starting us in the background may have set SIGINT to SIG_IGN.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, on_term)

    with open(STATS_SYSCTL) as f:
        old_stats = f.read().strip()
    results = {"machine": machine(), "iterations": args.iterations, "reps": args.reps,
               "build_dir": bd, "notes": notes, "runs": []}
    started = time.monotonic()
    try:
        try:
            with open(STATS_SYSCTL, "w") as f:
                f.write("1")
            results["ru_maxrss_floor_kib"] = maxrss_floor()
            # Warm-up (page cache, BTF parsing caches), not counted.
            log("run_bench: warm-up")
            for c in contenders:
                try:
                    one_run(c, 1000, workload)
                except Exception as e:
                    log(f"run_bench: warm-up of {c['name']} failed: {e}")
            for rep in range(args.reps):
                for c in contenders:
                    try:
                        r = one_run(c, args.iterations, workload)
                        r["rep"] = rep
                        log(f"run_bench: rep {rep + 1}/{args.reps} {c['name']:<12} "
                            f"{fmt(r['ns_per_run'], '.1f', ' ns/run')}  "
                            f"startup {fmt(r['startup_s'] * 1000, '.0f', ' ms')}")
                    except Exception as e:
                        r = {"contender": c["name"], "rep": rep, "error": str(e)}
                        log(f"run_bench: rep {rep + 1} {c['name']}: {e}")
                    results["runs"].append(r)
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # no second Ctrl-C during cleanup
            try:
                cleanup_children()
            finally:
                with open(STATS_SYSCTL, "w") as f:
                    f.write(old_stats)
                log(f"run_bench: restored kernel.bpf_stats_enabled={old_stats}")
    except KeyboardInterrupt:
        log("run_bench: interrupted")
        return 130
    results["elapsed_s"] = time.monotonic() - started

    # ----------------------------------------------------------------------- summary
    summary = {}
    for c in contenders:
        rs = [r for r in results["runs"] if r["contender"] == c["name"] and "error" not in r]
        summary[c["name"]] = {
            "ok_runs": len(rs),
            "ns_per_run": median([r["ns_per_run"] for r in rs]),
            "ns_per_run_min": min((r["ns_per_run"] for r in rs if r["ns_per_run"]), default=None),
            "ns_per_run_max": max((r["ns_per_run"] for r in rs if r["ns_per_run"]), default=None),
            "events_per_run": median([r["run_cnt"] for r in rs]),
            "startup_ms": median([r["startup_s"] * 1000 for r in rs]),
            "peak_rss_kib": median([r["peak_rss_kib"] for r in rs]),
            "ru_maxrss_kib": median([r["ru_maxrss_kib"] for r in rs]),
        }
    floor = summary["bench_empty"]["ns_per_run"]
    floor_by_rep = {r["rep"]: r["ns_per_run"] for r in results["runs"]
                    if r["contender"] == "bench_empty" and r.get("ns_per_run")}
    for name, s in summary.items():
        s["over_floor_ns"] = (s["ns_per_run"] - floor
                              if s["ns_per_run"] is not None and floor is not None else None)
        # Median of the per-repetition differences (same rep = same moment of the machine).
        s["over_floor_paired_ns"] = median(
            [r["ns_per_run"] - floor_by_rep[r["rep"]] for r in results["runs"]
             if r["contender"] == name and r.get("ns_per_run") and r["rep"] in floor_by_rep])
    results["summary"] = summary
    sizes = {}
    for t in TOOLS + ["bench_empty"]:
        p = os.path.join(bd, t)
        if os.path.isfile(p):
            sizes[t] = os.path.getsize(p)
    results["binary_sizes"] = sizes

    cm, bt = summary["tlbflush"], summary.get("bpftrace")
    ratios = {}
    if bt:
        ratios["cost_count_over_oneliner"] = ratio(cm["ns_per_run"], bt["ns_per_run"])
        ratios["startup_count_over_oneliner"] = ratio(cm["startup_ms"], bt["startup_ms"])
        ratios["peak_rss_count_over_oneliner"] = ratio(cm["peak_rss_kib"], bt["peak_rss_kib"])
    results["ratios"] = ratios

    m = results["machine"]
    print(f"machine: Linux {m['kernel']} {m['machine']}, {m['cpu_model']}, nproc={m['nproc']}")
    print(f"workload: tlb_workload --iterations {args.iterations}, {args.reps} interleaved reps, "
          f"medians; {results['elapsed_s']:.0f} s total")
    print()
    print(f"{'contender':<13}{'ns/run':>8}{'min-max':>13}{'vs floor':>10}{'paired':>8}{'events':>9}"
          f"{'startup':>10}{'peak RSS':>11}{'ru_maxrss':>11}")
    for name, s in summary.items():
        rng = (f"{s['ns_per_run_min']:.0f}-{s['ns_per_run_max']:.0f}"
               if s["ns_per_run_min"] is not None else "-")
        over = "(floor)" if name == "bench_empty" else fmt(s["over_floor_ns"], "+.1f")
        paired = "" if name == "bench_empty" else fmt(s["over_floor_paired_ns"], "+.1f")
        print(f"{name:<13}{fmt(s['ns_per_run'], '.1f'):>8}{rng:>13}{over:>10}{paired:>8}"
              f"{fmt(s['events_per_run'], '.0f'):>9}{fmt(s['startup_ms'], '.0f', ' ms'):>10}"
              f"{fmt(s['peak_rss_kib'] and s['peak_rss_kib'] / 1024, '.1f', ' MiB'):>11}"
              f"{fmt(s['ru_maxrss_kib'] and s['ru_maxrss_kib'] / 1024, '.1f', ' MiB'):>11}"
              + ("" if s["ok_runs"] == args.reps else f"  ({s['ok_runs']}/{args.reps} runs ok)"))
    print()
    if bt and bt["ok_runs"]:
        print(f"count mode / one-liner: cost {fmt(ratios['cost_count_over_oneliner'], '.2f')}x, "
              f"startup {fmt(ratios['startup_count_over_oneliner'], '.2f')}x, "
              f"peak RSS {fmt(ratios['peak_rss_count_over_oneliner'], '.3f')}x")
        if cm["ns_per_run"] is not None and bt["ns_per_run"] is not None:
            print(f"targets (informational): count mode below the one-liner: "
                  f"{'yes' if cm['ns_per_run'] < bt['ns_per_run'] else 'NO'}; "
                  f"within {TARGET_OVER_FLOOR_NS:.0f} ns of the floor: "
                  f"{'yes' if cm['over_floor_ns'] <= TARGET_OVER_FLOOR_NS else 'NO'} "
                  f"({cm['over_floor_ns']:+.1f} ns)")
    print("binary size: " + ", ".join(f"{t} {n / 1024:.0f} KiB ({n} B)" for t, n in sizes.items()))
    print("vs floor = difference of the medians; paired = median of the per-repetition "
          "differences to bench_empty")
    print(f"startup = exec to 'memlat: ready' (ours) / to bpftrace's 'Attaching' line; peak RSS "
          f"= VmHWM of the process; ru_maxrss (wait4) includes the forked parent's copy, floor "
          f"{results['ru_maxrss_floor_kib'] / 1024:.1f} MiB here")
    for n in notes:
        print(f"note: {n}")
    errors = [r for r in results["runs"] if "error" in r]
    if errors:
        print(f"note: {len(errors)} run(s) failed, first: {errors[0]['error']}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
        print(f"wrote {args.json}")
    ok = all(s["ok_runs"] for s in summary.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
