#!/usr/bin/env python3
"""The shared runtime (lib/LAYER) stays layered: a unit (LAYER/NAME.h + .cpp) includes only
headers of its own layer or of the layers below (LAYERS, bottom-up; the build refuses the
others too, lib/CMakeLists.txt), never one that needs its own header back, directly or through
others; and no file grows past 500 lines. Prints what is wrong, exits 1; else 0."""
import re
import sys
from pathlib import Path

MAX_LINES = 500
LAYERS = ["base", "kernel", "loading", "cli", "prometheus", "tool", "sources"]


def main(lib: Path) -> int:
    includes: dict[str, set[str]] = {}
    failures = []
    found = sorted(p.name for p in lib.iterdir() if p.is_dir())
    if found != sorted(LAYERS):
        failures.append(f"lib/ has the folders {found}, this check knows {LAYERS}")
    for layer in LAYERS:
        for path in sorted((lib / layer).iterdir()):
            if path.suffix not in (".h", ".cpp"):
                continue
            text = path.read_text()
            lines = text.count("\n")
            if lines > MAX_LINES:
                failures.append(f"{layer}/{path.name}: {lines} lines (at most {MAX_LINES})")
            unit = f"{layer}/{path.stem}"
            for name in re.findall(r'^#include "([^"]+)\.h"', text, re.M):
                used_layer = name.split("/", 1)[0]
                if "/" not in name or used_layer not in LAYERS:
                    continue
                if LAYERS.index(used_layer) > LAYERS.index(layer):
                    failures.append(f"{unit} includes {name}.h, a layer above its own")
                if name != unit:
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
