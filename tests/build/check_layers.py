#!/usr/bin/env python3
"""The shared runtime (tools/common) stays layered: a unit (NAME.h + NAME.cpp) may include the
headers of units below it, never one that needs its own header back, directly or through
others; and no file grows past 500 lines. Prints the cycle or the file, exits 1; else 0."""
import re
import sys
from pathlib import Path

MAX_LINES = 500


def main(common: Path) -> int:
    includes: dict[str, set[str]] = {}
    failures = []
    for path in sorted(common.iterdir()):
        if path.suffix not in (".h", ".cpp"):
            continue
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_LINES:
            failures.append(f"{path.name}: {lines} lines (at most {MAX_LINES})")
        unit = path.stem
        for name in re.findall(r'^#include "([^"]+)\.h"', text, re.M):
            if name != unit and (common / f"{name}.h").exists():
                includes.setdefault(unit, set()).add(name)
    # A depth-first search for a unit that reaches itself.
    state: dict[str, str] = {}

    def visit(unit: str, path: list[str]) -> None:
        state[unit] = "open"
        for used in sorted(includes.get(unit, ())):
            if state.get(used) == "open":
                cycle = path[path.index(used):] + [unit, used] if used in path else [unit, used]
                failures.append("include cycle: " + " -> ".join(dict.fromkeys(cycle)) + f" -> {used}")
            elif used not in state:
                visit(used, path + [unit])
        state[unit] = "done"

    for unit in sorted(includes):
        if unit not in state:
            visit(unit, [])
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
