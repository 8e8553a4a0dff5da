#!/usr/bin/env python3
"""`memlat exporter` left running under churn: does its memory stay flat, and its series bounded?

For --minutes (then it stops by itself), with one exporter running every tool with per-cgroup
labels (bench/exporter_scale.py's options, `--max-series 2000`):
- cgroup churn: --cgroup-rate memory cgroups a second are made, each with a 4 MiB limit and one
  file_reader reading a 16 MiB file through it once (memcg reclaim: stalls that memstall and
  drsnoop count per cgroup), then removed;
- process churn: --exit-rate short processes a second fork and exit in the bench's own cgroup.
Every --every seconds (a Prometheus at 15 s) it scrapes and records the scrape time, the number
of series, the exporter's RSS (VmRSS), its BPF maps' bytes (memlock, /proc/PID/fdinfo), and
what the exporter says it lost (lost events, full tables, dropped series). At the end: the
samples, the RSS slope after --warmup-minutes (KiB per hour, least squares), and the largest
series count. Not a test: it never fails on a figure.

    sudo python3 bench/exporter_soak.py --build-dir build [--minutes 60] [--cgroup-rate 100]
        [--exit-rate 1000]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "runtime"))
from exporter_scale import EXPORTER_ARGS, Server  # noqa: E402
from memlat_test import remove_dir_retrying  # noqa: E402 (the runtime tests' helpers)
from top_scale import bpf_of, log, memory_hierarchy, status_kib  # noqa: E402


class Churn:
    """The cgroup and process churn, on threads of its own, until stop()."""

    def __init__(self, build: str, scratch: str, cgroup_rate: float, exit_rate: float):
        self.root, self.v1 = memory_hierarchy()
        self.parent = os.path.join(self.root, f"memlat_bench_soak_{os.getpid()}")
        os.mkdir(self.parent)
        if not self.v1:
            with open(os.path.join(self.parent, "cgroup.subtree_control"), "w") as f:
                f.write("+memory")
        self.reader = os.path.join(build, "tests", "file_reader")
        # A file per worker, dropped from the page cache before each read: pages already
        # cached (charged to whoever read them first) would be hits, with nothing to reclaim.
        self.files = []
        for worker in range(4):
            path = os.path.join(scratch, f"soak{worker}.dat")
            with open(path, "wb") as f:
                for _ in range(16):
                    f.write(os.urandom(1 << 20))
                os.fsync(f.fileno())
            self.files.append(path)
        self.stopping = threading.Event()
        self.cgroups_made = 0
        self.exits = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._cgroups, args=(cgroup_rate / 4, i))
                        for i in range(4)]
        self.threads.append(threading.Thread(target=self._exits, args=(exit_rate,)))
        for t in self.threads:
            t.start()

    def _paced(self, rate: float, step) -> None:
        start, done = time.monotonic(), 0
        while not self.stopping.is_set():
            step(done)
            done += 1
            ahead = done / rate - (time.monotonic() - start)
            if ahead > 0:
                self.stopping.wait(ahead)

    def _cgroups(self, rate: float, worker: int) -> None:
        limit = "memory.limit_in_bytes" if self.v1 else "memory.max"

        def one(n: int) -> None:
            d = os.path.join(self.parent, f"w{worker}_{n}")
            os.mkdir(d)
            with open(os.path.join(d, limit), "w") as f:
                f.write(str(4 << 20))
            fd = os.open(self.files[worker], os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
            subprocess.run([self.reader, "--file", self.files[worker], "--cgroup", d,
                            "--passes", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            remove_dir_retrying(d, pause=0.02)
            with self.lock:
                self.cgroups_made += 1
        self._paced(rate, one)

    def _exits(self, rate: float) -> None:
        def one(_: int) -> None:
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            with self.lock:
                self.exits += 1
        self._paced(rate, one)

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join()
        for d in os.listdir(self.parent):
            path = os.path.join(self.parent, d)
            if os.path.isdir(path):
                try:
                    os.rmdir(path)
                except OSError as e:
                    log(f"exporter_soak: {path} left: {e}")
        try:
            os.rmdir(self.parent)
        except OSError as e:
            log(f"exporter_soak: {self.parent} left: {e}")


def total(text: str, name: str) -> float:
    return sum(float(m.group(1)) for m in
               re.finditer(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--warmup-minutes", type=float, default=5)
    ap.add_argument("--cgroup-rate", type=float, default=100)
    ap.add_argument("--exit-rate", type=float, default=1000)
    ap.add_argument("--every", type=float, default=15)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("exporter_soak: run as root (it makes cgroups and loads BPF)")
    build = os.path.abspath(args.build_dir)
    scratch = tempfile.mkdtemp(prefix="memlat_exporter_soak_", dir=build)
    server = Server([os.path.join(build, "memlat"), *EXPORTER_ARGS], None)
    churn = None
    samples = []
    try:
        churn = Churn(build, scratch, args.cgroup_rate, args.exit_rate)
        start = time.monotonic()
        deadline = start + 60 * args.minutes
        while time.monotonic() < deadline:
            time.sleep(max(0.0, start + (len(samples) + 1) * args.every - time.monotonic()))
            t0 = time.monotonic()
            text = server.scrape()
            scrape_ms = 1e3 * (time.monotonic() - t0)
            pid = server.proc.pid
            with churn.lock:
                made, exits = churn.cgroups_made, churn.exits
            samples.append({
                "minute": (t0 - start) / 60, "scrape_ms": scrape_ms,
                "series": sum(1 for line in text.splitlines() if line and line[0] != "#"),
                "rss_kib": status_kib(pid, "VmRSS"), "map_bytes": bpf_of(pid)[0],
                "lost": total(text, "memlat_lost_events_total"),
                "table_full": total(text, "memlat_table_full_total"),
                "dropped": total(text, "memlat_series_dropped_total"),
                "cgroups": made, "exits": exits})
            s = samples[-1]
            log(f"{s['minute']:6.1f} min: scrape {scrape_ms:6.1f} ms, {s['series']} series, RSS "
                f"{s['rss_kib']} KiB, maps {s['map_bytes'] >> 10} KiB, lost {s['lost']:.0f}, "
                f"full {s['table_full']:.0f}, dropped {s['dropped']:.0f}; {made} cgroups, "
                f"{exits} exits so far")
    finally:
        if churn:
            churn.stop()
        server.close()
        shutil.rmtree(scratch, ignore_errors=True)
    if not samples:
        return 0
    minutes = samples[-1]["minute"]
    print(f"\n{minutes:.1f} min of churn: {samples[-1]['cgroups']} memory cgroups made and "
          f"removed ({samples[-1]['cgroups'] / (60 * minutes):.0f}/s), "
          f"{samples[-1]['exits']} process exits ({samples[-1]['exits'] / (60 * minutes):.0f}/s); "
          f"{os.cpu_count()} CPUs, Linux {os.uname().release}")
    steady = [s for s in samples if s["minute"] >= args.warmup_minutes]
    if len(steady) >= 2:
        xs = [s["minute"] / 60 for s in steady]
        ys = [s["rss_kib"] for s in steady]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        den = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0
        print(f"RSS after {args.warmup_minutes:g} min: {min(ys)}-{max(ys)} KiB, slope "
              f"{slope:+.0f} KiB per hour")
    print(f"series: at most {max(s['series'] for s in samples)}; scrape: median "
          f"{statistics.median(s['scrape_ms'] for s in samples):.1f} ms, max "
          f"{max(s['scrape_ms'] for s in samples):.1f} ms; BPF maps "
          f"{samples[-1]['map_bytes'] / 2**20:.2f} MiB; lost events "
          f"{samples[-1]['lost']:.0f}, full-table events {samples[-1]['table_full']:.0f}, "
          f"label sets folded into other {samples[-1]['dropped']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
