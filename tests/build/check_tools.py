#!/usr/bin/env python3
"""The tools' folders keep to the rules lib/ keeps (docs/developing.md, "Layout"): no file in
tools/ grows past 500 lines, and no tool folder includes a header of another. The files and
includes that break a rule today are listed below, each with the size it may not pass and
the reason it is still here: the list may only shrink. An entry that no longer breaks its
rule fails too, so that it is taken off. Prints what is wrong, exits 1; else 0.

usage: check_tools.py TOOLS_DIR"""
import re
import sys
from pathlib import Path

MAX_LINES = 500
SOURCES = (".cpp", ".h", ".c")

# One file a line: its path under tools/, the lines it may not pass, why it is longer than
# MAX_LINES.
TOO_LONG_TABLE = """
cachestat/cachestat.bpf.c         706  three hook families for each of four events
memstall/memstall.bpf.c           966  four windows, dirty pauses, off-CPU causes, stacks
oomwhy/oomwhy.bpf.c               527  victim, trigger and lead-up programs, per kernel
tlbflush/tlbflush.bpf.c           663  flush reasons, IPIs and handlers, per architecture
"""

# One include a line: the tool folder, the header of another folder, why. (None today: what
# two tools use of one, such as memstall's stall counting, is in lib/sources/.)
CROSS_INCLUDES_TABLE = """
"""

TOO_LONG = {path: (int(ceiling), why) for path, ceiling, why in
            (line.split(None, 2) for line in TOO_LONG_TABLE.strip().splitlines())}
CROSS_INCLUDES = {(folder, header): why for folder, header, why in
                  (line.split(None, 2) for line in CROSS_INCLUDES_TABLE.strip().splitlines())}


def main(tools: Path) -> int:
    failures = []
    folders = {p.name for p in tools.iterdir() if p.is_dir()}
    seen_long, seen_cross = set(), set()
    for path in sorted(tools.rglob("*")):
        if path.suffix not in SOURCES or not path.is_file():
            continue
        name = path.relative_to(tools).as_posix()
        text = path.read_text()
        lines = text.count("\n")
        if name in TOO_LONG:
            seen_long.add(name)
            ceiling, why = TOO_LONG[name]
            if lines > ceiling:
                failures.append(f"{name}: {lines} lines, past the {ceiling} it is allowed ({why})")
            elif lines <= MAX_LINES:
                failures.append(f"{name}: {lines} lines now: take it off TOO_LONG")
        elif lines > MAX_LINES:
            failures.append(f"{name}: {lines} lines (at most {MAX_LINES}: split it by concern)")
        folder = name.split("/", 1)[0] if "/" in name else None
        for header in re.findall(r'^#include "([^"]+)"', text, re.M):
            other = header.split("/", 1)[0]
            if folder is None or "/" not in header or other not in folders or other == folder:
                continue
            seen_cross.add((folder, header))
            if (folder, header) not in CROSS_INCLUDES:
                failures.append(f"{name} includes {header}: a tool folder includes no other's "
                                f"(what two tools need lives in lib/)")
    for name in sorted(set(TOO_LONG) - seen_long):
        failures.append(f"TOO_LONG names {name}, which is not there")
    for folder, header in sorted(set(CROSS_INCLUDES) - seen_cross):
        failures.append(f"CROSS_INCLUDES names {folder} -> {header}, which no file includes now")
    for failure in failures:
        print(failure)
    print(f"{len(TOO_LONG)} files allowed past {MAX_LINES} lines, {len(CROSS_INCLUDES)} "
          f"includes across tool folders, each with its reason in {Path(__file__).name}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
