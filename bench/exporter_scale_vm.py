#!/usr/bin/env python3
"""`memlat exporter` as the cgroup v2 hierarchy grows: bench/exporter_scale.py's question asked in
a qemu guest of tests/vm/ (this host has cgroup v1). One boot runs bench/vm/exporter_scale.sh
(tests/vm/run_vm_tests.py --bench): for each size, N memory cgroups with a sleeping task each
and a toucher over its memory.high in one more (stalls to count per cgroup), the exporter with
every tool and per-cgroup labels, --scrapes scrapes back to back and --idle seconds without.
From the guest's report: the wall time and the exporter's CPU per scrape, its CPU between
scrapes, its RSS and BPF map bytes, the series, and the slope of each per 1,000 cgroups.

The guest is emulated (TCG): its times are several times this host's, so read the growth (the
slope against the guest's own 10-cgroup row), not the absolute figures. Its clocks are the
guest's /proc/uptime and /proc/PID/stat (10 ms ticks), hence the many scrapes. Not a test: it
prints a table and never fails on a figure.

    sudo python3 bench/exporter_scale_vm.py --build-dir build [--kernel 6.12]
        [--sizes 10,100,1000] [--scrapes 200] [--idle 10] [--node-mem-mb 256]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "vm"))
sys.path.insert(0, os.path.join(REPO, "tests", "runtime"))
sys.path.insert(0, HERE)
from exporter_scale import slope  # noqa: E402
from top_scale import stat_ticks  # noqa: E402
from vmcheck import parse_report  # noqa: E402

USER_HZ = 100  # /proc/PID/stat's ticks


def map_bytes(fdinfo: str) -> int:
    """The memlock of every BPF map among the descriptors (each map once, by its id)."""
    maps, memlock = {}, None
    for line in fdinfo.splitlines():
        if line.startswith("fd "):
            memlock = None
        elif line.startswith("memlock:"):
            memlock = int(line.split()[1])
        elif line.startswith("map_id:") and memlock is not None:
            maps[int(line.split()[1])] = memlock
    return sum(maps.values())


def row(block) -> dict:
    meta, files = block.meta, block.files
    scrapes = int(meta["scrapes"])
    wall = float(meta["uptime.after"]) - float(meta["uptime.before"])
    idle = float(meta["uptime.idle"]) - float(meta["uptime.after"])
    metrics = files["metrics"]
    rss = re.search(r"^VmRSS:\s+(\d+)", files["status"], re.M)
    return {
        "cgroups": int(meta["cgroups"]),
        "scrape_ms": 1000 * wall / scrapes,
        "cpu_ms": 1000 * (stat_ticks(files["stat.after"]) - stat_ticks(files["stat.before"]))
        / USER_HZ / scrapes,
        "idle_pct": 100 * (stat_ticks(files["stat.idle"]) - stat_ticks(files["stat.after"])) / USER_HZ
        / idle,
        "rss_mib": int(rss.group(1)) / 1024 if rss else float("nan"),
        "maps_mib": map_bytes(files["fdinfo"]) / 2**20,
        "series": sum(1 for line in metrics.splitlines() if line and not line.startswith("#")),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--kernel", default="6.12", help="a key of tests/vm/kernels.txt")
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--idle", type=float, default=10)
    ap.add_argument("--node-mem-mb", type=int, default=256,
                    help="each of the guest's two nodes (more for more cgroups)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    build = os.path.abspath(args.build_dir)
    with tempfile.TemporaryDirectory(prefix="memlat_scale_vm_", dir=build) as scratch:
        script = os.path.join(scratch, "exporter_scale.sh")
        with open(os.path.join(HERE, "vm", "exporter_scale.sh")) as f:
            body = f.read()
        with open(script, "w") as f:
            f.write(f"SIZES='{' '.join(map(str, sizes))}'\nSCRAPES={args.scrapes}\n"
                    f"IDLE={args.idle:g}\n{body}")
        r = subprocess.run([sys.executable, os.path.join(REPO, "tests", "vm", "run_vm_tests.py"),
                            "--build-dir", build, "--kernel", args.kernel, "--bench", script,
                            "--node-mem-mb", str(args.node_mem_mb), "--timeout", "3600"])
    if r.returncode != 0:
        return r.returncode
    results = os.path.join(build, "vm-run", f"{args.kernel}-bench-exporter_scale", "results.log")
    with open(results, errors="replace") as f:
        facts, blocks, _ = parse_report(f.read())
    rows = []
    for b in blocks:
        if b.name.startswith("scale."):
            try:
                rows.append(row(b))
            except (KeyError, ValueError) as e:
                print(f"{b.name}: incomplete report ({e}); files {sorted(b.files)}",
                      file=sys.stderr)
    print(f"\nguest: Linux {facts.get('kernel', '?')}, cgroup v2, {facts.get('cpus', '?')} CPUs "
          f"(TCG), {args.scrapes} scrapes back to back, {args.idle:g} s idle")
    print(f"{'cgroups':>8} {'scrape ms':>10} {'CPU ms':>7} {'idle %':>7} {'RSS MiB':>8} "
          f"{'maps MiB':>9} {'series':>7}")
    for x in rows:
        print(f"{x['cgroups']:8} {x['scrape_ms']:10.2f} {x['cpu_ms']:7.2f} {x['idle_pct']:7.3f} "
              f"{x['rss_mib']:8.2f} {x['maps_mib']:9.2f} {x['series']:7}")
    if len(rows) >= 2:
        pairs = [(x["cgroups"], x) for x in rows]
        print(f"per 1,000 cgroups: scrape {slope(pairs, 'scrape_ms'):+.2f} ms, CPU per scrape "
              f"{slope(pairs, 'cpu_ms'):+.2f} ms, RSS {slope(pairs, 'rss_mib'):+.2f} MiB, "
              f"series {slope(pairs, 'series'):+.0f}")
    return 0 if len(rows) == len(sizes) else 1


if __name__ == "__main__":
    sys.exit(main())
