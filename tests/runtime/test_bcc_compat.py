#!/usr/bin/env python3
"""BCC's and libbpf-tools' documented command lines (bcc_command_lines.txt: their example
files, man pages, smoke test and sources, each line with its source) run unchanged against
memlat: every flag is accepted, the tool exits 0, and its header has BCC's columns in BCC's
order, memlat's own after them; where memlat differs on purpose, it prints exactly the header
the data file gives, and the table of docs/bcc.md ("Coming from BCC") names that difference."""
from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memlat_test import Test, Tool, binary, log, main, run, scenario  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "bcc_command_lines.txt")
PAGE = os.path.join(HERE, "..", "..", "docs", "bcc.md")
VERSION = re.compile(r"^(\w+) \d+\.\d+\.\d+$")


class Case:
    def __init__(self, line: str):
        fields = [f.strip() for f in line.split("|")]
        if len(fields) != 5:
            raise ValueError(f"{DATA}: not 5 fields: {line!r}")
        self.source, self.command, stop, self.bcc, difference = fields
        self.stop = float(stop)
        self.key, self.memlat = "", ""
        if difference:
            self.key, _, self.memlat = (p.strip() for p in difference.partition(":"))

    def argv(self) -> list[str]:
        words = shlex.split(self.command.format(pid=os.getpid(), tid=os.getpid()))
        return [binary(words[0]), *words[1:]]


def cases() -> list[Case]:
    with open(DATA) as f:
        return [Case(l) for l in f if l.strip() and not l.startswith("#")]


def header_of(stdout: str) -> list[str]:
    """The first line of column names: blank lines and cachestat -P's title are skipped."""
    for line in stdout.splitlines():
        if line.strip() and "Buffers MB:" not in line:
            return line.split()
    return []


@scenario("bcc_command_lines")
def _(t: Test):
    page = open(PAGE).read()
    t.require(page.startswith("# Coming from BCC"), "docs/bcc.md is the \"Coming from BCC\" page")
    table = page
    all_cases = cases()
    t.check_ge("documented command lines in the data file", 60, len(all_cases))
    started = time.monotonic()
    for c in all_cases:
        what = f"{c.command}  [{c.source}]"
        if c.bcc == "version":
            res = run(c.argv(), timeout=10)
            tool = os.path.basename(c.argv()[0])
            t.check_eq(f"{what}: exit status", 0, res.rc)
            m = VERSION.match(res.stdout.strip())
            t.check(bool(m) and m.group(1) == tool, f"{what}: prints TOOL VERSION",
                    f"{tool} X.Y.Z", res.stdout.strip()[:80])
            continue
        with Tool(os.path.basename(c.argv()[0]), *c.argv()[1:]) as tool:
            deadline = time.monotonic() + c.stop
            while time.monotonic() < deadline and tool.running():
                time.sleep(0.05)
        res = tool.result
        t.check_eq(f"{what}: exit status", 0, res.rc)
        if c.bcc == "json":
            lines = [l for l in res.stdout.splitlines() if l.strip()]
            objs = [json.loads(l) for l in lines]
            t.check(len(objs) >= 1 and all(k in objs[0] for k in
                                           ("hits", "misses", "dirties", "buffers_mb",
                                            "cached_mb")),
                    f"{what}: JSON lines with BCC's counters", "hits misses dirties "
                    "buffers_mb cached_mb", sorted(objs[0]) if objs else "(none)")
            continue
        header = header_of(res.stdout)
        bcc = c.bcc.split()
        if not c.key:
            t.check_eq(f"{what}: BCC's columns first, in BCC's order", bcc, header[:len(bcc)])
            continue
        t.check_eq(f"{what}: memlat's header (differs on purpose: {c.key})", c.memlat.split(),
                   header)
        t.check_in(f"{what}: docs/bcc.md explains '{c.key}'", c.key, table, "docs/bcc.md")
    log(f"{len(all_cases)} command lines in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
