#!/usr/bin/env python3
"""What one `memlat exporter` costs as the host grows: scrape time, CPU per scrape and between
scrapes, RSS, BPF map bytes and series, on hosts made with N memory cgroups (one sleeping task
each) and T idle threads, beside Debian's prometheus-node-exporter (unpacked into a scratch
directory, never installed) scraped on the same host.

The exporter runs every tool with per-cgroup labels (`--memstall.prometheus-labels cgroup
--drsnoop.prometheus-labels cgroup`, `--max-series 2000` each) and `--bpf-stats`, which is the
fleet owner's most expensive configuration. One reader in a 32 MiB memory cgroup reads a
128 MiB file over and over (bench/top_scale.py's host), so memstall and drsnoop have stalls to
count. For each size: a warm-up, then --scrapes scrapes one after another, each timed (wall)
and charged the CPU the exporter's threads used during it (their schedstat, in ns); then
--idle seconds without a scrape, for the CPU the exporter uses between scrapes. "% core at 15 s"
is that idle rate plus one scrape's CPU every 15 seconds. The exporter's BPF programs' run time
is read from their fdinfo (it is the kernel's, not in the process's CPU). Not a test: it prints
a table and the slope of each cost against the number of cgroups, and never fails on a figure.

    sudo python3 bench/exporter_scale.py --build-dir build [--cgroups 10,100,1000]
        [--threads 10000] [--scrapes 20] [--idle 10] [--no-peer]
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
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from startup_memory import cpu_ns  # noqa: E402
from top_scale import Host, bpf_of, log, status_kib  # noqa: E402

EXPORTER_ARGS = ["exporter", "--memstall.prometheus-labels", "cgroup",
                 "--drsnoop.prometheus-labels", "cgroup", "--memstall.max-series", "2000",
                 "--drsnoop.max-series", "2000", "--bpf-stats",
                 "--web.listen-address", "127.0.0.1:0"]


def node_exporter(scratch: str) -> list[str] | None:
    """Debian's prometheus-node-exporter, unpacked (dpkg -x); None if apt cannot fetch it."""
    d = os.path.join(scratch, "peer")
    os.makedirs(d, exist_ok=True)
    r = subprocess.run(["apt-get", "download", "prometheus-node-exporter"], cwd=d,
                       capture_output=True, text=True)
    if r.returncode != 0:
        log(f"exporter_scale: apt-get download prometheus-node-exporter failed, no peer: "
            f"{r.stderr[-300:]}")
        return None
    root = os.path.join(d, "root")
    for deb in os.listdir(d):
        if deb.endswith(".deb"):
            subprocess.run(["dpkg", "-x", os.path.join(d, deb), root], check=True)
    return [os.path.join(root, "usr/bin/prometheus-node-exporter")]


class Server:
    """A metrics server started for one measurement, stopped by close()."""

    def __init__(self, argv: list[str], port: int | None):
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.err)
        self.port = port
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.port is None:
            if self.proc.poll() is not None:
                break
            self.err.seek(0)
            m = re.search(r"serving Prometheus metrics on https?://[^ ]*:(\d+)/metrics",
                          self.err.read())
            if m:
                self.port = int(m.group(1))
            time.sleep(0.05)
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                self.scrape()
                return
            except OSError:
                time.sleep(0.1)
        self.err.seek(0)
        raise SystemExit(f"exporter_scale: {argv[0]} did not serve: {self.err.read()[-500:]}")

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30) as r:
            return r.read().decode()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(name: str, server: Server, scrapes: int, idle: float, warmup: float) -> dict:
    pid = server.proc.pid
    time.sleep(warmup)
    server.scrape()  # the first scrape maps what later ones reuse
    walls, cpus = [], []
    text = ""
    bpf0 = bpf_of(pid)
    for _ in range(scrapes):
        c0, t0 = cpu_ns(pid), time.monotonic()
        text = server.scrape()
        t1, c1 = time.monotonic(), cpu_ns(pid)
        walls.append(t1 - t0)
        cpus.append((c1 - c0) / 1e9)
    c0, t0 = cpu_ns(pid), time.monotonic()
    time.sleep(idle)
    c1, t1 = cpu_ns(pid), time.monotonic()
    bpf1 = bpf_of(pid)
    idle_rate = (c1 - c0) / 1e9 / (t1 - t0)
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    lost = sum(float(m.group(1)) for m in
               re.finditer(r"^memlat_lost_events_total\{[^}]*\} (\S+)$", text, re.M))
    scrape_cpu = statistics.median(cpus)
    return {"name": name, "scrape_ms": 1e3 * statistics.median(walls),
            "scrape_p90_ms": 1e3 * sorted(walls)[int(0.9 * (len(walls) - 1))],
            "scrape_cpu_ms": 1e3 * scrape_cpu, "idle_pct": 100 * idle_rate,
            "core_pct_15s": 100 * (idle_rate + scrape_cpu / 15),
            "rss_mib": status_kib(pid, "VmRSS") / 1024, "hwm_mib": status_kib(pid, "VmHWM") / 1024,
            "map_mib": bpf1[0] / 2**20, "series": len(samples), "lost": lost,
            "bpf_pct": 100 * (bpf1[1] - bpf0[1]) / 1e9 / max(1e-9, t1 - t0),
            "bpf_runs_per_s": (bpf1[2] - bpf0[2]) / max(1e-9, t1 - t0)}


def slope(rows: list[tuple[int, dict]], key: str) -> float:
    """Least-squares slope of `key` per 1,000 cgroups."""
    if len(rows) < 2:
        return float("nan")
    xs = [n / 1000 for n, _ in rows]
    ys = [r[key] for _, r in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--cgroups", default="10,100,1000",
                    help="comma-separated host sizes in memory cgroups")
    ap.add_argument("--threads", type=int, default=10000)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--idle", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--no-peer", action="store_true", help="only memlat exporter")
    ap.add_argument("--memlat", action="append", default=[],
                    help="another memlat binary to measure beside BUILD/memlat, without "
                         "--bpf-stats (repeatable)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("exporter_scale: run as root (it makes cgroups and loads BPF)")
    build = os.path.abspath(args.build_dir)
    sizes = [int(n) for n in args.cgroups.split(",")]
    scratch = tempfile.mkdtemp(prefix="memlat_exporter_scale_", dir=build)
    peer = None if args.no_peer else node_exporter(scratch)
    results: list[tuple[int, dict]] = []
    try:
        for n in sizes:
            host = Host(build, n, args.threads)
            try:
                contenders = [("memlat exporter", [os.path.join(build, "memlat"), *EXPORTER_ARGS],
                               None)]
                # Older builds lack --bpf-stats: their programs' run time is not measured.
                contenders += [(f"memlat {i + 2}",
                                [path, *(a for a in EXPORTER_ARGS if a != "--bpf-stats")], None)
                               for i, path in enumerate(args.memlat)]
                if peer:
                    port = free_port()
                    contenders.append(("node_exporter", [*peer,
                                                         f"--web.listen-address=127.0.0.1:{port}"],
                                       port))
                for name, argv, port in contenders:
                    log(f"{n} cgroups: measuring {name} ...")
                    server = Server(argv, port)
                    try:
                        results.append((n, measure(name, server, args.scrapes, args.idle,
                                                   args.warmup)))
                    finally:
                        server.close()
            finally:
                host.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{args.threads} idle threads, a reader in a 32 MiB cgroup, {args.scrapes} scrapes "
          f"back to back, {args.idle:.0f} s idle; {os.cpu_count()} CPUs, Linux "
          f"{os.uname().release}")
    print(f"{'cgroups':>7} {'':16} {'scrape ms':>9} {'p90':>6} {'CPU ms':>7} {'idle %':>7} "
          f"{'% @15s':>7} {'RSS MiB':>8} {'peak':>6} {'maps MiB':>9} {'series':>7} "
          f"{'BPF %':>6} {'lost':>5}")
    for n, r in results:
        memlat = r["name"].startswith("memlat")
        maps = f"{r['map_mib']:.2f}" if memlat else "-"
        bpf = f"{r['bpf_pct']:.3f}" if memlat else "-"
        lost = str(int(r["lost"])) if memlat else "-"
        print(f"{n:7} {r['name']:16} {r['scrape_ms']:9.2f} {r['scrape_p90_ms']:6.2f} "
              f"{r['scrape_cpu_ms']:7.2f} {r['idle_pct']:7.3f} {r['core_pct_15s']:7.3f} "
              f"{r['rss_mib']:8.2f} {r['hwm_mib']:6.2f} {maps:>9} {r['series']:7} {bpf:>6} "
              f"{lost:>5}")
    for name in sorted({r["name"] for _, r in results}):
        if len({n for n, r in results if r["name"] == name}) < 2:
            continue  # a slope wants two sizes
        rows = [(n, r) for n, r in results if r["name"] == name]
        print(f"{name}: per 1,000 cgroups, scrape {slope(rows, 'scrape_ms'):+.2f} ms, CPU per "
              f"scrape {slope(rows, 'scrape_cpu_ms'):+.2f} ms, RSS "
              f"{slope(rows, 'rss_mib'):+.2f} MiB, series {slope(rows, 'series'):+.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
