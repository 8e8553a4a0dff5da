#!/usr/bin/env python3
"""Runtime tests of lockstall: an mmap_lock convoy made on purpose, against the kernel's own
trace of it.

The lock_convoy workload maps 256 MiB in small pages and touches them; its child, named
convoy_reader (the "monitor"), reads the parent's /proc/PID/smaps_rollup in a loop, holding
the parent's mmap_lock for reading for the whole walk (a few ms); a thread maps and unmaps a
page in a loop and two others flip a page's protection (both take the lock for writing, and
queue behind the reader).

The oracle is an ftrace instance of our own on the three mmap_lock events, for the workload
and every process and thread it makes (set_event_pid, event-fork), on the monotonic clock that
bpf_ktime_get_ns() reads: pairing start_locking with acquire_returned per thread gives every
wait, acquire_returned with released every hold. The workload is held at the door until both
lockstall and the oracle run, and has exited before either stops: both see the same waits.
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lock_oracle import (EVENTS, MIN_WAIT_NS, EDGE_NS, RECLAIM_EVENTS, SAME_WAIT_NS,  # noqa
                         check_holders, check_waits, long_waits, pair, reclaim_within,
                         reclaims)
from memlat_test import (FtraceOracle, MemoryCgroup, Test, Tool, Workload,  # noqa: E402
                         check_bad_arguments, check_help, check_variant_chosen, log, main,
                         pprof_raw, read_file, scenario, shared_bad_arguments, skip, variant_env,
                         variant_scenarios)
from tolerances import LOCK_HOLDER_RECLAIM  # noqa: E402

SECONDS = "1"


def require_mmap_lock_events() -> None:
    if not os.path.isdir("/sys/kernel/tracing/events/mmap_lock"):
        skip("the kernel has no mmap_lock tracepoints (Linux 5.11+)")


def traced(t: Test, w: Workload, events: list[str], meanwhile=None, also=()) -> dict:
    """Releases the held workload `w` under an ftrace oracle of `events` (its threads and the
    threads `also`, on the monotonic clock), runs `meanwhile()` while it runs, waits for its
    end; the oracle's events."""
    # ~400,000 events a second in the convoy, 40-odd bytes each in the ring buffer.
    with FtraceOracle(events, w.pid, buffer_kb=65536, clock="mono", threads=True,
                      also=also) as oracle:
        w.release()
        while meanwhile is not None and w.proc.poll() is None:
            meanwhile()
        if w.wait_exit(60) != 0:
            t.require(False, "lock_convoy's exit status", 0, w.proc.returncode)
        return oracle.stop()


def run_convoy(t: Test, *workload_args: str, variant: str = "", tool_args: tuple = (),
               every: list | None = None) -> tuple[list[dict], list[dict], list[dict], dict]:
    """lockstall -j (its feature `variant`, and `tool_args`) beside the oracle around one run
    of lock_convoy; the tool's waits of the workload's processes, the oracle's waits and
    holds, and the workload's pids. `every` receives all the tool's waits."""
    require_mmap_lock_events()
    with Tool("lockstall", "-v", "-j", *tool_args, env=variant_env(variant)) as tool:
        with Workload("lock_convoy", "--seconds", SECONDS, *workload_args, held=True) as w:
            events = traced(t, w, EVENTS)
        res = tool.stop()
    t.check_eq("lockstall exit status after SIGINT", 0, res.rc)
    check_variant_chosen(t, variant, res.stderr, events=True)
    first = w._out.lines[0] if w._out.lines else ""
    pids = dict(kv.split("=") for kv in first.split())
    ours = {int(pids.get("pid", 0)), int(pids.get("reader", 0))} - {0}
    waits, holds = pair(events)
    if every is not None:
        every.extend(e for e in res.json_lines() if e.get("type") == "event")
    tool_waits = [e for e in res.json_lines() if e.get("type") == "event" and e["pid"] in ours]
    summary = [e for e in res.json_lines() if e.get("type") == "summary"]
    t.check_eq("lockstall: events lost", 0, summary[0]["lost_events"] if summary else None)
    log(f"  oracle: {sum(len(v) for v in events.values())} events, {len(waits)} waits, "
        f"{len(holds)} holds; lockstall: {len(tool_waits)} waits of the workload")
    return tool_waits, waits, holds, {k: int(v) for k, v in pids.items()}


@variant_scenarios("lockstall_convoy_vs_ftrace", btf_file=True, unprivileged=True)
def _(t: Test, variant: str):
    """The convoy: lockstall's waits of 1 ms or more are the oracle's, wait for wait; each names
    the holds of 0.1 ms or more released while it waited (the oracle's, by thread); the reader
    is named the root (the first holder) of every wait it was the root of. Also on the old
    kernels' paths (perf buffers, no kernel BTF), with a --btf file, and as nobody."""
    tool_waits, waits, holds, pids = run_convoy(t, variant=variant)
    t.require(len(long_waits(waits, MIN_WAIT_NS + EDGE_NS)) >= 50,
              "waits of 1 ms or more in the convoy (oracle)", ">= 50",
              len(long_waits(waits, MIN_WAIT_NS + EDGE_NS)))
    matched = check_waits(t, tool_waits, waits)
    compared, reader_root, named_reader = check_holders(t, tool_waits, waits, holds, matched,
                                                        pids["reader"])
    t.require(reader_root >= 20, "waits whose first holder was the reader (oracle)", ">= 20",
              reader_root)
    t.check_eq("of those, the reader named the root, reading smaps_rollup", reader_root,
               named_reader)


@scenario("lockstall_no_reader")
def _(t: Test):
    """The same work without the reader: no convoy behind a /proc reader. lockstall's waits of
    1 ms or more are still the oracle's (a writer preempted while it holds the lock, both CPUs
    busy, makes the others wait: 150-odd a run here), each with the oracle's holders, and no
    holder reads /proc."""
    tool_waits, waits, holds, pids = run_convoy(t, "--no-reader")
    t.check_eq("the workload ran without its reader", 0, pids.get("reader"))
    matched = check_waits(t, tool_waits, waits)
    if matched:
        check_holders(t, tool_waits, waits, holds, matched)
    t.check_eq("holders reading a /proc file", [],
               [(e["tid"], h["comm"], h["op"]) for e in tool_waits for h in e["holders"]
                if h["op"].startswith("/proc")][:5])


@scenario("lockstall_profile")
def _(t: Test):
    """--folded-file and --pprof of the convoy, beside -j: the waits (checked against the
    oracle as in lockstall_convoy_vs_ftrace) are the profile's, their time exactly, by waiter
    and by the root hold each is drawn behind; go tool pprof reads the same."""
    with tempfile.TemporaryDirectory() as scratch:
        folded_path = os.path.join(scratch, "waits.folded")
        pprof_path = os.path.join(scratch, "waits.pb.gz")
        every: list[dict] = []
        tool_waits, waits, holds, pids = run_convoy(
            t, tool_args=("--folded-file", folded_path, "--pprof", pprof_path), every=every)
        matched = check_waits(t, tool_waits, waits)
        check_holders(t, tool_waits, waits, holds, matched, pids["reader"])
        folded = read_file(folded_path).splitlines()
        samples, names = pprof_raw(t, pprof_path)
    t.require(all(re.fullmatch(r"\S.* \d+", line) for line in folded),
              "--folded-file: every line is 'frames value'", "all", folded[:2])
    lines = [(line.rsplit(" ", 1)[0].split(";"), int(line.rsplit(" ", 1)[1])) for line in folded]
    t.check_eq("--folded-file: wait time = the waits' (-j, the same run; exact)",
               sum(e["wait_ns"] for e in every), sum(v for _, v in lines))
    by_waiter: dict[str, int] = {}
    for frames, v in lines:
        by_waiter[";".join(frames[:2])] = by_waiter.get(";".join(frames[:2]), 0) + v
    expected: dict[str, int] = {}
    for e in every:
        key = f"mmap_lock {e['mode']};{e['comm']}-{e['pid']}"
        expected[key] = expected.get(key, 0) + e["wait_ns"]
    t.check_eq("--folded-file: wait time by root frames (mode, then the waiter; exact)",
               expected, by_waiter)
    reader = f"behind convoy_reader-{pids['reader']} /proc smaps_rollup"
    t.check_eq("--folded-file: wait time drawn behind the reader = the waits whose root it is "
               "(exact)",
               sum(e["wait_ns"] for e in every
                   if e["holders"] and e["holders"][0]["tid"] == pids["reader"]),
               sum(v for frames, v in lines if reader in frames))
    t.check(any(reader in frames and frames.index(reader) < len(frames) - 1 and
                "show_smaps_rollup_[k]" in frames[frames.index(reader) + 1:]
                for frames, _ in lines),
            "the reader's own stack drawn above it (show_smaps_rollup, a kernel frame)",
            "present", [f for f, _ in lines][:1])
    t.check_eq("--pprof: waits = the waits (-j; exact)", len(every),
               sum(s["values"][0] for s in samples))
    t.check_eq("--pprof: wait time = the waits' (-j; exact)",
               sum(e["wait_ns"] for e in every), sum(s["values"][1] for s in samples))
    t.check_eq("--pprof: waits labelled root_comm convoy_reader",
               sum(1 for e in every if e["holders"] and e["holders"][0]["tid"] == pids["reader"]),
               sum(s["values"][0] for s in samples
                   if s["labels"].get("root_comm") == "convoy_reader"))
    drawn = sum(s["values"][0] for s in samples
                if any(names.get(loc) == "show_smaps_rollup" for loc in s["locations"]))
    t.check(drawn >= 1, "--pprof: waits drawn with the reader's stack (show_smaps_rollup)",
            ">= 1", drawn)


@scenario("lockstall_holder_in_reclaim")
def _(t: Test):
    """A holder that stalls on memory: lock_convoy's convoy_populate maps 32 MiB with
    MAP_POPULATE (faulting them in holding the lock for reading) after reading a 64 MiB file,
    in a memory cgroup of 80 MiB: its faults reclaim the file's pages inside the holds the
    writers wait behind. Each such holder's time in reclaim is the oracle's: ftrace's
    mm_vmscan_*_reclaim_begin/end of that thread within that hold."""
    require_mmap_lock_events()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as scratch:
        if os.statvfs(scratch).f_bfree * os.statvfs(scratch).f_frsize < 256 << 20:
            skip("/var/tmp has less than 256 MiB free for the 64 MiB file the holder reads")
        cache = os.path.join(scratch, "cache")
        with open(cache, "wb") as f:
            for _ in range(64):
                f.write(os.urandom(1 << 20))
        if open("/proc/mounts").read().find(" /var/tmp tmpfs ") >= 0:
            skip("/var/tmp is a tmpfs: its pages are not reclaimed without swap")
        with MemoryCgroup("lockstall", limit=80 << 20) as cg, \
                Tool("lockstall", "-v", "-j") as tool:
            with Workload("lock_convoy", "--seconds", SECONDS, "--no-reader", "--map-mb", "16",
                          "--populate-mb", "32", "--cache-file", cache, held=True) as w:
                cg.add(w.pid)
                events = traced(t, w, EVENTS + RECLAIM_EVENTS)
            res = tool.stop()
    t.check_eq("lockstall exit status after SIGINT", 0, res.rc)
    for probe in ("mm_vmscan_direct_reclaim", "mm_vmscan_memcg_reclaim", "mm_compaction"):
        t.check_in(f"-v: {probe}_begin/end attached", f"{probe}_begin/end: using", res.stderr,
                   "stderr")
    waits, holds = pair(events)
    in_reclaim = reclaims(events)
    tool_waits = [e for e in res.json_lines() if e.get("type") == "event" and e["pid"] == w.pid]
    populater = {h["tid"] for e in tool_waits for h in e["holders"]
                 if h["comm"] == "convoy_populate"}
    theirs = {(h["tid"], h["start"]): h for h in holds if h["tid"] in populater}
    compared, stalled, wrong, ours_ns, oracle_ns, worst = 0, 0, [], 0, 0, 0.0
    seen = set()
    for e in tool_waits:
        for h in e["holders"]:
            if h["comm"] != "convoy_populate" or (h["tid"], h["acquired_mono_ns"]) in seen:
                continue
            seen.add((h["tid"], h["acquired_mono_ns"]))
            twin = min(theirs.values(), default=None,
                       key=lambda o: abs(o["start"] - h["acquired_mono_ns"])
                       + abs(o["end"] - h["released_mono_ns"]))
            # The same hold by either end (a timer tick between the two probes of one end
            # moves it by 20-35 us; SAME_WAIT_NS, as for waits).
            if twin is None or min(abs(twin["start"] - h["acquired_mono_ns"]),
                                   abs(twin["end"] - h["released_mono_ns"])) > SAME_WAIT_NS:
                wrong.append(("no oracle hold", h["tid"], h["op"], h["hold_ns"],
                              h["acquired_mono_ns"], twin and (twin["start"], twin["end"])))
                continue
            ns, parts = reclaim_within(in_reclaim.get(h["tid"], []), twin["start"], twin["end"])
            compared += 1
            stalled += ns > 0
            ours_ns += h["reclaim_ns"]
            oracle_ns += ns
            if parts:
                worst = max(worst, abs(h["reclaim_ns"] - ns) / parts)
            if abs(h["reclaim_ns"] - ns) > ns * LOCK_HOLDER_RECLAIM.rel \
                    + LOCK_HOLDER_RECLAIM.abs * 1e3:
                wrong.append((h["tid"], h["hold_ms"], parts, ns, h["reclaim_ns"]))
    log(f"  {len(tool_waits)} waits; {compared} holds of convoy_populate named, {stalled} with "
        f"reclaim in them by the oracle: {oracle_ns / 1e6:.3f} ms (oracle), "
        f"{ours_ns / 1e6:.3f} ms (lockstall); at most {worst / 1e3:.1f} us apart a reclaim")
    t.require(stalled >= 5, "holds of the populating thread with reclaim in them (oracle)",
              ">= 5", stalled)
    t.check_eq("holders whose time in reclaim is not the oracle's within "
               f"{LOCK_HOLDER_RECLAIM.allowed()} (tid, hold ms, reclaims, oracle ns, tool ns)",
               [], wrong[:5])
    t.check_close("the named holds' time in reclaim (ms), tool vs oracle "
                  f"({LOCK_HOLDER_RECLAIM.name})", oracle_ns / 1e6, ours_ns / 1e6,
                  rel_tol=LOCK_HOLDER_RECLAIM.rel)


PROCESS_EXPORTER = "/usr/bin/prometheus-process-exporter"


@scenario("lockstall_monitor_root")
def _(t: Test):
    """A real monitor as the root: Debian's prometheus-process-exporter, watching lock_convoy
    (run without its own reader) and scraped in a loop, reads the workload's smaps_rollup at
    each scrape. The oracle (ftrace on the workload's threads and the exporter's) has the
    waits and their holders; where the exporter's read was the first holder, lockstall names
    it the root, reading smaps_rollup, and flags it as the monitor process-exporter (by its
    thread name); no other holder is flagged."""
    require_mmap_lock_events()
    if not os.access(PROCESS_EXPORTER, os.X_OK):
        skip(f"{PROCESS_EXPORTER} is not installed (scripts/install-deps.sh installs "
             "prometheus-process-exporter)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/metrics"
    exporter = subprocess.Popen([PROCESS_EXPORTER, "-procnames", "lock_convoy",
                                 "-web.listen-address", f"127.0.0.1:{port}"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    scrapes = 0
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                if exporter.poll() is not None or time.monotonic() > deadline:
                    t.require(False, "prometheus-process-exporter serves", url, "no answer")
                time.sleep(0.1)
        threads = [int(tid) for tid in os.listdir(f"/proc/{exporter.pid}/task")]
        with Tool("lockstall", "-j") as tool:
            # Writers paused 100 us an iteration: the convoys behind the exporter's reads stay,
            # the trace the oracle parses is a tenth of the full convoy's.
            with Workload("lock_convoy", "--seconds", "2", "--no-reader", "--pause-us", "100",
                          held=True) as w:
                def scrape() -> None:
                    nonlocal scrapes
                    urllib.request.urlopen(url, timeout=10).read()
                    scrapes += 1
                events = traced(t, w, EVENTS, meanwhile=scrape, also=threads)
            res = tool.stop()
    finally:
        exporter.terminate()
        exporter.wait(10)
    t.check_eq("lockstall exit status after SIGINT", 0, res.rc)
    waits, holds = pair(events)
    # The exporter's threads: those it had, and those it made since (its name, "prometheus-
    # proc" as the kernel cuts it, in the trace).
    monitor = {int(e["_tid"]) for es in events.values() for e in es
               if e["_comm"] == "prometheus-proc"} | set(threads)
    # The exporter's threads wait too (for the workload's lock, reading its files).
    tool_waits = [e for e in res.json_lines()
                  if e.get("type") == "event" and e["pid"] in (w.pid, exporter.pid)]
    log(f"  {scrapes} scrapes of process-exporter; oracle: {len(waits)} waits, {len(holds)} "
        f"holds; lockstall: {len(tool_waits)} waits of the workload")
    matched = check_waits(t, tool_waits, waits)
    # It reads the workload's smaps_rollup, and also its cmdline (to match -procnames).
    _, root, named = check_holders(t, tool_waits, waits, holds, matched, monitor, "/proc ")
    t.require(root >= 5, "waits whose first holder was the exporter (oracle)", ">= 5", root)
    t.check_eq("of those, the exporter named the root, reading a /proc file", root, named)
    flags = {(h["pid"] == exporter.pid, h["monitor"]) for e in tool_waits for h in e["holders"]}
    t.check_eq("holders flagged as a monitor: the exporter's as process-exporter, no other",
               set(), {f for f in flags if f not in {(True, "process-exporter"), (False, None)}})
    t.check((True, "process-exporter") in flags, "the exporter among the holders, flagged",
            "present", sorted(flags, key=str))


@scenario("lockstall_help")
def _(t: Test):
    check_help(t, "lockstall", ["--min-wait", "--min-hold", "--stacks", "--pid", "--cgroup",
                                "--json", "--duration", "--folded", "--folded-file", "--pprof"])


@scenario("lockstall_bad_input")
def _(t: Test):
    check_bad_arguments(t, "lockstall", [
        (["-m", "-1"], "-m takes milliseconds"),
        (["-m", "nan"], "-m takes milliseconds"),
        (["--min-hold", "-5"], "--min-hold takes milliseconds"),
        (["-m", "x"], "-m"),
        (["--prometheus", "127.0.0.1:0", "-s"], "go with the per-wait output"),
        (["--prometheus", "127.0.0.1:0", "--pprof", "/tmp/x.pb.gz"],
         "go with the per-wait output"),
        (["--folded", "-j"], "--folded prints the folded stacks alone"),
        (["--pprof", "/nonexistent/dir/w.pb.gz"],
         "--pprof /nonexistent/dir/w.pb.gz: cannot write there"),
        (["1"], "unexpected"),
    ] + shared_bad_arguments(cgroup=True))


if __name__ == "__main__":
    sys.exit(main())
