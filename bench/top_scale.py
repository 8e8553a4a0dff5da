#!/usr/bin/env python3
"""memlat top's cost as the host grows: CPU, memory and BPF map bytes of `memlat top` refreshing
every second on a host with N memory cgroups (one sleeping task each) and T idle threads, beside
htop and atop (Debian's, unpacked into a scratch directory, never installed: atop's package
would start its daemons) watching the same host, each in the same terminal (a tmux pane).

One reader in a 32 MiB memory cgroup reads a 128 MiB file over and over the whole time, so
that memstall's programs have stalls to count and `memlat top` a row to show. Each contender
runs alone, after a warm-up, for --seconds; its CPU is its utime + stime over that window (and
for memlat top also its BPF programs' run time in the kernel, with kernel.bpf_stats_enabled on
for the run and put back after). Not a test: it prints a table and never fails on a figure.

    sudo python3 bench/top_scale.py --build-dir build [--cgroups 1000] [--threads 10000]
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "runtime"))
from memlat_test import remove_dir_retrying  # noqa: E402 (the runtime tests' helpers)

HZ = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def memory_hierarchy() -> tuple[str, bool]:
    """The memory controller's root directory and whether it is cgroup v1."""
    if os.path.isdir("/sys/fs/cgroup/memory"):
        return "/sys/fs/cgroup/memory", True
    controllers = open("/sys/fs/cgroup/cgroup.controllers").read().split()
    if "memory" not in controllers:
        sys.exit("top_scale: no memory controller on this host")
    return "/sys/fs/cgroup", False


class Host:
    """The cgroups, tasks and threads the run adds, all removed by close()."""

    def __init__(self, build: str, cgroups: int, threads: int):
        self.root, self.v1 = memory_hierarchy()
        self.parent = os.path.join(self.root, f"memlat_bench_top_{os.getpid()}")
        self.procs: list[subprocess.Popen] = []
        self.dirs: list[str] = []
        self.scratch = tempfile.mkdtemp(prefix="memlat_top_scale_", dir=build)
        # Every task takes a pid: 50,000 threads do not fit Debian's default pid_max (32,768).
        # Raised for the run only, and put back by close().
        self.pid_max_was = None
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
        wanted = 2 * (cgroups + threads) + 8192
        if wanted > pid_max:
            self.pid_max_was = pid_max
            with open("/proc/sys/kernel/pid_max", "w") as f:
                f.write(str(wanted))
        os.mkdir(self.parent)
        if not self.v1:
            with open(os.path.join(self.parent, "cgroup.subtree_control"), "w") as f:
                f.write("+memory")
        for i in range(cgroups):
            d = os.path.join(self.parent, f"c{i:05d}")
            os.mkdir(d)
            self.dirs.append(d)
            p = subprocess.Popen(["sleep", "infinity"])
            self.procs.append(p)
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(p.pid))
        # T idle threads (64 KiB stacks: only what they touch is memory), 10,000 a process: a
        # thread's stack and guard are two mappings, and a process may have vm.max_map_count
        # (65,530) of them.
        for first in range(0, threads, 10000):
            count = min(10000, threads - first)
            code = ("import threading,sys\nthreading.stack_size(65536)\ne=threading.Event()\n"
                    f"ts=[threading.Thread(target=e.wait,daemon=True) for _ in range({count})]\n"
                    "[t.start() for t in ts]\nprint('ready',flush=True)\ne.wait()\n")
            p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            self.procs.append(p)
            if p.stdout.readline().strip() != "ready":
                self.close()
                raise RuntimeError(f"top_scale: {count} threads could not be started")
        # The reader: a 32 MiB cgroup, a 128 MiB file read over and over.
        reader_dir = os.path.join(self.parent, "reader")
        os.mkdir(reader_dir)
        self.dirs.append(reader_dir)
        limit = "memory.limit_in_bytes" if self.v1 else "memory.max"
        with open(os.path.join(reader_dir, limit), "w") as f:
            f.write(str(32 << 20))
        data = os.path.join(self.scratch, "reader.dat")
        with open(data, "wb") as f:
            for _ in range(128):
                f.write(os.urandom(1 << 20))
        self.procs.append(subprocess.Popen(
            [os.path.join(build, "tests", "file_reader"), "--file", data, "--cgroup", reader_dir,
             "--passes", "1000000"], stdout=subprocess.DEVNULL))
        log(f"host: {cgroups} memory cgroups with a sleeping task each under {self.parent} "
            f"(cgroup {'v1' if self.v1 else 'v2'}), {threads} idle threads, a reader in a "
            f"32 MiB cgroup")

    def close(self) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        for d in reversed(self.dirs):
            remove_dir_retrying(d)
        try:
            os.rmdir(self.parent)
        except OSError as e:
            log(f"top_scale: {self.parent} left: {e}")
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.pid_max_was is not None:
            with open("/proc/sys/kernel/pid_max", "w") as f:
                f.write(str(self.pid_max_was))


def peers(scratch: str) -> dict[str, tuple[list[str], dict]]:
    """htop and atop from Debian's archive, unpacked (dpkg -x) with htop's libnl, not
    installed. {name: (argv prefix, environment)}; an empty dict if apt cannot fetch them."""
    d = os.path.join(scratch, "peers")
    os.makedirs(d, exist_ok=True)
    pkgs = ["htop", "atop", "libnl-3-200", "libnl-genl-3-200"]
    r = subprocess.run(["apt-get", "download", *pkgs], cwd=d, capture_output=True, text=True)
    if r.returncode != 0:
        log(f"top_scale: apt-get download {' '.join(pkgs)} failed, no peers: {r.stderr[-300:]}")
        return {}
    root = os.path.join(d, "root")
    for deb in os.listdir(d):
        if deb.endswith(".deb"):
            subprocess.run(["dpkg", "-x", os.path.join(d, deb), root], check=True)
    libs = ":".join(os.path.join(root, p) for p in ("lib/x86_64-linux-gnu",
                                                   "usr/lib/x86_64-linux-gnu",
                                                   "lib/aarch64-linux-gnu",
                                                   "usr/lib/aarch64-linux-gnu"))
    env = {"LD_LIBRARY_PATH": libs}
    return {"htop": ([os.path.join(root, "usr/bin/htop"), "-d", "10"], env),
            "atop": ([os.path.join(root, "usr/bin/atop"), "1"], env)}


def stat_ticks(stat: str) -> int:
    """utime + stime, in ticks, of a /proc/PID/stat line (the fields after the command's
    parenthesis, which may itself hold spaces and parentheses)."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return stat_ticks(f.read())


def status_kib(pid: int, key: str) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def bpf_of(pid: int) -> tuple[int, int, int]:
    """(map bytes, program run time ns, program runs) of the BPF maps and programs `pid` holds
    open, from /proc/PID/fdinfo (each counted once by its id)."""
    maps: dict[int, int] = {}
    progs: dict[int, tuple[int, int]] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            info = dict(line.split(":", 1) for line in open(f"/proc/{pid}/fdinfo/{fd}")
                        if ":" in line)
        except OSError:
            continue
        info = {k.strip(): v.strip() for k, v in info.items()}
        if target == "anon_inode:bpf-map" and "map_id" in info:
            maps[int(info["map_id"])] = int(info.get("memlock", 0))
        elif target == "anon_inode:bpf-prog" and "prog_id" in info:
            progs[int(info["prog_id"])] = (int(info.get("run_time_ns", 0)),
                                           int(info.get("run_cnt", 0)))
    return (sum(maps.values()), sum(t for t, _ in progs.values()),
            sum(n for _, n in progs.values()))


def measure(name: str, argv: list[str], env: dict, seconds: float, warmup: float) -> dict:
    # A server of its own per contender: one still going down (htop among 50,000 threads) must
    # not take the next one's session with it.
    socket = f"memlat_top_scale_{os.getpid()}_{name.replace(' ', '_')}"
    tmux = ["tmux", "-L", socket, "-f", "/dev/null"]
    envs = " ".join(f"{k}={v}" for k, v in env.items())
    pidfile = tempfile.mktemp(prefix="memlat_top_scale_pid_")
    script = f"sh -c 'echo $$ > {pidfile}; exec env {envs} {' '.join(argv)}' 2>/dev/null"
    subprocess.run([*tmux, "new-session", "-d", "-s", "m", "-x", "200", "-y", "50", script],
                   check=True)
    try:
        for _ in range(100):
            if os.path.exists(pidfile) and open(pidfile).read().strip():
                break
            time.sleep(0.05)
        pid = int(open(pidfile).read())
        time.sleep(warmup)
        ticks0, bpf0, t0 = cpu_ticks(pid), bpf_of(pid), time.monotonic()
        time.sleep(seconds)
        ticks1, bpf1, t1 = cpu_ticks(pid), bpf_of(pid), time.monotonic()
        row = {"name": name, "cpu_pct": 100.0 * (ticks1 - ticks0) / HZ / (t1 - t0),
               "rss_kib": status_kib(pid, "VmRSS"), "hwm_kib": status_kib(pid, "VmHWM"),
               "map_bytes": bpf1[0],
               "bpf_pct": 100.0 * (bpf1[1] - bpf0[1]) / 1e9 / (t1 - t0),
               "bpf_runs_per_s": (bpf1[2] - bpf0[2]) / (t1 - t0)}
        os.kill(pid, signal.SIGTERM)
        return row
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        if os.path.exists(pidfile):
            os.unlink(pidfile)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--cgroups", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=10000)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--no-peers", action="store_true", help="only memlat top")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("top_scale: run as root (it makes cgroups and loads BPF)")
    for tool in ("tmux", "bpftool"):
        if shutil.which(tool) is None:
            sys.exit(f"top_scale: {tool} not found (scripts/install-deps.sh)")
    build = os.path.abspath(args.build_dir)
    memtop = os.path.join(build, "memtop")
    stats_path = "/proc/sys/kernel/bpf_stats_enabled"
    stats_before = open(stats_path).read().strip()
    host = Host(build, args.cgroups, args.threads)
    rows = []
    try:
        # --no-page-cache: what cachestat's programs (HIT%) add, on every read of the host.
        contenders = [("memlat top", [memtop, "1"], {}),
                      ("memlat top --no-page-cache", [memtop, "--no-page-cache", "1"], {}),
                      ("memlat top -a", [memtop, "-a", "1"], {})]
        if not args.no_peers:
            contenders += [(n, a, e) for n, (a, e) in peers(host.scratch).items()]
        with open(stats_path, "w") as f:
            f.write("1")
        for name, argv, env in contenders:
            log(f"measuring {name} for {args.seconds:.0f} s after {args.warmup:.0f} s ...")
            rows.append(measure(name, argv, env, args.seconds, args.warmup))
    finally:
        with open(stats_path, "w") as f:
            f.write(stats_before)
        host.close()
    print(f"\n{args.cgroups} memory cgroups, {args.threads} idle threads, refresh every "
          f"1 s, {args.seconds:.0f} s each, {os.cpu_count()} CPUs, Linux {os.uname().release}")
    print(f"{'':26} {'CPU % of a core':>16} {'BPF in kernel %':>16} {'RSS MiB':>8} "
          f"{'peak MiB':>9} {'BPF maps MiB':>13}")
    for r in rows:
        bpf = f"{r['bpf_pct']:.3f}" if r["map_bytes"] else "-"
        maps = f"{r['map_bytes'] / 2**20:.2f}" if r["map_bytes"] else "-"
        print(f"{r['name']:26} {r['cpu_pct']:16.2f} {bpf:>16} {r['rss_kib'] / 1024:8.2f} "
              f"{r['hwm_kib'] / 1024:9.2f} {maps:>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
