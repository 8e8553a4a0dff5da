#!/usr/bin/env python3
"""Shared harness of the runtime tests: real tools on the live kernel, as root.

A test script defines scenarios with @scenario and ends with `sys.exit(main())`; ctest runs
`python3 <script> <scenario>` (see tests/CMakeLists.txt). Exit status: 0 passed, 1 failed,
77 skipped (printed as "skipped: <reason>").

    from memlat_test import *

    @scenario("tlbflush_something")
    def _(t: Test):
        with Tool("tlbflush", "-j") as tool:      # started with MEMLAT_READY=1, waits for ready
            run_workload("tlb_workload", "--seconds", "1")
        res = tool.result                         # rc, stdout, stderr (stopped with SIGINT)
        t.check_close("events", expected=..., actual=..., rel_tol=0.02)

Every check prints what is compared, the expected and actual values and the tolerance, then
"ok" or "FAIL"; a scenario fails if any check failed. t.require() stops the scenario at once.
Only the standard library is used (Python 3.8+).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Callable, Iterable, Optional, Sequence

SKIP_STATUS = 77
READY_LINE = "memlat: ready"
READY_TIMEOUT = 20.0      # seconds for a tool to print READY_LINE
STOP_TIMEOUT = 15.0       # seconds for a tool to exit after SIGINT
TRACEFS = "/sys/kernel/tracing"


class Skip(Exception):
    """Raised by skip(): the scenario cannot run here (exit status 77)."""


class Failure(Exception):
    """Raised by Test.require() and by harness errors: the scenario failed (exit status 1)."""


def log(msg: str = "") -> None:
    print(msg, flush=True)


def skip(reason: str) -> None:
    raise Skip(reason)


# ---------------------------------------------------------------- locating binaries

def build_dir() -> str:
    d = os.environ.get("MEMLAT_BUILD_DIR")
    if not d:
        raise Failure("MEMLAT_BUILD_DIR is not set (ctest sets it to the CMake build directory)")
    return d


def binary(name: str) -> str:
    """Path of a tool (BUILD/name) or a test workload (BUILD/tests/name); fails if absent."""
    for sub in ("", "tests"):
        path = os.path.join(build_dir(), sub, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise Failure(f"binary {name!r} not found in {build_dir()} or {build_dir()}/tests: build it first")


# ---------------------------------------------------------------- machine preconditions

def require_root() -> None:
    if os.geteuid() != 0:
        skip("needs root (BPF programs and tracepoints)")


def ensure_tracefs() -> None:
    """Mount tracefs at /sys/kernel/tracing if it is not mounted there (harmless if it is)."""
    try:
        with open("/proc/mounts") as f:
            if any(line.split()[1] == TRACEFS for line in f if len(line.split()) > 1):
                return
    except OSError:
        pass
    if not os.path.isdir(TRACEFS):
        return
    r = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True,
                       text=True, timeout=10)
    if r.returncode != 0:
        log(f"note: could not mount tracefs on {TRACEFS}: {r.stderr.strip()}")


def online_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def require_cpus(*cpus: int) -> None:
    have = set(online_cpus())
    missing = [c for c in cpus if c not in have]
    if missing:
        skip(f"needs CPUs {list(cpus)} online and usable; this machine has {sorted(have)}")


# ---------------------------------------------------------------- /proc/interrupts

def interrupt_row(name: str) -> list[int]:
    """Per-CPU counts of one /proc/interrupts row (e.g. "TLB"), indexed like the header."""
    with open("/proc/interrupts") as f:
        header = f.readline().split()
        ncpu = len(header)
        for line in f:
            fields = line.split()
            if fields and fields[0] == name + ":":
                return [int(x) for x in fields[1:1 + ncpu]]
    raise KeyError(name)


def tlb_interrupts() -> list[int]:
    """The "TLB shootdowns" row of /proc/interrupts, per CPU (skips when there is none)."""
    try:
        return interrupt_row("TLB")
    except KeyError:
        skip("/proc/interrupts has no TLB row (not x86?)")
        raise  # unreachable


# ---------------------------------------------------------------- other processes

def processes_named(comm: str) -> set[int]:
    """PIDs of the processes whose comm is `comm` (15 characters at most)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() == comm[:15]:
                        pids.add(int(entry))
            except OSError:
                pass
    return pids


class ProcessWatch:
    """Context manager noting, every `period` seconds, which processes named `comm` run:
    tests that count machine-wide events use it to tell whether another copy of their
    workload (another test or a benchmark on the same machine) ran at the same time.
    `seen` holds all PIDs seen; remove your own before concluding."""

    def __init__(self, comm: str, period: float = 0.05):
        self.comm = comm
        self.period = period
        self.seen: set[int] = set()
        self._stop = threading.Event()

    def _run(self) -> None:
        while True:
            self.seen |= processes_named(self.comm)
            if self._stop.wait(self.period):
                break

    def __enter__(self) -> "ProcessWatch":
        self.seen |= processes_named(self.comm)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self.seen |= processes_named(self.comm)


def wait_quiet(comm: str, quiet_for: float = 1.0, timeout: float = 20.0,
               mine: Iterable[int] = ()) -> bool:
    """Waits until no process named `comm` (other than `mine`) has run for `quiet_for`
    seconds; False if the machine was not quiet within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    while True:
        if processes_named(comm) - set(mine):
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_for:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def bpf_ids_of(pid: int) -> dict[str, set[int]]:
    """IDs of the BPF programs and links a process holds open, from /proc/PID/fdinfo:
    {"prog": {...}, "link": {...}}. A link's program is reported under "prog" too."""
    ids: dict[str, set[int]] = {"prog": set(), "link": set()}
    fddir = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fddir):
        try:
            with open(os.path.join(fddir, fd)) as f:
                info = f.read()
        except OSError:
            continue
        for kind in ("prog", "link"):
            m = re.search(rf"^{kind}_id:\s*(\d+)", info, re.M)
            if m:
                ids[kind].add(int(m.group(1)))
    return ids


# ---------------------------------------------------------------- output collection

class _Collector(threading.Thread):
    """Reads a pipe to the end in the background so that the child never blocks on it."""

    def __init__(self, pipe, on_line: Optional[Callable[[str], None]] = None):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.on_line = on_line
        self.lines: list[str] = []
        self.start()

    def run(self) -> None:
        for raw in iter(self.pipe.readline, b""):
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            if self.on_line:
                self.on_line(line)
        self.pipe.close()

    def text(self, timeout: float = 5.0) -> str:
        self.join(timeout)
        return "".join(self.lines)


class Result:
    def __init__(self, argv: Sequence[str], rc: Optional[int], stdout: str, stderr: str,
                 elapsed: float):
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed

    def json_lines(self) -> list[dict]:
        """stdout parsed as JSON lines; a line that does not parse is a test failure."""
        out = []
        for n, line in enumerate(self.stdout.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise Failure(f"stdout line {n} of {' '.join(self.argv)} is not JSON ({e}): "
                              f"{line[:300]!r}")
        return out

    def describe(self, limit: int = 2000) -> str:
        def cut(s: str) -> str:
            return s if len(s) <= limit else s[:limit] + f"... [{len(s) - limit} more chars]"
        return (f"command: {' '.join(self.argv)}\nexit status: {self.rc}\n"
                f"--- stderr ---\n{cut(self.stderr)}--- stdout ---\n{cut(self.stdout)}")


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


class Tool:
    """Context manager running a memlat tool with MEMLAT_READY=1.

    On entry it starts the tool and waits (READY_TIMEOUT) for "memlat: ready" on stderr; if
    the tool exits or times out first, that is a Failure showing its output. The body then
    runs the workload. On exit the tool is stopped with SIGINT (unless it already ended, or
    wait_exit=True: then it is left to end by itself, e.g. with -d or an interval count) and
    `result` holds its exit status and output. The tool is killed if anything goes wrong."""

    def __init__(self, name: str, *args: str, env: Optional[dict] = None,
                 wait_exit: bool = False, exit_timeout: float = 30.0,
                 ready_timeout: float = READY_TIMEOUT):
        self.argv = [binary(name), *args]
        self.env = dict(os.environ, MEMLAT_READY="1", **(env or {}))
        self.extra_env = env or {}
        self.wait_exit = wait_exit
        self.exit_timeout = exit_timeout
        self.ready_timeout = ready_timeout
        self.proc: Optional[subprocess.Popen] = None
        self.result: Optional[Result] = None
        self.ready_at: Optional[float] = None
        self._ready = threading.Event()

    def _on_stderr(self, line: str) -> None:
        if line.strip() == READY_LINE:
            self._ready.set()

    def __enter__(self) -> "Tool":
        envs = " ".join(f"{k}={v}" for k, v in self.extra_env.items())
        log(f"$ {envs + ' ' if envs else ''}{' '.join(self.argv)}")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env, start_new_session=True)
        self._out = _Collector(self.proc.stdout)
        self._err = _Collector(self.proc.stderr, self._on_stderr)
        deadline = time.monotonic() + self.ready_timeout
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                why = ("exited before it was ready" if self.proc.poll() is not None
                       else f"was not ready within {self.ready_timeout:.0f} s")
                self._finish(stop=False, timeout=0.2, quiet=True)
                raise Failure(f"the tool {why}\n{self.result.describe()}")
        self.ready_at = time.monotonic()
        log(f"  tool ready after {self.ready_at - self.started_at:.2f} s (pid {self.proc.pid})")
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> Result:
        """SIGINT the tool (if still running) and collect its output."""
        if self.result is None:
            self._finish(stop=True)
        return self.result

    def wait(self) -> Result:
        """Let the tool end by itself (within exit_timeout) and collect its output."""
        if self.result is None:
            self._finish(stop=False, timeout=self.exit_timeout)
        return self.result

    def _finish(self, stop: bool, timeout: float = STOP_TIMEOUT, quiet: bool = False) -> None:
        proc = self.proc
        if stop and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = not quiet
        _kill_group(proc)
        end = time.monotonic()
        self.result = Result(self.argv, None if timed_out else proc.returncode,
                             self._out.text(), self._err.text(), end - self.started_at)
        if timed_out:
            raise Failure(f"the tool did not exit within {timeout:.0f} s "
                          f"{'of SIGINT' if stop else 'by itself'}; killed\n"
                          f"{self.result.describe()}")

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            if self.proc is not None:
                _kill_group(self.proc)
            return
        if self.wait_exit:
            self.wait()
        else:
            self.stop()


def run(argv: Sequence[str], timeout: float = 30.0, env: Optional[dict] = None) -> Result:
    """Runs a command to its end (killed after timeout: a Failure)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, **(env or {})),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        res = Result(argv, None, out.decode(errors="replace"), err.decode(errors="replace"),
                     time.monotonic() - t0)
        raise Failure(f"command did not finish within {timeout:.0f} s; killed\n{res.describe()}")
    finally:
        _kill_group(proc)
    return Result(argv, proc.returncode, out.decode(errors="replace"),
                  err.decode(errors="replace"), time.monotonic() - t0)


# ---------------------------------------------------------------- workloads

class Workload:
    """A workload started in the background; always killed on exit of the `with` block.

    held=True starts it held at the door: the process exists (so its PID can be given to a
    tool's -p) but exec()s the workload only when release() is called; the PID stays the
    same across the exec."""

    def __init__(self, name: str, *args: str, held: bool = False):
        self.argv = [binary(name), *args]
        self.held = held
        self.proc: Optional[subprocess.Popen] = None
        self._pid_line = threading.Event()

    def _on_stdout(self, line: str) -> None:
        if line.startswith("pid="):
            self._pid_line.set()

    def __enter__(self) -> "Workload":
        argv = self.argv
        if self.held:
            argv = ["/bin/sh", "-c", 'read -r _go && exec "$0" "$@"', *self.argv]
        log(f"$ {' '.join(self.argv)}{'   (held until released)' if self.held else ''}")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE if self.held else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.pid = self.proc.pid
        self._out = _Collector(self.proc.stdout, self._on_stdout)
        self._err = _Collector(self.proc.stderr)
        return self

    def release(self) -> None:
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()

    def wait_done(self, timeout: float) -> dict:
        """Waits for the "pid=P iterations=N" line (the loop ended; it may still linger)."""
        if not self._pid_line.wait(timeout):
            self.kill()
            raise Failure(f"workload did not report within {timeout:.0f} s\n"
                          f"stdout: {self._out.text(1)!r}\nstderr: {self._err.text(1)!r}")
        for line in self._out.lines:
            m = re.match(r"pid=(\d+) iterations=(\d+)", line)
            if m:
                return {"pid": int(m.group(1)), "iterations": int(m.group(2))}
        raise Failure(f"unexpected workload output {''.join(self._out.lines)!r}")

    def kill(self) -> None:
        if self.proc is not None:
            _kill_group(self.proc)

    def __exit__(self, *exc) -> None:
        self.kill()


def run_workload(name: str, *args: str, timeout: float = 60.0) -> dict:
    """Runs a workload to its end; returns {"pid", "iterations"} from its last line."""
    log(f"$ {binary(name)} {' '.join(args)}")
    res = run([binary(name), *args], timeout=timeout)
    m = re.search(r"pid=(\d+) iterations=(\d+)", res.stdout)
    if res.rc != 0 or not m:
        raise Failure(f"workload failed\n{res.describe()}")
    return {"pid": int(m.group(1)), "iterations": int(m.group(2))}


# ---------------------------------------------------------------- checks and scenarios

class Test:
    """Checks of one scenario. Each prints one line: ok/FAIL, what, expected, actual."""

    def __init__(self, name: str):
        self.name = name
        self.failures: list[str] = []
        self.checks = 0

    def _report(self, ok: bool, what: str, detail: str) -> bool:
        self.checks += 1
        line = f"{'ok  ' if ok else 'FAIL'}  {what}: {detail}"
        log(line)
        if not ok:
            self.failures.append(line)
        return ok

    def check(self, ok: bool, what: str, expected: str = "", actual: object = "") -> bool:
        return self._report(bool(ok), what, f"expected {expected}, actual {actual}")

    def check_eq(self, what: str, expected: object, actual: object) -> bool:
        return self._report(expected == actual, what,
                            f"expected {expected!r}, actual {actual!r} (exact)")

    def check_ge(self, what: str, minimum: float, actual: float, how: str = "") -> bool:
        return self._report(actual >= minimum, what,
                            f"expected >= {_num(minimum)}{' (' + how + ')' if how else ''}, "
                            f"actual {_num(actual)}")

    def check_le(self, what: str, maximum: float, actual: float, how: str = "") -> bool:
        return self._report(actual <= maximum, what,
                            f"expected <= {_num(maximum)}{' (' + how + ')' if how else ''}, "
                            f"actual {_num(actual)}")

    def check_close(self, what: str, expected: float, actual: float, rel_tol: float,
                    abs_tol: float = 0) -> bool:
        """|actual - expected| <= max(rel_tol * expected, abs_tol)."""
        diff = actual - expected
        allowed = max(rel_tol * abs(expected), abs_tol)
        rel = (diff / expected * 100) if expected else float("inf") if diff else 0.0
        ok = abs(diff) <= allowed
        return self._report(ok, what,
                            f"expected {_num(expected)} +/- {rel_tol * 100:g}% (+/- {_num(allowed)}), "
                            f"actual {_num(actual)} (diff {diff:+g}, {rel:+.3f}%)")

    def check_in(self, what: str, needle: str, haystack: str, where: str = "output") -> bool:
        ok = needle in haystack
        shown = "" if ok else f"\n---- {where} ----\n{haystack[:3000]}\n----"
        return self._report(ok, what, f"expected {needle!r} in {where}, "
                                      f"actual {'present' if ok else 'absent'}{shown}")

    def require(self, ok: bool, what: str, expected: str = "", actual: object = "") -> None:
        if not self.check(ok, what, expected, actual):
            raise Failure(f"cannot go on after: {what}")


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


_SCENARIOS: dict[str, Callable[[Test], None]] = {}


def scenario(name: str):
    """Registers a scenario function taking a Test."""
    def register(fn: Callable[[Test], None]):
        if name in _SCENARIOS:
            raise ValueError(f"scenario {name} defined twice")
        _SCENARIOS[name] = fn
        return fn
    return register


def scenarios() -> list[str]:
    return list(_SCENARIOS)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1 or argv[0] not in _SCENARIOS:
        print(f"usage: {os.path.basename(sys.argv[0])} SCENARIO\nscenarios: "
              + " ".join(_SCENARIOS), file=sys.stderr)
        return 2
    name = argv[0]
    t = Test(name)
    t0 = time.monotonic()
    try:
        require_root()
        ensure_tracefs()
        _SCENARIOS[name](t)
    except Skip as e:
        log(f"skipped: {e}")
        return SKIP_STATUS
    except Failure as e:
        t.failures.append(str(e))
        log(f"FAIL  {e}")
    except Exception:  # a bug of the test itself: still a failure, with the traceback
        t.failures.append("exception")
        log("FAIL  the scenario raised:\n" + traceback.format_exc())
    took = time.monotonic() - t0
    if t.failures:
        log(f"\nFAIL: {name}: {len(t.failures)} of {max(t.checks, len(t.failures))} checks "
            f"failed ({took:.1f} s):")
        for f in t.failures:
            log("  " + f.splitlines()[0])
        return 1
    if t.checks == 0:
        log(f"\nFAIL: {name}: no check was made")
        return 1
    log(f"\nPASS: {name}: {t.checks} checks ({took:.1f} s)")
    return 0
