#!/usr/bin/env python3
"""Runtime tests of `memlat top` (through its link memtop) on the running kernel, as root:
its rows per memory cgroup against delay accounting and the cgroup's own files."""
from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from memlat_test import (MemoryCgroup, Test, TestFile, Tool, Workload,  # noqa: E402
                         binary, check_bad_arguments, check_help, log, main, read_file, run,
                         scenario)

LIMIT = 32 << 20
FILE_SIZE = 128 << 20


def cgroup_rows(lines: list[dict], path: str) -> list[dict]:
    """The row of the cgroup at `path` (a directory under the hierarchy's mount) in each
    interval that has one."""
    out = []
    for line in lines:
        out += [r for r in line["cgroups"] if path.endswith(r["cgroup"]) and r["cgroup"] != "/"]
    return out


def cause_sum(rows: list[dict], *names: str) -> tuple[int, int]:
    """(stalls, ns) of the causes `names` over `rows`."""
    stalls = ns = 0
    for r in rows:
        for name in names:
            c = r["causes"].get(name, {"stalls": 0, "ns": 0})
            stalls += c["stalls"]
            ns += c["ns"]
    return stalls, ns


@scenario("top_memcg_vs_taskstats")
def _(t: Test):
    """A reader in a 32 MiB memory cgroup reads a 128 MiB file twice (memcg limit reclaim)
    while `memtop -j -a 1` watches, beside a sibling cgroup whose only task never runs. The
    reader's cgroup, summed over the intervals, against delay accounting of its one task: the
    reclaim stalls exactly, the time as memstall's own test holds it; its limit and its
    memory.failcnt (v1) or memory.events max (v2) as the files say at the end; the sibling at
    zero in every interval; every interval sorted busiest first."""
    from test_memstall import delay_accounting
    with delay_accounting() as taskstats, \
            MemoryCgroup("top", LIMIT) as cg, MemoryCgroup("top_idle", LIMIT) as idle_cg, \
            TestFile(FILE_SIZE, "top_reclaim", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "2",
                     "--linger", held=True) as reader, \
            Workload("file_reader", "--file", f.path, held=True) as idle:
        # Held at the door for the whole test (never released): a task that never stalls.
        idle_cg.add(idle.pid)
        with Tool("memtop", "-j", "-a", "-r", "100000", "1") as top:
            reader.release()
            done = reader.wait_done(60)
            # A whole interval after the reader's last stall, and the one cut short by SIGINT.
            time.sleep(1.5)
            stats = taskstats.get(reader.pid)
        events_file = "memory.failcnt" if cg.v1 else "memory.events"
        events_text = read_file(os.path.join(cg.path, events_file))
        log(f"reader pid {reader.pid} read {done['iterations']} passes; taskstats {stats}; "
            f"{events_file}: {events_text.strip()}")
    res = top.result
    t.check_eq("memtop exit status after SIGINT", 0, res.rc)
    lines = [j for j in res.json_lines() if "cgroups" in j]
    t.check_ge("intervals printed", 2, len(lines))
    mine = cgroup_rows(lines, cg.path)
    t.require(len(mine) == len(lines), "a row for the reader's cgroup in every interval (-a)",
              len(lines), len(mine))
    stalls, ns = cause_sum(mine, "memcg", "direct")
    log(f"reader's cgroup over {len(lines)} intervals: {stalls} reclaim stalls, {ns} ns")
    t.check_ge("reclaim stalls seen", 10, stalls)
    t.check_eq("reclaim stalls vs taskstats freepages_count (exact: one task)",
               stats["freepages_count"], stalls)
    # As memstall_memcg_vs_taskstats: delay accounting's window lies inside the tracepoints'
    # (never more than memstall's time), a few us a window of work between them, and once up
    # to 1 ms for this VM's hypervisor.
    gap = ns - stats["freepages_delay_total"]
    t.check_ge("reclaim time >= taskstats freepages_delay_total", 0, gap)
    t.check_le("reclaim time - freepages_delay_total <= 10 us per window + 1 ms",
               10_000 * stalls + 1_000_000, gap)
    last = mine[-1]
    t.check_eq("the cgroup's limit", LIMIT, last["max_bytes"])
    t.check_le("the cgroup's usage <= its limit", LIMIT, last["usage_bytes"] or 0)
    # The cgroup was made before memtop started, with nothing charged to it: its limit
    # events since start are all it has.
    if cg.v1:
        expected = int(events_text)
    else:
        expected = int(dict(line.split() for line in events_text.splitlines())["max"])
    t.check_ge("the limit was met (the reader reclaims)", 1, expected)
    t.check_eq(f"limit events since start vs {events_file} at the end", expected,
               last["events_since_start"].get("max", 0))
    idle_rows = cgroup_rows(lines, idle_cg.path)
    t.check_eq("the idle sibling: a row in every interval (-a)", len(lines), len(idle_rows))
    t.check_eq("the idle sibling: no stall in any interval", [],
               [r["stall_ns"] for r in idle_rows if r["stall_ns"] != 0])
    for i, line in enumerate(lines):
        stall = [r["stall_ns"] for r in line["cgroups"]]
        if stall != sorted(stall, reverse=True):
            t.check(False, f"interval {i + 1} sorted busiest first", "descending", stall)
            break
    busiest = max(lines, key=lambda j: cause_sum(cgroup_rows([j], cg.path), "memcg")[1])
    t.check_eq("the reader's cgroup first in its busiest interval", mine[0]["cgroup"],
               busiest["cgroups"][0]["cgroup"])
    host = sum(cause_sum([j["host"]], "memcg", "direct")[0] for j in lines)
    t.check_ge("the host's reclaim stalls include the cgroup's", stalls, host)


class ScreenTool:
    """memtop on a pseudo-terminal of ROWS x COLUMNS, as a user runs it: keys written to the
    terminal, frames read back (each frame starts at the cursor's home, ESC [ H, and ends with
    a clear to the end of the screen, ESC [ J; cli/terminal.cpp)."""
    ROWS, COLUMNS = 40, 200
    ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

    def __init__(self, *args: str):
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ,
                    struct.pack("HHHH", self.ROWS, self.COLUMNS, 0, 0))
        self.attrs_before = termios.tcgetattr(self.slave)
        log(f"$ memtop {' '.join(args)}  (on a {self.ROWS}x{self.COLUMNS} pseudo-terminal)")
        self.proc = subprocess.Popen([binary("memtop"), *args], stdin=self.slave,
                                     stdout=self.slave, stderr=subprocess.PIPE,
                                     env=dict(os.environ, MEMLAT_READY="1"),
                                     start_new_session=True)
        self.output = b""
        self.stderr = b""

    def wait_ready(self, timeout: float = 30) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end and b"memlat: ready" not in self.stderr:
            r, _, _ = select.select([self.proc.stderr], [], [], 0.2)
            if r:
                chunk = os.read(self.proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                self.stderr += chunk
        return b"memlat: ready" in self.stderr

    def pump(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([self.master], [], [], 0.05)
            if r:
                try:
                    self.output += os.read(self.master, 65536)
                except OSError:
                    return

    def frames(self) -> list[list[str]]:
        """The complete frames drawn so far, each as its lines without escape sequences."""
        text = self.output.decode(errors="replace")
        out = []
        for part in text.split("\x1b[H")[1:]:
            if "\x1b[J" in part:
                body = part[:part.index("\x1b[J")]
                # The terminal's output processing may turn each "\n" into "\r\n".
                out.append([self.ESCAPES.sub("", line).rstrip("\r")
                            for line in body.replace("\r\n", "\n").split("\n")])
        return out

    def press(self, keys: str, until, timeout: float = 5.0) -> list[str] | None:
        """Writes `keys` and reads until a frame drawn after them satisfies `until`; that frame,
        or None."""
        self.pump(0.05)
        drawn = len(self.frames())
        os.write(self.master, keys.encode())
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump(0.1)
            for frame in self.frames()[drawn:]:
                if until(frame):
                    return frame
        return None

    def wait_frame(self, until, timeout: float) -> list[str] | None:
        return self.press("", until, timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr += self.proc.stderr.read() if self.proc.stderr else b""
        os.close(self.master)
        os.close(self.slave)


def table_lines(frame: list[str]) -> list[str]:
    """The lines of a frame's cgroup table, below its heading and above the status line."""
    for i, line in enumerate(frame):
        if line.startswith("CGROUP "):
            return [x for x in frame[i + 1:-1] if x.strip()]
    return []


@scenario("top_screen_keys")
def _(t: Test):
    """The screen as a user drives it on a terminal, while a reader in a 32 MiB memory cgroup
    stalls in reclaim: the stalled cgroup is the first row and selected; h shows the keys and
    any key returns; > and < change the sorted column the status line names; Enter opens the
    selected cgroup into its processes, whose pids are the cgroup's own (its cgroup.procs) and
    include the reader's; Esc goes back; q quits with status 0, leaves the alternate screen
    and gives the terminal back as it was (echo, line editing)."""
    with MemoryCgroup("top_screen", LIMIT) as cg, \
            TestFile(FILE_SIZE, "top_screen", cold=True) as f, \
            Workload("file_reader", "--file", f.path, "--cgroup", cg.path, "--passes", "1000",
                     held=True) as reader:
        screen = ScreenTool("1")
        try:
            t.require(screen.wait_ready(), "memtop on a terminal: ready", "memlat: ready",
                      screen.stderr.decode(errors="replace")[-300:])
            reader.release()
            name = os.path.basename(cg.path)
            frame = screen.wait_frame(
                lambda fr: any(name in line for line in table_lines(fr)[:1]), timeout=15)
            t.require(frame is not None, "the reader's cgroup drawn as the first row",
                      name, table_lines(frame)[0] if frame else screen.frames()[-1:] or "none")
            t.check_in("the status line: selection, sort column and keys",
                       "1 of ", frame[-1], "status line")
            t.check_in("the status line names the sorted column", "sort: STALL%", frame[-1],
                       "status line")
            helped = screen.press("h", lambda fr: "memlat top: keys" in fr[0])
            t.check(helped is not None, "h: the page of keys", "memlat top: keys",
                    "drawn" if helped else "not drawn")
            back = screen.press("x", lambda fr: any(ln.startswith("CGROUP ") for ln in fr))
            t.check(back is not None, "any key leaves the page of keys", "the table",
                    "drawn" if back else "not drawn")
            usage = screen.press(">", lambda fr: "sort: USAGE" in fr[-1])
            t.check(usage is not None, "> sorts by the next column", "sort: USAGE",
                    usage[-1] if usage else "not drawn")
            stall = screen.press("<", lambda fr: "sort: STALL%" in fr[-1])
            t.check(stall is not None, "< sorts by the column before", "sort: STALL%",
                    stall[-1] if stall else "not drawn")
            # The reader's cgroup is the busiest: Home selects it, Enter opens it. A frame
            # with a process row (a pid first) is waited for: an interval in which the reader
            # stalled.
            opened = screen.press(
                "\x1b[H\r", lambda fr: any(ln.startswith("Processes of ") for ln in fr) and
                any(re.match(r"\d+ ", ln) for ln in fr), timeout=10)
            t.require(opened is not None, "Enter: the selected cgroup's processes",
                      "Processes of ... with a row",
                      [ln for ln in opened if re.match(r"\d+ ", ln)] if opened
                      else screen.frames()[-1:] or "no frame")
            heading = next(ln for ln in opened if ln.startswith("Processes of "))
            t.check_in("the opened cgroup is the reader's", name, heading, "heading")
            pids = {int(ln.split()[0]) for ln in opened if re.match(r"\d+ ", ln)}
            members = {int(p) for p in read_file(os.path.join(cg.path, "cgroup.procs")).split()}
            log(f"processes shown {sorted(pids)}; cgroup.procs {sorted(members)}")
            t.check_in("the reader's pid among the processes shown", reader.pid, pids, "pids")
            t.check_eq("processes shown outside the cgroup's cgroup.procs", set(),
                       pids - members)
            closed = screen.press("\x1b", lambda fr: any(ln.startswith("CGROUP ") for ln in fr))
            t.check(closed is not None, "Esc: back to the cgroups", "the table",
                    "drawn" if closed else "not drawn")
            # / filters by a text in the path or name: one no cgroup has empties the table,
            # the cgroup's own name brings it back, Esc drops the filter.
            typed = screen.press("/zz-no-such-cgroup", lambda fr: "filter: zz-no-such-cgroup_"
                                 in fr[-1])
            t.check(typed is not None, "/: the filter typed shows in the status line",
                    "filter: zz-no-such-cgroup_", typed[-1] if typed else "not drawn")
            empty = screen.press("\r", lambda fr: any("no cgroup matches" in ln for ln in fr))
            t.check(empty is not None, "a filter no cgroup matches: no row, and says so",
                    "(no cgroup matches the filter ...)", empty[-1] if empty else "not drawn")
            mine = screen.press("/" + "\x7f" * 20 + name + "\r",
                                lambda fr: f"matching '{name}'" in fr[-1])
            t.check(mine is not None and name in (table_lines(mine) or [""])[0],
                    "the cgroup's name as the filter: its row first",
                    name, table_lines(mine)[:1] if mine else "not drawn")
            dropped = screen.press("\x1b", lambda fr: "matching" not in fr[-1] and
                                   "of" in fr[-1])
            t.check(dropped is not None, "Esc drops the filter", "no 'matching' in status",
                    dropped[-1] if dropped else "not drawn")
            held = screen.press(" ", lambda fr: fr[-1].startswith("PAUSED"))
            t.check(held is not None, "space: the screen held, the status line says so",
                    "PAUSED ...", held[-1] if held else "not drawn")
            drawn = len(screen.frames())
            screen.pump(2.5)
            t.check_eq("frames drawn while held (2.5 s of 1 s intervals)", drawn,
                       len(screen.frames()))
            going = screen.press(" ", lambda fr: not fr[-1].startswith("PAUSED") and
                                 fr[0] != held[0], timeout=3)
            t.check(going is not None, "space again: the next interval drawn",
                    "a new header", going[0] if going else "not drawn")
            screen.press("q", lambda fr: False, timeout=0.5)
            try:
                rc = screen.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = None
            t.check_eq("q: exit status", 0, rc)
            screen.pump(0.2)
            t.check(screen.output.rstrip(b"\r\n").endswith(b"\x1b[?1049l"),
                    "the alternate screen left at exit", "ends with ESC [ ? 1049 l",
                    repr(screen.output[-40:]))
            after = termios.tcgetattr(screen.slave)
            flags = termios.ECHO | termios.ICANON
            t.check_eq("the terminal's echo and line editing given back",
                       screen.attrs_before[3] & flags, after[3] & flags)
            t.check_eq("the terminal's Ctrl-Z given back", screen.attrs_before[6][termios.VSUSP],
                       after[6][termios.VSUSP])
        finally:
            screen.close()


@scenario("top_batch")
def _(t: Test):
    """-b prints the header and the table every interval, and stops after COUNT."""
    with Tool("memtop", "-b", "1", "2", wait_exit=True) as top:
        pass
    res = top.result
    t.check_eq("memtop -b 1 2: exit status", 0, res.rc)
    t.check_eq("memtop -b 1 2: headers", 2, res.stdout.count("memlat top - "))
    t.check_eq("memtop -b 1 2: table headings", 2, res.stdout.count("CGROUP "))
    for part in ("Mem: ", "PSI memory: ", "Stalled (ms): direct ", "Per second: reclaim "):
        t.check_in(f"memtop -b: the header's line {part.strip()}", part, res.stdout, "stdout")


@scenario("top_bad_arguments")
def _(t: Test):
    check_help(t, "memtop", ["-b, --batch", "-a, --all", "-r, --rows", "-j, --json", "STALL%",
                             "USAGE", "LIMIT", "EVENTS", "PSI%", "MEMLAT_DISABLE_HOOKS"])
    check_bad_arguments(t, "memtop", [
        (["0"], "the interval must be a positive number"),
        (["1", "0"], "the count must be a positive number"),
        (["-b", "-r", "x"], "-r"),
        (["--bogus"], "unrecognized option"),
    ])
    # Without -b or -j the screen is drawn on a terminal: stdout here is a pipe.
    res = run([binary("memtop"), "1", "1"], timeout=15)
    t.check_eq("memtop without a terminal: exit status", 2, res.rc)
    t.check_in("memtop without a terminal: says to give -b", "-b prints text rows",
               res.stderr, "stderr")


if __name__ == "__main__":
    sys.exit(main())
