#!/usr/bin/env python3
"""What naming cgroups costs (docs/names.md): memlat top and memlat exporter, each run twice
side by side on one host, with the node's records (MEMLAT_HOST_ROOT a scratch root holding
N containers' containerd bundles and the kubelet's log directories) and without them (an
empty root: the path's names only). Both see the same cgroups and the same stalls, so the
difference of each pair is the names' cost, in one run.

The host: N containers in the kubelet's layout (the systemd driver's cgroups, made for real
under a cgroup of the run's, a sleeping task in each), or with --runtime podman N Podman
containers (cgroupfs driver: libpod_parent/libpod-ID, and containers/storage's
containers.json, which names them all and which Podman rewrites whole for each new
container), and one reader per container run once
over its 4 MiB limit, so that every container has memcg reclaim stalls and the exporters a
series per container (`--memstall.prometheus-labels cgroup`, `--max-series` above N).

Measured:
- memlat top -j -a (a row, and a name, for every cgroup), interval 1 s: its CPU per refresh
  once settled (names cached), its RSS; then N more containers made at once and the CPU of
  the refreshes that name them: (with - without) / N is the CPU per new container;
- memlat exporter: --scrapes scrapes of each, one after the other, the CPU each used per
  scrape and the wall time, the series and bytes served, the RSS.
Not a test: it prints a table and never fails on a figure.

    sudo python3 bench/names_cost.py --build-dir build [--containers 1000] [--scrapes 20]
                                     [--runtime containerd|podman]
"""
from __future__ import annotations

import argparse
import json
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
from top_scale import log, memory_hierarchy, status_kib  # noqa: E402


class Node:
    """N containers (cgroups with a sleeping task, bundles in a scratch root), removed by
    close()."""

    def __init__(self, build: str, count: int, runtime: str):
        self.build = build
        self.runtime = runtime
        self.podman: list[dict] = []  # containers.json
        self.mount, self.v1 = memory_hierarchy()
        self.parent = os.path.join(self.mount, f"memlat_bench_names_{os.getpid()}")
        self.pods = (os.path.join(self.parent, "kubepods.slice", "kubepods-besteffort.slice")
                     if runtime == "containerd" else os.path.join(self.parent, "libpod_parent"))
        self.root = tempfile.mkdtemp(prefix="memlat_names_root_")
        self.empty = tempfile.mkdtemp(prefix="memlat_names_empty_")
        self.data = os.path.join(build, f"memlat_bench_names_{os.getpid()}.dat")
        with open(self.data, "wb") as f:
            f.write(os.urandom(8 << 20))
        self.dirs: list[str] = []
        self.sleepers: list[subprocess.Popen] = []
        for d in dict.fromkeys((self.parent, os.path.dirname(self.pods), self.pods)):
            os.mkdir(d)
            self.dirs.append(d)
        if not self.v1:
            for d in self.dirs:
                with open(os.path.join(d, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory")
        self.made = 0
        self.add(count)

    def add(self, count: int) -> None:
        limit = "memory.limit_in_bytes" if self.v1 else "memory.max"
        first = self.made
        for i in range(first, first + count):
            uid = f"{i:08x}-0000-4000-8000-{i:012x}"
            cid = f"{i + 1:064x}"
            if self.runtime == "podman":
                self.add_podman(i, cid)
                continue
            pod = os.path.join(self.pods, f"kubepods-besteffort-pod{uid.replace('-', '_')}.slice")
            scope = os.path.join(pod, f"cri-containerd-{cid}.scope")
            for d in (pod, scope):
                os.mkdir(d)
                self.dirs.append(d)
            if not self.v1:
                with open(os.path.join(pod, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory")
            with open(os.path.join(scope, limit), "w") as f:
                f.write(str(4 << 20))
            bundle = f"{self.root}/run/containerd/io.containerd.runtime.v2.task/k8s.io/{cid}"
            os.makedirs(bundle)
            with open(f"{bundle}/config.json", "w") as f:
                json.dump({"ociVersion": "1.1.0", "annotations": {
                    "io.kubernetes.cri.container-type": "container",
                    "io.kubernetes.cri.container-name": "app",
                    "io.kubernetes.cri.sandbox-name": f"app-{i}",
                    "io.kubernetes.cri.sandbox-namespace": "bench",
                    "io.kubernetes.cri.sandbox-uid": uid,
                    "io.kubernetes.cri.image-name": "registry.local/app:1"}}, f)
            os.makedirs(f"{self.root}/var/log/pods/bench_app-{i}_{uid}/app")
            self.sleep_in(scope)
        self.made += count
        log(f"node: {self.made} containers (cgroup {'v1' if self.v1 else 'v2'})")

    def sleep_in(self, cgroup: str) -> None:
        p = subprocess.Popen(["sleep", "infinity"])
        self.sleepers.append(p)
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(p.pid))

    def add_podman(self, i: int, cid: str) -> None:
        """As `podman run` does: the container in containers.json (rewritten whole, through a
        new file renamed over it: containers/storage's containers.go), then its cgroup."""
        self.podman.append({"id": cid, "names": [f"app-{i}"],
                            "metadata": json.dumps({"image-name": "registry.local/app:1"})})
        store = f"{self.root}/var/lib/containers/storage/overlay-containers"
        os.makedirs(store, exist_ok=True)
        with open(f"{store}/containers.json.tmp", "w") as f:
            json.dump(self.podman, f)
        os.rename(f"{store}/containers.json.tmp", f"{store}/containers.json")
        scope = os.path.join(self.pods, f"libpod-{cid}")
        os.mkdir(scope)
        self.dirs.append(scope)
        with open(os.path.join(scope, "memory.limit_in_bytes" if self.v1 else "memory.max"),
                  "w") as f:
            f.write(str(4 << 20))
        self.sleep_in(scope)

    def stall_each(self, first: int, count: int) -> None:
        """A reader over its limit in each container, two at a time: memcg reclaim stalls."""
        reader = os.path.join(self.build, "tests", "file_reader")
        scopes = [d for d in self.dirs
                  if d.endswith(".scope") or "/libpod-" in d][first:first + count]
        running: list[subprocess.Popen] = []
        for scope in scopes:
            fd = os.open(self.data, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
            running.append(subprocess.Popen([reader, "--file", self.data, "--cgroup", scope],
                                            stdout=subprocess.DEVNULL))
            if len(running) >= 2:
                running.pop(0).wait()
        for p in running:
            p.wait()

    def close(self) -> None:
        for p in self.sleepers:
            p.kill()
            p.wait()
        for d in reversed(self.dirs):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.empty, ignore_errors=True)
        os.unlink(self.data)


def side_threads_ns(pid: int) -> int:
    """CPU time of the process's threads other than its main one (memlat top's: the thread
    that names cgroups as they are made, lib/loading/cgroup_births.cpp), in ns."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        if int(tid) == pid:
            continue
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def start(build: str, args: list[str], root: str) -> subprocess.Popen:
    env = dict(os.environ, MEMLAT_READY="1", MEMLAT_HOST_ROOT=root)
    p = subprocess.Popen([os.path.join(build, "memlat"), *args], env=env, text=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    port = None
    for line in p.stderr:
        if m := re.search(r"serving Prometheus metrics on http://[^ ]*:(\d+)/metrics", line):
            port = int(m.group(1))
        if line.strip() == "memlat: ready":
            break
    p.port = port  # type: ignore[attr-defined]
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--containers", type=int, default=1000)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--runtime", choices=["containerd", "podman"], default="containerd")
    a = ap.parse_args()
    node = Node(a.build_dir, a.containers, a.runtime)
    procs: list[subprocess.Popen] = []
    try:
        node.stall_each(0, a.containers)
        tops = {name: start(a.build_dir, ["top", "-j", "-a", "1"], root)
                for name, root in (("names", node.root), ("no names", node.empty))}
        exporter_args = ["exporter", "--tools", "memstall,drsnoop",
                         "--memstall.prometheus-labels", "cgroup", "--drsnoop.prometheus-labels",
                         "cgroup", "--memstall.max-series", str(4 * a.containers),
                         "--drsnoop.max-series", str(4 * a.containers),
                         "--web.listen-address", "127.0.0.1:0"]
        exporters = {name: start(a.build_dir, exporter_args, root)
                     for name, root in (("names", node.root), ("no names", node.empty))}
        procs = [*tops.values(), *exporters.values()]
        # Stalls the exporters see, in every container.
        node.stall_each(0, a.containers)
        time.sleep(3)  # top settles: every name read once
        settled = {k: cpu_ns(p.pid) for k, p in tops.items()}
        time.sleep(10)
        per_refresh = {k: (cpu_ns(p.pid) - settled[k]) / 10 / 1e6 for k, p in tops.items()}
        top_rss = {k: status_kib(p.pid, "VmRSS") for k, p in tops.items()}
        before = {k: cpu_ns(p.pid) for k, p in tops.items()}
        side_before = {k: side_threads_ns(p.pid) for k, p in tops.items()}
        node.add(a.containers)
        time.sleep(3)  # the refreshes that meet them
        new_cost = {k: (cpu_ns(p.pid) - before[k]) / 1e6 for k, p in tops.items()}
        side_cost = {k: (side_threads_ns(p.pid) - side_before[k]) / 1e6 for k, p in tops.items()}
        scrape = {}
        for name, p in exporters.items():
            cpu, wall, size, series = [], [], 0, 0
            for _ in range(a.scrapes):
                c0, t0 = cpu_ns(p.pid), time.monotonic()
                with urllib.request.urlopen(f"http://127.0.0.1:{p.port}/metrics") as r:
                    body = r.read()
                wall.append(time.monotonic() - t0)
                cpu.append(cpu_ns(p.pid) - c0)
                size = len(body)
                series = sum(1 for ln in body.split(b"\n")
                             if ln.startswith(b"memlat_memstall_cgroup_stall_seconds_total"))
            scrape[name] = (statistics.median(cpu) / 1e6, statistics.median(wall) * 1e3, size,
                            series, status_kib(p.pid, "VmRSS"))
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        node.close()
    n = a.containers
    layout = ("the kubelet's layout (containerd bundles)" if a.runtime == "containerd"
              else "Podman's layout (containers.json)")
    print(f"\nnames_cost: {n} containers in {layout}, {time.strftime('%Y-%m-%d')}")
    print(f"{'':28} {'names':>12} {'no names':>12} {'ratio':>7}")
    rows = [("top: CPU ms per refresh", per_refresh["names"], per_refresh["no names"]),
            ("top: RSS KiB", top_rss["names"], top_rss["no names"]),
            (f"top: CPU ms, {n} new", new_cost["names"], new_cost["no names"]),
            ("  of which naming as made", side_cost["names"], side_cost["no names"]),
            ("exporter: CPU ms a scrape", scrape["names"][0], scrape["no names"][0]),
            ("exporter: wall ms a scrape", scrape["names"][1], scrape["no names"][1]),
            ("exporter: bytes served", scrape["names"][2], scrape["no names"][2]),
            ("exporter: memstall series", scrape["names"][3], scrape["no names"][3]),
            ("exporter: RSS KiB", scrape["names"][4], scrape["no names"][4])]
    for what, x, y in rows:
        print(f"{what:28} {x:12.1f} {y:12.1f} {x / y if y else float('nan'):7.2f}")
    print(f"CPU per new container named: "
          f"{(new_cost['names'] - new_cost['no names']) / n * 1e3:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
