#!/usr/bin/env python3
"""Side-by-side benchmark of the five memlat tools, each against empty BPF programs on the same
hooks and against a bpftrace script doing the same job.

For each tool (tlbflush, drsnoop, compactsnoop, numamove, cachestat) and its own workload
(tests/workloads/), it measures in one run (python3 stdlib plus the runtime tests' harness;
needs root and bpftool, bpftrace optional):
  1. BPF cost per program run (run_time_ns / run_cnt with kernel.bpf_stats_enabled=1, restored
     on every exit path) of every program the contender holds, summed over its hooks, while the
     workload runs once: the floor (bench_empty: empty programs on the tool's hooks, loaded the
     way the tools load), the tool's default mode, its per-event mode, and two bpftrace scripts
     doing the same jobs. The contenders of a tool run interleaved (A B C D E A B C D E ...);
     medians and ranges are reported, with differences and ratios to the floor and bpftrace.
  2. exec -> ready (the "memlat: ready" line; bpftrace's "Attaching" line), the CPU time used
     until then and peak RSS (VmHWM), from the same runs. libbpf-tools' drsnoop (Debian's
     libbpf-tools package), the peer a user copying one binary compares with, runs beside
     drsnoop's contenders in the same interleaving, ready at its "Tracing" line.
  3. The size of each tool binary.

It prints numbers and ratios and never fails on a timing (it is not a test). The exit status is
non-zero only when the benchmark itself could not run.

  python3 bench/run_bench.py --build-dir build [--json results.json] [--tools tlbflush,drsnoop]
"""

import argparse
import contextlib
import ctypes
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

from startup_memory import cpu_ns  # CPU time of a process's threads (bench/startup_memory.py)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
COMPACT_MEMORY = "/proc/sys/vm/compact_memory"
TOOLS = ["tlbflush", "drsnoop", "compactsnoop", "numamove", "cachestat", "memstall", "oomwhy"]

PEER_DRSNOOP = "/usr/sbin/drsnoop"  # Debian's libbpf-tools package installs it there
_children = set()          # live Child objects, stopped on any exit path
_libc = None
mt = None                  # tests/runtime/memlat_test.py, imported once the build is known


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- child handling

def _set_pdeathsig():
    # Runs in the child between fork and exec: die with the benchmark even if it is SIGKILLed.
    if _libc is not None:
        _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class _PtyReader:
    """The master side of a pseudo-terminal as the reader threads read a pipe: read1(), and
    b"" at the end (the kernel says EIO once the other side is closed)."""

    def __init__(self, fd):
        self.fd = fd

    def read1(self, n):
        try:
            return os.read(self.fd, n)
        except OSError:
            return b""

    def close(self):
        os.close(self.fd)


class Child:
    """A contender process with its output lines time-stamped by reader threads."""

    def __init__(self, name, argv, ready_stream, ready_text, stdout_wanted, stdout_pty=False,
                 extra_env=None):
        self.name = name
        self.ready_text = ready_text
        self.ready_at = None
        self.ready_line = ""
        self.ready = threading.Event()
        self.lines = []            # (stream, monotonic time, text), the first few only
        self.hwm_kib = 0           # largest VmHWM read from /proc/PID/status
        self.cpu_at_ready_ns = None  # CPU time of all its threads when the ready line came
        self.rusage = None
        self.status = None
        env = dict(os.environ, MEMLAT_READY="1", **(extra_env or {}))
        # A program that prints its ready line with printf() and no fflush() (libbpf-tools')
        # writes it at once only to a terminal: its stdout is then a pseudo-terminal.
        pty_out = None
        stdout = subprocess.PIPE if stdout_wanted else subprocess.DEVNULL
        if stdout_pty:
            pty_out, stdout = os.openpty()
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=stdout,
            stderr=subprocess.PIPE, preexec_fn=_set_pdeathsig)
        _children.add(self)
        self.threads = []
        streams = [("stderr", self.proc.stderr)]
        if stdout_pty:
            os.close(stdout)
            streams.append(("stdout", _PtyReader(pty_out)))
        elif stdout_wanted:
            streams.append(("stdout", self.proc.stdout))
        for label, f in streams:
            t = threading.Thread(target=self._read, args=(label, f, label == ready_stream),
                                 daemon=True)
            t.start()
            self.threads.append(t)

    def _read(self, label, f, watch):
        # Large reads: a trace script's output is drained quickly and mostly discarded.
        pending = b""
        for chunk in iter(lambda: f.read1(1 << 16), b""):
            now = time.monotonic()
            if self.ready_at is not None and len(self.lines) >= 200:
                continue
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                text = raw.decode(errors="replace")
                if len(self.lines) < 200:
                    self.lines.append((label, now, text))
                if watch and self.ready_at is None and self.ready_text in text:
                    self.cpu_at_ready_ns = cpu_ns(self.proc.pid)
                    self.ready_at = now
                    self.ready_line = text
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
            if self.ready.wait(0.02):
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


@contextlib.contextmanager
def background(argv, first_line_timeout=30.0):
    """A workload process kept running while the block runs (killed at the end); yields its
    first stdout line once it has printed one."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=_set_pdeathsig)
    try:
        line = p.stdout.readline().decode(errors="replace").strip()
        if not line:
            raise RuntimeError(f"{os.path.basename(argv[0])} exited without output: "
                               f"{p.stderr.read().decode(errors='replace')[-300:]}")
        yield line
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
        p.stderr.close()


@contextlib.contextmanager
def round_worker(argv):
    """A long-lived workload process (a workload's --stdin-rounds) whose same thread does one
    round of its work for every line written to it: yields the function that runs one round
    and returns its "round ..." line. The process, and its thread, live as long as the
    block, across the contenders' runs: the steady state of a tool's per-thread state."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=_set_pdeathsig)

    def line():
        text = p.stdout.readline().decode(errors="replace").strip()
        if not text:
            p.kill()
            raise RuntimeError(f"{os.path.basename(argv[0])} exited: "
                               f"{p.stderr.read().decode(errors='replace')[-300:]}")
        return text

    def one_round():
        p.stdin.write(b"\n")
        p.stdin.flush()
        return line()
    try:
        if line() != "ready":
            raise RuntimeError(f"{os.path.basename(argv[0])} did not start")
        yield one_round
    finally:
        try:
            p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()


def run_workload(argv, timeout=120):
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, preexec_fn=_set_pdeathsig)
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(argv[0])} failed ({r.returncode}): "
                           f"{r.stderr.decode(errors='replace')[-400:]}")
    return r.stdout.decode(errors="replace")


# --------------------------------------------------------------------------- BPF programs

def prog_table():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    return {p["id"]: p for p in json.loads(out or b"[]")}


def prog_ids_of(pid):
    """The BPF programs process `pid` holds, from its file descriptors' fdinfo: exactly the
    contender's, whatever else the machine loads meanwhile."""
    ids = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return ids
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            pass
    return ids


def prog_stats(ids):
    """{id: (name, run_time_ns, run_cnt)} of the programs still loaded."""
    table = prog_table()
    return {i: (table[i].get("name", "?"), table[i].get("run_time_ns", 0),
                table[i].get("run_cnt", 0)) for i in ids if i in table}


def tracepoint_of(hook):
    """"compaction/mm_compaction_migratepages" -> "mm_compaction_migratepages"."""
    return hook.split("/")[-1]


def hooks_of_programs(c, g, progs):
    """{program key: tracepoint} for the programs of one run of contender c of group g: from
    the names of ours (bpftool gives their full names, from BTF), and for bpftrace, whose names
    are its tracepoints cut to 15 characters, by load order (the order of its probes in the
    script), checked against those names. A program it cannot place maps to "?"."""
    out = {}
    if c["role"] in ("floor", "primitive"):
        for key in progs:
            name = key.split("#")[0]
            out[key] = re.sub(r"^[eb]_(tp_)?", "", name)
        return out
    if not c["role"].startswith("bpftrace"):
        stems = {stem: tracepoint_of(hook) for hook, stem in g.hooks.items()}
        for key in progs:
            stem = re.sub(r"_(btf|raw|tp|fentry|kprobe)$", "", key.split("#")[0])
            out[key] = stems.get(stem, "?")
        return out
    expected = re.findall(r"tracepoint:\w+:(\w+)", c["argv"][-1])
    keys = sorted(progs, key=lambda k: int(k.split("#")[1]))
    if len(keys) == len(expected) and all(k.split("#")[0] == tp[:15]
                                          for k, tp in zip(keys, expected)):
        return dict(zip(keys, expected))
    for key in keys:
        matches = {tp for tp in expected if tp[:15] == key.split("#")[0]}
        out[key] = matches.pop() if len(matches) == 1 else "?"
    return out


# --------------------------------------------------------------------------- bpftrace scripts

# The same jobs as the tools' modes, as plain bpftrace (classic tracepoints).
# The flush IPIs each CPU handled (tlbflush's csd_function_entry program, in every mode):
# remote runs of the TLB-flush callback.
BT_TLB_IPIS = """
tracepoint:csd:csd_function_entry
/(uint64)args->func == kaddr("flush_tlb_func") && (uint64)args->csd != 0/ {
  @ipis[cpu] = count();
}"""
BT_TLB_COUNT = """
tracepoint:tlb:tlb_flush {
  @flushes[cpu, args->reason] = count();
  if (args->pages == 0xffffffffffffffff) { @full[cpu, args->reason] = count(); }
  else { @pages[cpu, args->reason] = sum(args->pages); }
}""" + BT_TLB_IPIS
BT_TLB_TRACE = """
tracepoint:tlb:tlb_flush {
  printf("%lu %d %d %d %s %d %ld\\n", nsecs, cpu, pid, tid, comm, args->reason, args->pages);
}""" + BT_TLB_IPIS
RECLAIM = ["direct_reclaim", "memcg_reclaim", "memcg_softlimit_reclaim", "node_reclaim"]
BT_RECLAIM_BEGIN = (",".join(f"tracepoint:vmscan:mm_vmscan_{k}_begin" for k in RECLAIM) +
                    " { @start[tid] = nsecs; }\n")
BT_RECLAIM_ENDS = ",".join(f"tracepoint:vmscan:mm_vmscan_{k}_end" for k in RECLAIM)
BT_DRSNOOP_TRACE = BT_RECLAIM_BEGIN + BT_RECLAIM_ENDS + """ /@start[tid]/ {
  $lat = nsecs - @start[tid];
  printf("%lu %s %d %d %lu %lu\\n", nsecs, comm, pid, tid, $lat, args->nr_reclaimed);
  @stalls[pid, comm] = count(); @ns[pid] = sum($lat); @pages[pid] = sum(args->nr_reclaimed);
  delete(@start[tid]);
}"""
BT_DRSNOOP_HIST = BT_RECLAIM_BEGIN + BT_RECLAIM_ENDS + """ /@start[tid]/ {
  $lat = nsecs - @start[tid];
  @usecs = hist($lat / 1000);
  @stalls[pid, comm] = count(); @ns[pid] = sum($lat); @pages[pid] = sum(args->nr_reclaimed);
  delete(@start[tid]);
}"""
BT_COMPACT_COMMON = """
tracepoint:compaction:mm_compaction_begin { @start[tid] = nsecs; @migrated[tid] = 0; }
tracepoint:compaction:mm_compaction_migratepages /@start[tid]/ {
  @migrated[tid] = @migrated[tid] + args->nr_migrated;
}
tracepoint:compaction:mm_compaction_try_to_compact_pages { @direct = count(); }
tracepoint:compaction:mm_compaction_deferred { @deferred = count(); }
tracepoint:compaction:mm_compaction_kcompactd_wake { @wakes = count(); }
"""
BT_COMPACT_TRACE = BT_COMPACT_COMMON + """
tracepoint:compaction:mm_compaction_end /@start[tid]/ {
  $lat = nsecs - @start[tid];
  printf("%lu %s %d %d %lu %d %lu\\n", nsecs, comm, pid, tid, $lat, args->status,
         @migrated[tid]);
  @runs[args->status] = count(); @ns[args->status] = sum($lat);
  delete(@start[tid]); delete(@migrated[tid]);
}"""
BT_COMPACT_HIST = BT_COMPACT_COMMON + """
tracepoint:compaction:mm_compaction_end /@start[tid]/ {
  $lat = nsecs - @start[tid];
  @usecs = hist($lat / 1000);
  @runs[args->status] = count(); @ns[args->status] = sum($lat);
  delete(@start[tid]); delete(@migrated[tid]);
}"""
BT_MIGRATE = """
tracepoint:migrate:mm_migrate_pages_start { @start[tid] = nsecs; }
tracepoint:migrate:mm_migrate_pages {
  @calls[KEY] = count(); @succeeded[KEY] = sum(args->succeeded);
  @failed[KEY] = sum(args->failed); @thp[KEY] = sum(args->thp_succeeded);
  if (@start[tid]) { @ns[KEY] = sum(nsecs - @start[tid]); delete(@start[tid]); }
}"""
BT_NUMAMOVE = BT_MIGRATE.replace("KEY", "args->reason")
BT_NUMAMOVE_PROC = BT_MIGRATE.replace("KEY", "pid, comm, args->reason")
BT_CACHE = """
tracepoint:filemap:mm_filemap_add_to_page_cache { @misses[KEY] = sum(1 << args->order); }
tracepoint:writeback:writeback_dirty_folio { @dirties[KEY] = count(); }
tracepoint:filemap:mm_filemap_get_pages,tracepoint:filemap:mm_filemap_map_pages {
  @accesses[KEY] = sum(args->last_index - args->index + 1);
}
tracepoint:filemap:mm_filemap_fault { @accesses[KEY] = sum(1); }
"""
BT_CACHESTAT = BT_CACHE.replace("KEY", "cpu")
BT_CACHESTAT_PROC = BT_CACHE.replace("KEY", "pid, uid, comm")


# --------------------------------------------------------------------------- the tools

class Group:
    """One tool: the hooks its probes use here ({bench_empty hook: the stem of the tool's program
    on it, without _btf/_raw/_tp}), its two modes and bpftrace's, and its workload. setup() is a
    context manager yielding the function that runs the workload once (raising Unavailable when
    this machine cannot run it); `note` says what the workload exercises."""

    def __init__(self, tool, hooks, default_args, trace_args, bt_default, bt_trace, setup, note,
                 steady=None, steady_note=None):
        self.tool, self.hooks = tool, hooks
        self.default_args, self.trace_args = default_args, trace_args
        self.bt_default, self.bt_trace = bt_default, bt_trace
        self.setup, self.note = setup, note
        # The steady state: a context manager like setup, whose workload is one long-lived
        # thread (round_worker) that each contender's run warms up with one unmeasured round.
        self.steady, self.steady_note = steady, steady_note


STEADY_NOTE = ("steady state: one long-lived thread stalls round after round; each run warms "
               "the contender up with one unmeasured round, then measures one: ")


class Unavailable(Exception):
    """This machine cannot run a tool's workload: the reason is printed in the table."""


def numa_nodes():
    try:
        return len([d for d in os.listdir("/sys/devices/system/node")
                    if re.fullmatch(r"node\d+", d)])
    except OSError:
        return 1


def make_groups(bd, args):
    tests = os.path.join(bd, "tests")

    @contextlib.contextmanager
    def tlb_setup():
        yield lambda: run_workload([os.path.join(tests, "tlb_workload"),
                                    "--iterations", str(args.iterations)])

    @contextlib.contextmanager
    def reclaim_setup():
        # As the drsnoop tests: a cold file read by a process in a memory cgroup whose limit is
        # a quarter of the file, so memcg limit reclaim runs again and again.
        try:
            with mt.MemoryCgroup("bench_drsnoop", 32 << 20) as cg, \
                    mt.TestFile(96 << 20, "bench_drsnoop", cold=True) as f:
                def once():
                    f.evict()
                    run_workload([os.path.join(tests, "file_reader"), "--file", f.path,
                                  "--cgroup", cg.path])
                yield once
        except mt.Skip as e:
            raise Unavailable(str(e))

    @contextlib.contextmanager
    def reclaim_steady():
        # The same reads by one long-lived thread: each round reads the file again (what the
        # 32 MiB cgroup kept of it is its end, so every page is read from disk again).
        try:
            with mt.MemoryCgroup("bench_drsnoop", 32 << 20) as cg, \
                    mt.TestFile(96 << 20, "bench_drsnoop", cold=True) as f, \
                    round_worker([os.path.join(tests, "file_reader"), "--file", f.path,
                                  "--cgroup", cg.path, "--stdin-rounds"]) as one_round:
                def once():
                    f.evict()
                    one_round()
                yield once
        except mt.Skip as e:
            raise Unavailable(str(e))

    @contextlib.contextmanager
    def migration_steady():
        # One long-lived thread that fragments 64 MiB and compacts (compact_memory) once per
        # round: compaction's runs and migrate_pages() calls, all in that thread.
        if not os.path.exists(COMPACT_MEMORY):
            raise Unavailable(f"no {COMPACT_MEMORY} (CONFIG_COMPACTION off)")
        with round_worker([os.path.join(tests, "migrate_fragmenter"), "--mib", "64",
                           "--compact", "--stdin-rounds"]) as one_round:
            yield one_round

    @contextlib.contextmanager
    def compaction_setup():
        # As the compactsnoop tests: physical memory fragmented in a checkerboard, then manual
        # compaction of every zone (in this process) by writing compact_memory.
        if not os.path.exists(COMPACT_MEMORY):
            raise Unavailable(f"no {COMPACT_MEMORY} (CONFIG_COMPACTION off)")

        def once():
            with background([os.path.join(tests, "compact_fragmenter"), "--mib", "128"]):
                with open(COMPACT_MEMORY, "w") as f:
                    f.write("1")
        yield once

    @contextlib.contextmanager
    def migration_setup():
        # As the numamove tests: compaction migrates pages through migrate_pages(), the same
        # tracepoints NUMA balancing uses.
        if not os.path.exists(COMPACT_MEMORY):
            raise Unavailable(f"no {COMPACT_MEMORY} (CONFIG_COMPACTION off)")
        yield lambda: run_workload([os.path.join(tests, "migrate_fragmenter"), "--mib", "64",
                                    "--compact", "--rounds", "4"])

    @contextlib.contextmanager
    def cache_setup():
        # A cold read (misses), a warm one (hits) and a small write (dirties) of files of our
        # own; nothing else of the page cache is dropped.
        with mt.TestFile(48 << 20, "bench_cachestat", cold=True) as f, \
                mt.TestFile(1 << 20, "bench_cachestat_w") as w:
            def once():
                f.evict()
                run_workload([os.path.join(tests, "file_reader"), "--file", f.path,
                              "--passes", "2"])
                run_workload([os.path.join(tests, "cache_writer"), "--file", w.path,
                              "--mib", "8"])
            yield once

    @contextlib.contextmanager
    def switch_setup():
        # Context switches of tasks in no memory stall: the path memstall's sched_switch
        # program takes on almost every switch of a machine.
        yield lambda: run_workload([os.path.join(tests, "pingpong"), "--iterations",
                                    str(args.iterations * 5)])

    @contextlib.contextmanager
    def switch_steady():
        # The same switches while a reader in a 32 MiB memory cgroup stalls in reclaim round
        # after round (a cold 96 MiB file read again and again): stalls are open while the
        # machine switches, so memstall's sched_switch takes its paths for a stalled task
        # too (issue 33: measured with stalls open, not only without).
        try:
            with mt.MemoryCgroup("bench_memstall", 32 << 20) as cg, \
                    mt.TestFile(96 << 20, "bench_memstall", cold=True) as f, \
                    background(["sh", "-c", 'echo started; exec "$0" "$@"',
                                os.path.join(tests, "file_reader"), "--file", f.path,
                                "--cgroup", cg.path, "--passes", "1000000"]):
                yield lambda: run_workload([os.path.join(tests, "pingpong"), "--iterations",
                                            str(args.iterations * 5)])
        except mt.Skip as e:
            raise Unavailable(str(e))

    nodes = numa_nodes()
    return [
        Group("tlbflush", {"tlb_flush": "tlb_flush", "csd_function_entry": "csd_entry"}, [],
              ["--trace"], BT_TLB_COUNT, BT_TLB_TRACE, tlb_setup,
              f"tlb_workload --iterations {args.iterations} (tlb_flush, and csd_function_entry, "
              "where tlbflush counts the flush IPIs each CPU handled in every mode)"),
        Group("drsnoop",
              {f"mm_vmscan_{k}_{e}": f"{k}_{e}"
               for k in RECLAIM for e in ("begin", "end")},
              ["-H"], [], BT_DRSNOOP_HIST, BT_DRSNOOP_TRACE, reclaim_setup,
              "file_reader of a cold 96 MiB file in a 32 MiB memory cgroup (memcg reclaim; "
              "the default mode is one line per stall, -H the in-kernel histogram)",
              reclaim_steady, STEADY_NOTE + "file_reader --stdin-rounds reads the cold 96 MiB "
              "file in the 32 MiB memory cgroup once per round"),
        Group("compactsnoop",
              {"mm_compaction_begin": "begin", "mm_compaction_end": "end",
               "compaction/mm_compaction_migratepages": "migratepages",
               "mm_compaction_try_to_compact_pages": "try_to_compact",
               "mm_compaction_deferred": "deferred", "mm_compaction_kcompactd_wake":
               "kcompactd_wake"},
              ["-H"], [], BT_COMPACT_HIST, BT_COMPACT_TRACE, compaction_setup,
              "compact_fragmenter --mib 128, then manual compaction (default mode: one line "
              "per run; -H the histogram)",
              migration_steady, STEADY_NOTE + "migrate_fragmenter --stdin-rounds fragments 64 "
              "MiB and compacts once per round"),
        Group("numamove", {"mm_migrate_pages_start": "migrate_start",
                           "mm_migrate_pages": "migrate_end"}, [], ["-P"],
              BT_NUMAMOVE, BT_NUMAMOVE_PROC, migration_setup,
              "migrate_fragmenter --compact: compaction's migrations; NUMA balancing's "
              f"(numa_misplacer) need two NUMA nodes and this machine has {nodes}, so the "
              "numa_misplaced view itself sees no events here" if nodes < 2 else
              "migrate_fragmenter --compact: compaction's migrations",
              migration_steady, STEADY_NOTE + "migrate_fragmenter --stdin-rounds fragments 64 "
              "MiB and compacts once per round"),
        Group("cachestat",
              {"mm_filemap_add_to_page_cache": "add", "writeback_dirty_folio": "dirty_folio",
               "mm_filemap_get_pages": "get_pages", "mm_filemap_map_pages": "map_pages",
               "mm_filemap_fault": "fault"},
              [], ["-P"], BT_CACHESTAT, BT_CACHESTAT_PROC, cache_setup,
              "file_reader of a cold 48 MiB file twice, cache_writer 8 MiB (machine-wide "
              "hooks: other activity adds runs)"),
        Group("memstall",
              {"sched_switch": "switch", "mm_vmscan_direct_reclaim_begin": "direct_begin",
               "mm_vmscan_direct_reclaim_end": "direct_end",
               "mm_vmscan_memcg_reclaim_begin": "memcg_begin",
               "mm_vmscan_memcg_reclaim_end": "memcg_end",
               "mm_compaction_begin": "compact_begin", "mm_compaction_end": "compact_end",
               "balance_dirty_pages": "dirty", "sched_process_exit": "exit"},
              [], ["-C"], None, None, switch_setup,
              f"pingpong --iterations {args.iterations * 5}: context switches of tasks in no "
              "memory stall (machine-wide hook: every switch of the machine counts); memstall "
              "has no per-event mode: -C differs in user space only",
              switch_steady, "steady state: the same pingpong while a reader in a 32 MiB "
              "memory cgroup reads a cold 96 MiB file again and again (its reclaim stalls open "
              "while the machine switches)"),
        # oomwhy's frequent hooks are the reclaim pairs (the lead-up of a kill); its OOM
        # tracepoints fire once a kill. One mode: it prints per kill, and none happens here.
        Group("oomwhy",
              {f"mm_vmscan_{k}_{e}": f"{k}_{e}"
               for k in ("direct_reclaim", "memcg_reclaim") for e in ("begin", "end")},
              [], None, None, None, reclaim_setup,
              "file_reader of a cold 96 MiB file in a 32 MiB memory cgroup (memcg reclaim, "
              "each round of which oomwhy keeps for a kill's lead-up)",
              reclaim_steady, STEADY_NOTE + "file_reader --stdin-rounds reads the cold 96 MiB "
              "file in the 32 MiB memory cgroup once per round"),
    ]


def contenders_of(g, bd, bpftrace, peers, variants=(), primitives=()):
    ours = dict(ready_stream="stderr", ready_text="memlat: ready", stdout=False, settle=0.0)
    tool = os.path.join(bd, g.tool)
    modes = [("default", g.default_args)] + ([("trace", g.trace_args)]
                                             if g.trace_args is not None else [])
    # Roles: "default" is the counting mode (drsnoop's and compactsnoop's is -H, their default
    # being one line per event), "trace" the per-event mode; each faces the bpftrace script
    # doing that job.
    out = [dict(ours, name="floor (empty)", role="floor",
                argv=[os.path.join(bd, "bench_empty"), "-e", ",".join(g.hooks)])]
    # The primitives the tools are built of, each alone on every hook (bench_empty -b): what a
    # clock read, a per-thread hash lookup or an atomic add costs where the tool runs them.
    for body in primitives:
        out.append(dict(ours, name=f"empty + {body}", role="primitive",
                        argv=[os.path.join(bd, "bench_empty"), "-e", ",".join(g.hooks), "-b", body]))
    for mode, extra in modes:
        label = " ".join([g.tool] + extra)
        out.append(dict(ours, name=label, role=mode, argv=[tool] + extra))
    # Variants of the counting mode, for A/B measurements in the same run: another build's
    # tool (--compare-build), or the tool under an environment (--variant-env, e.g.
    # MEMLAT_DISABLE_FEATURES=task_btf: helper reads of the current task, as on 5.10).
    for label, build, env in variants:
        out.append(dict(ours, name=" ".join([g.tool] + g.default_args + [f"[{label}]"]),
                        role="default", argv=[os.path.join(build or bd, g.tool)] +
                        g.default_args, env=env))
    if g.tool in peers:
        # The peer's only mode is one line per event: it faces the per-event mode.
        out.append(dict(name=f"libbpf-tools {g.tool}", role="peer", argv=[peers[g.tool]],
                        ready_stream="stdout", ready_text="Tracing", stdout=True,
                        stdout_pty=True, settle=0.0))
    if bpftrace and g.bt_default:
        for mode, script in (("default", g.bt_default), ("trace", g.bt_trace)):
            kind = "counts" if mode == "default" else ("lines" if not g.trace_args or
                                                       g.trace_args == ["--trace"] else "per process")
            out.append(dict(name=f"bpftrace ({kind})",
                            role=f"bpftrace {mode}", argv=[bpftrace, "-e", script],
                            ready_stream="stdout", ready_text="Attaching", stdout=True,
                            settle=0.3))
    return out


# --------------------------------------------------------------------------- measurements

def one_run(c, g, workload, warmup=False):
    """Start contender c, run the workload once (twice with `warmup`, the first run
    unmeasured), return a dict of measurements."""
    child = Child(c["name"], c["argv"], c["ready_stream"], c["ready_text"], c["stdout"],
                  c.get("stdout_pty", False), c.get("env"))
    res = {"contender": c["name"], "role": c["role"]}
    try:
        startup = child.wait_ready(60.0)
        if startup is None:
            raise RuntimeError(f"{c['name']} never became ready "
                               f"(exit status {child.status}):\n{child.tail()}")
        res["startup_s"] = startup
        res["cpu_to_ready_ms"] = (child.cpu_at_ready_ns / 1e6
                                  if child.cpu_at_ready_ns is not None else None)
        # bpftrace says how many probes it attaches before it attaches them.
        m = re.search(r"Attaching (\d+) probe", child.ready_line)
        want = int(m.group(1)) if m else 1
        deadline = time.monotonic() + 10.0
        ids = prog_ids_of(child.proc.pid)
        while len(ids) < want and time.monotonic() < deadline and child.alive():
            time.sleep(0.05)
            ids = prog_ids_of(child.proc.pid)
        if not ids:
            raise RuntimeError(f"{c['name']}: holds no BPF program\n{child.tail()}")
        if c["settle"]:
            time.sleep(c["settle"])
        if warmup:
            workload()
        before = prog_stats(ids)
        workload()
        after = prog_stats(ids)
        if not child.alive():
            raise RuntimeError(f"{c['name']} exited during the workload "
                               f"(exit status {child.status}):\n{child.tail()}")
        progs = {}
        for i, (name, t1, n1) in after.items():
            _, t0, n0 = before.get(i, (name, 0, 0))
            progs[f"{name}#{i}"] = {"run_time_ns": t1 - t0, "run_cnt": n1 - n0}
        res["progs"] = progs
        hooks = {}
        for key, tp in hooks_of_programs(c, g, progs).items():
            h = hooks.setdefault(tp, {"run_time_ns": 0, "run_cnt": 0})
            h["run_time_ns"] += progs[key]["run_time_ns"]
            h["run_cnt"] += progs[key]["run_cnt"]
        res["hooks"] = hooks
        res["run_time_ns"] = sum(p["run_time_ns"] for p in progs.values())
        res["run_cnt"] = sum(p["run_cnt"] for p in progs.values())
        res["ns_per_run"] = res["run_time_ns"] / res["run_cnt"] if res["run_cnt"] else None
        child.sample_hwm()
    finally:
        child.stop()
    res["peak_rss_kib"] = child.hwm_kib or None
    return res


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
            "machine": platform.machine(), "numa_nodes": numa_nodes()}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec, unit=""):
    return "-" if x is None else format(x, spec) + unit


def ratio(a, b):
    return a / b if a is not None and b else None


def peer_version(path):
    """" (Debian package libbpf-tools VERSION)" when dpkg knows the file, else ""."""
    try:
        owner = subprocess.run(["dpkg-query", "-S", path], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True).stdout.split(":")[0]
        if not owner:
            return ""
        version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", owner],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True).stdout
        return f" (Debian package {owner} {version})"
    except OSError:
        return ""


def locate_build_dir(arg):
    for d in (arg, os.path.join(REPO, arg)):
        if os.path.isdir(d):
            return os.path.abspath(d)
    sys.exit(f"run_bench: build directory {arg!r} not found")


def summarize(runs, contenders, reps):
    summary = {}
    for c in contenders:
        rs = [r for r in runs if r["contender"] == c["name"] and "error" not in r]
        costs = [r["ns_per_run"] for r in rs if r.get("ns_per_run") is not None]
        summary[c["name"]] = {
            "role": c["role"], "argv": c["argv"][:1] + [a if len(a) < 200 else "<script>"
                                                       for a in c["argv"][1:]],
            "ok_runs": len(rs), "reps": reps,
            "ns_per_run": median(costs),
            "ns_per_run_min": min(costs, default=None),
            "ns_per_run_max": max(costs, default=None),
            "runs_per_workload": median([r["run_cnt"] for r in rs]),
            "startup_ms": median([r["startup_s"] * 1000 for r in rs]),
            "cpu_to_ready_ms": median([r.get("cpu_to_ready_ms") for r in rs]),
            "peak_rss_kib": median([r["peak_rss_kib"] for r in rs]),
            "errors": [r["error"] for r in runs if r["contender"] == c["name"] and "error" in r],
        }
    # The hooks' mix differs from run to run (compaction's pages to migrate, machine-wide
    # page-cache hooks), and a begin costs more than a counter: each contender's cost is taken
    # on the same mix, the floor's median runs per hook, from its own ns per run on each hook.
    floor_name = next((n for n, s in summary.items() if s["role"] == "floor"), None)
    floor_runs = [r for r in runs if r["contender"] == floor_name and "error" not in r]
    weights = {}
    for r in floor_runs:
        for tp in r.get("hooks", {}):
            weights[tp] = median([x["hooks"].get(tp, {}).get("run_cnt", 0) for x in floor_runs])
    weights = {tp: w for tp, w in weights.items() if w and tp != "?"}
    for name, st in summary.items():
        rs = [r for r in runs if r["contender"] == name and "error" not in r]
        per_hook = {tp: median([r["hooks"][tp]["run_time_ns"] / r["hooks"][tp]["run_cnt"]
                                for r in rs if r.get("hooks", {}).get(tp, {}).get("run_cnt")])
                    for tp in weights}
        st["ns_per_run_by_hook"] = per_hook
        st["hook_weights"] = weights
        by_rep = []
        for r in rs:
            total = 0.0
            for tp, w in weights.items():
                h = r.get("hooks", {}).get(tp, {})
                ns = h["run_time_ns"] / h["run_cnt"] if h.get("run_cnt") else per_hook[tp]
                if ns is None:
                    break
                total += w * ns
            else:
                if weights:
                    r["ns_per_run_mix"] = total / sum(weights.values())
                    by_rep.append(r["ns_per_run_mix"])
        st["ns_per_run_raw"] = st["ns_per_run"]
        st["ns_per_run"] = median(by_rep)
        st["ns_per_run_min"] = min(by_rep, default=None)
        st["ns_per_run_max"] = max(by_rep, default=None)
    floor = summary.get(floor_name)
    floor_by_rep = {r["rep"]: r["ns_per_run_mix"] for r in floor_runs if "ns_per_run_mix" in r}
    fl = floor["ns_per_run"] if floor else None
    for s in summary.values():
        s["over_floor_ns"] = s["ns_per_run"] - fl if s["ns_per_run"] is not None and fl else None
    for name, s in summary.items():
        s["x_floor"] = ratio(s["ns_per_run"], fl)
        # Median of the per-repetition differences (same rep: the same moment of the machine).
        s["over_floor_paired_ns"] = median(
            [r["ns_per_run_mix"] - floor_by_rep[r["rep"]] for r in runs
             if r["contender"] == name and "ns_per_run_mix" in r and r["rep"] in floor_by_rep])
        bt = next((b for b in summary.values() if b["role"] == f"bpftrace {s['role']}"), None)
        s["x_bpftrace"] = ratio(s["ns_per_run"], bt["ns_per_run"]) if bt else None
        # What tracing adds, ours over bpftrace's: each over the floor.
        s["over_floor_x_bpftrace"] = (ratio(s["over_floor_ns"], bt["over_floor_ns"])
                                      if bt and bt.get("over_floor_ns") is not None else None)
        s["startup_x_bpftrace"] = ratio(s["startup_ms"], bt["startup_ms"]) if bt else None
        s["peak_rss_x_bpftrace"] = ratio(s["peak_rss_kib"], bt["peak_rss_kib"]) if bt else None
        peer = next((p for p in summary.values() if p["role"] == "peer"), None)
        if peer and s["role"] in ("default", "trace"):
            s["startup_x_peer"] = ratio(s["startup_ms"], peer["startup_ms"])
            s["cpu_to_ready_x_peer"] = ratio(s["cpu_to_ready_ms"], peer["cpu_to_ready_ms"])
            s["peak_rss_x_peer"] = ratio(s["peak_rss_kib"], peer["peak_rss_kib"])
    return summary


def print_table(results):
    m = results["machine"]
    print(f"machine: Linux {m['kernel']} {m['machine']}, {m['cpu_model']}, nproc={m['nproc']}, "
          f"NUMA nodes={m['numa_nodes']}")
    print(f"{results['reps']} interleaved reps per tool, medians; {results['elapsed_s']:.0f} s "
          f"total")
    print()
    head = (f"{'tool':<20}{'contender':<34}{'ns/run':>8}{'min-max':>12}{'runs':>8}"
            f"{'vs floor':>10}{'paired':>9}{'x floor':>8}{'x bpftr':>8}{'x bt+':>7}{'startup':>9}"
            f"{'CPU':>8}{'peak RSS':>10}")
    print(head)
    print("-" * len(head))
    for tool, g in results["tools"].items():
        if g.get("unavailable"):
            print(f"{tool:<20}skipped: {g['unavailable']}")
            continue
        for name, s in g["summary"].items():
            is_floor = s["role"] == "floor"
            rss = s["peak_rss_kib"] / 1024 if s["peak_rss_kib"] else None
            start = (f"{fmt(s['startup_ms'], '.0f', ' ms'):>9}"
                     f"{fmt(s['cpu_to_ready_ms'], '.1f', ' ms'):>8}{fmt(rss, '.2f', ' MiB'):>10}")
            if not s["ok_runs"]:
                print(f"{tool:<20}{name:<34}  failed: "
                      f"{(s['errors'] or ['?'])[0].splitlines()[0][:70]}")
                continue
            if s["ns_per_run"] is None:
                # Its start-up and memory are measured all the same.
                print(f"{tool:<20}{name:<34}{'no BPF program run: no events on its hooks':<70}"
                      f"{start}")
                continue
            rng = f"{s['ns_per_run_min']:.0f}-{s['ns_per_run_max']:.0f}"
            print(f"{tool:<20}{name:<34}{s['ns_per_run']:>8.1f}{rng:>12}"
                  f"{fmt(s['runs_per_workload'], '.0f'):>8}"
                  f"{'(floor)' if is_floor else fmt(s['over_floor_ns'], '+.1f'):>10}"
                  f"{'' if is_floor else fmt(s['over_floor_paired_ns'], '+.1f'):>9}"
                  f"{'' if is_floor else fmt(s['x_floor'], '.2f'):>8}"
                  f"{fmt(s['x_bpftrace'], '.2f'):>8}{fmt(s.get('over_floor_x_bpftrace'), '.2f'):>7}"
                  f"{start}"
                  + ("" if s["ok_runs"] == s["reps"] else f"  ({s['ok_runs']}/{s['reps']} ok)"))
        floor = next((s for s in g["summary"].values() if s["role"] == "floor"), None)
        for name, s in g["summary"].items():
            # Where the time goes: each hook's ns per run over the floor's on that hook.
            if floor is None or s["role"] == "floor" or not s.get("ns_per_run_by_hook"):
                continue
            parts = []
            for tp, ns in s["ns_per_run_by_hook"].items():
                base = floor["ns_per_run_by_hook"].get(tp)
                if ns is not None and base is not None:
                    parts.append(f"{tp} {ns - base:+.0f} (x{s['hook_weights'][tp]:.0f})")
            print(f"{'':<20}{name}: " + ", ".join(parts))
        for name, s in g["summary"].items():
            if s.get("peak_rss_x_peer") is not None:
                print(f"{'':<20}{name} / libbpf-tools {tool}: exec to ready "
                      f"x{fmt(s['startup_x_peer'], '.2f')}, CPU to ready "
                      f"x{fmt(s['cpu_to_ready_x_peer'], '.2f')}, peak RSS "
                      f"x{fmt(s['peak_rss_x_peer'], '.2f')}")
        print()
    sizes = results["binary_sizes"]
    print("binary size: " + ", ".join(f"{t} {n / 1024:.0f} KiB" for t, n in sizes.items()))
    print("ns/run: BPF run time per program run (bpf_stats), per hook, averaged over the "
          "floor's mix of runs per hook (the same mix for every contender of a tool); runs: "
          "program runs per workload; vs floor: difference of the medians; paired: median of "
          "the per-rep differences; x floor, x bpftr: ratios of the medians (bpftrace: the "
          "script doing the same job); x bt+: ratio of what each adds over the floor; the line "
          "under a contender: per hook, its ns per run over the floor's (runs per workload)")
    print("startup: exec to 'memlat: ready' (bpftrace: to its 'Attaching' line, libbpf-tools: "
          "to its 'Tracing' line); CPU: CPU time the process used until then (what other work "
          "on the machine does not inflate); peak RSS: VmHWM of the process (bpftrace's "
          "includes LLVM)")
    print("workloads:")
    for tool, g in results["tools"].items():
        print(f"  {tool}: {g['note']}")
    for n in results["notes"]:
        print(f"note: {n}")


def markdown_table(results):
    """The table as Markdown, for the README's Benchmark section."""
    rows = ["| tool | contender | ns per run | over the floor | x bpftrace | x bpftrace over the "
            "floor | exec to ready | CPU to ready | peak RSS |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for tool, g in results["tools"].items():
        if g.get("unavailable"):
            rows.append(f"| {tool} | skipped: {g['unavailable']} | | | | | | | |")
            continue
        for name, s in g["summary"].items():
            over = "" if s["role"] == "floor" else fmt(s["over_floor_ns"], "+.0f")
            rss = s["peak_rss_kib"] / 1024 if s["peak_rss_kib"] else None
            start = (f"{fmt(s['startup_ms'], '.0f', ' ms')} | "
                     f"{fmt(s['cpu_to_ready_ms'], '.1f', ' ms')} | {fmt(rss, '.2f', ' MiB')}")
            if s["ns_per_run"] is None:
                rows.append(f"| {tool} | `{name}` | no events on its hooks | | | | {start} |")
                continue
            rows.append(f"| {tool} | `{name}` | {s['ns_per_run']:.0f} "
                        f"({s['ns_per_run_min']:.0f}-{s['ns_per_run_max']:.0f}) | {over} | "
                        f"{'' if s['x_bpftrace'] is None else format(s['x_bpftrace'], '.2f')} | "
                        f"{'' if s.get('over_floor_x_bpftrace') is None else format(s['over_floor_x_bpftrace'], '.2f')} | "
                        f"{start} |")
    return "\n".join(rows) + "\n"


# --------------------------------------------------------------------------- main

def main():
    global _libc, mt
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default="build", help="CMake build directory (default: build)")
    ap.add_argument("--tools", default=",".join(TOOLS),
                    help=f"comma-separated tools to measure (default: {','.join(TOOLS)})")
    ap.add_argument("--iterations", type=int, default=20000,
                    help="tlb_workload iterations per measurement (default: 20000)")
    ap.add_argument("--reps", type=int, default=5,
                    help="interleaved repetitions per contender (default: 5)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    ap.add_argument("--markdown", metavar="FILE",
                    help="also write the table as Markdown to FILE (for README.md)")
    ap.add_argument("--no-bpftrace", action="store_true", help="skip the bpftrace scripts")
    ap.add_argument("--compare-build", metavar="DIR[,VAR=VALUE]", action="append", default=[],
                    help="also run each tool's counting mode from another build directory "
                         "(e.g. a build of main), in the same interleaving, optionally with "
                         "an environment variable set; repeatable")
    ap.add_argument("--variant-env", metavar="VAR=VALUE", action="append", default=[],
                    help="also run each tool's counting mode with this environment variable "
                         "set (e.g. MEMLAT_DISABLE_FEATURES=task_btf); repeatable")
    ap.add_argument("--primitive", metavar="BODY", action="append", default=[],
                    help="also run bench_empty -b BODY on each tool's hooks (e.g. clock, lookup, "
                         "clock,lookup,atomic): what each primitive the tools are built of costs "
                         "where they run it, beside the floor; repeatable")
    ap.add_argument("--workloads", choices=("both", "short-lived", "steady"), default="both",
                    help="drsnoop's, compactsnoop's and numamove's workloads: today's "
                         "short-lived threads, the steady state of long-lived ones, or both "
                         "(default)")
    ap.add_argument("--peer-drsnoop", metavar="PATH", default=PEER_DRSNOOP,
                    help="libbpf-tools' drsnoop, measured beside drsnoop (default: "
                         f"{PEER_DRSNOOP}, Debian's libbpf-tools package); '' skips it")
    args = ap.parse_args()

    tools = [t for t in args.tools.split(",") if t]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown or not tools:
        ap.error(f"--tools: unknown {', '.join(unknown) or '(none given)'}; "
                 f"known: {', '.join(TOOLS)}")
    if args.reps < 1 or args.iterations < 1:
        ap.error("--reps and --iterations must be positive")
    if os.geteuid() != 0:
        sys.exit("run_bench: needs root (bpf_stats_enabled, BPF programs)")
    if not shutil.which("bpftool"):
        sys.exit("run_bench: bpftool not found")
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        _libc = None

    bd = locate_build_dir(args.build_dir)
    variants = []
    for other in args.compare_build:
        path, comma, assignment = other.partition(",")
        d = locate_build_dir(path)
        label, env = os.path.basename(d.rstrip("/")), None
        if comma:
            var, eq, value = assignment.partition("=")
            if not eq or not var:
                ap.error(f"--compare-build: {assignment!r} is not VAR=VALUE")
            label, env = f"{label} {assignment}", {var: value}
        variants.append((label, d, env))
    for assignment in args.variant_env:
        var, eq, value = assignment.partition("=")
        if not eq or not var:
            ap.error(f"--variant-env: {assignment!r} is not VAR=VALUE")
        variants.append((assignment, None, {var: value}))
    needed = [os.path.join(bd, "bench_empty")] + [os.path.join(bd, t) for t in tools]
    for p in needed:
        if not os.access(p, os.X_OK):
            sys.exit(f"run_bench: {p} missing; build first (cmake --build {args.build_dir})")
    os.environ["MEMLAT_BUILD_DIR"] = bd
    sys.path.insert(0, os.path.join(REPO, "tests", "runtime"))
    import memlat_test  # noqa: E402 (the runtime tests' cgroup and file helpers)
    mt = memlat_test
    mt.log = log  # its progress lines go to stderr here: stdout is the table

    notes = []
    bpftrace = None
    if args.no_bpftrace:
        notes.append("bpftrace scripts skipped (--no-bpftrace)")
    elif not shutil.which("bpftrace"):
        notes.append("bpftrace scripts skipped: bpftrace not installed (apt-get install "
                     "bpftrace)")
    else:
        bpftrace = shutil.which("bpftrace")
    peers = {}
    if not args.peer_drsnoop:
        notes.append("libbpf-tools' drsnoop skipped (--peer-drsnoop '')")
    elif not os.access(args.peer_drsnoop, os.X_OK):
        notes.append(f"libbpf-tools' drsnoop skipped: no {args.peer_drsnoop} (apt-get install "
                     "libbpf-tools)")
    else:
        peers["drsnoop"] = args.peer_drsnoop
        notes.append(f"libbpf-tools drsnoop: {args.peer_drsnoop}{peer_version(args.peer_drsnoop)}"
                     "; it traces global direct reclaim only, so on the memory-cgroup workload "
                     "its programs run no event: its start-up and memory are measured")
    notes.append("kprobes and fentry programs are not measured: the tools use tracepoints "
                 "where they have them, and numamove --per-call (per call) needs fentry or kprobes")

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    # Explicitly, since a shell starting us in the background may have set SIGINT to SIG_IGN.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, on_term)

    with open(STATS_SYSCTL) as f:
        old_stats = f.read().strip()
    results = {"machine": machine(), "reps": args.reps, "build_dir": bd, "notes": notes,
               "tools": {}}
    groups = [g for g in make_groups(bd, args) if g.tool in tools]
    # Each tool on its short-lived workload, then, for the begin/end tools, on the steady one.
    measured = [(g, kind) for g in groups for kind in ("short-lived", "steady")
                if kind != "steady" or (g.steady and args.workloads != "short-lived")]
    if args.workloads == "steady":
        measured = [(g, kind) for g, kind in measured if kind == "steady"]
    started = time.monotonic()
    try:
        try:
            with open(STATS_SYSCTL, "w") as f:
                f.write("1")
            for g, workload_kind in measured:
                steady = workload_kind == "steady"
                key = f"{g.tool} steady" if steady else g.tool
                contenders = contenders_of(g, bd, bpftrace, {} if steady else peers, variants,
                                             args.primitive)
                entry = {"note": g.steady_note if steady else g.note, "hooks": g.hooks,
                         "workload": workload_kind, "runs": []}
                results["tools"][key] = entry
                try:
                    with (g.steady if steady else g.setup)() as workload:
                        for rep in range(args.reps):
                            for c in contenders:
                                try:
                                    r = one_run(c, g, workload, warmup=steady)
                                except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                                    r = {"contender": c["name"], "role": c["role"],
                                         "error": str(e)}
                                    log(f"run_bench: {key} rep {rep + 1} {c['name']}: {e}")
                                else:
                                    log(f"run_bench: {key} rep {rep + 1}/{args.reps} "
                                        f"{c['name']:<34} "
                                        f"{fmt(r['ns_per_run'], '.1f', ' ns/run')} "
                                        f"({r['run_cnt']} runs), startup "
                                        f"{r['startup_s'] * 1000:.0f} ms")
                                r["rep"] = rep
                                entry["runs"].append(r)
                except Unavailable as e:
                    entry["unavailable"] = str(e)
                    log(f"run_bench: {key} skipped: {e}")
                    continue
                entry["summary"] = summarize(entry["runs"], contenders, args.reps)
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

    sizes = {}
    for t in TOOLS + ["bench_empty"]:
        p = os.path.join(bd, t)
        if os.path.isfile(p):
            sizes[t] = os.path.getsize(p)
    if bpftrace:
        sizes["bpftrace (dynamic, without its libraries)"] = os.path.getsize(bpftrace)
    results["binary_sizes"] = sizes
    print_table(results)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown_table(results))
        print(f"wrote {args.markdown}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
        print(f"wrote {args.json}")
    ok = all(g.get("unavailable") or all(s["ok_runs"] for s in g["summary"].values())
             for g in results["tools"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
