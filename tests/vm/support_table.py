#!/usr/bin/env python3
"""The support table of docs/kernels.md, written from what the tools said with -v in the VM tests, not by
hand: for each kernel of tests/vm/kernels.txt whose last run is in BUILD/vm-run/KERNEL/, the
TOOL.choices scenario's runs (each tool started with nothing forced, guest/lib.sh vm_choices)
give, per tool, the hook each probe used, the features the tool had to do without, and what
it said it cannot show there.

    tests/vm/support_table.py --build-dir build            # prints the Markdown table
"""
from __future__ import annotations

import argparse
import os
import re
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "runtime"))
from vmcheck import parse_report  # noqa: E402
from vmkernel import kernel_table  # noqa: E402

TOOLS = ["tlbflush", "drsnoop", "compactsnoop", "numamove", "cachestat"]
USING = re.compile(r"^(\S.*?): using (\S+)")
# "task-local storage" is what tools before the rename to bpf_get_current_task_btf() printed.
FEATURE = re.compile(r"^(bpf_get_current_task_btf\(\)|task-local storage|ring buffer|kernel BTF)"
                     r"[^:]*: no")
OLD_FEATURE_NAMES = {"task-local storage": "bpf_get_current_task_btf()"}
# What a tool says once on stderr that it cannot show on this kernel ("tlbflush: without the
# csd tracepoints ... is not known", "numamove: cannot time ...", "cachestat: HITS ... are
# unavailable").
CANNOT = re.compile(r"^(?:tlbflush|drsnoop|compactsnoop|numamove|cachestat): "
                    r"(.*(?:cannot|not known|is not|unavailable|not timed).*)$")


def tool_choices(blocks, tool: str) -> tuple[dict[str, set[str]], set[str], set[str]]:
    """({probe: hooks used}, features done without, what it cannot show) over the tool's
    choices runs."""
    hooks: dict[str, set[str]] = {}
    missing: set[str] = set()
    cannot: set[str] = set()
    for b in blocks:
        if b.name != f"{tool}.choices":
            continue
        for name, text in b.files.items():
            if not (name.startswith("run") and name.endswith(".err")):
                continue
            for line in text.splitlines():
                m = USING.match(line)
                if m:
                    hooks.setdefault(m.group(1), set()).add(m.group(2).rstrip(";,"))
                elif FEATURE.match(line):
                    feature = FEATURE.match(line).group(1)
                    missing.add(OLD_FEATURE_NAMES.get(feature, feature))
                elif CANNOT.match(line):
                    cannot.add(CANNOT.match(line).group(1).split(":")[0].strip())
    return hooks, missing, cannot


def cell(hooks: dict[str, set[str]], missing: set[str], cannot: set[str]) -> str:
    if not hooks:
        return "no run"
    parts = [f"{probe}: {'/'.join(sorted(h))}" for probe, h in sorted(hooks.items())]
    text = "<br>".join(parts)
    if missing:
        text += "<br>*without " + ", ".join(sorted(missing)) + "*"
    if cannot:
        text += "<br>*cannot show: " + "; ".join(sorted(cannot)) + "*"
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    a = ap.parse_args()
    rows = []
    for key in kernel_table():
        report = os.path.join(a.build_dir, "vm-run", key, "results.log")
        if not os.path.exists(report):
            continue
        with open(report, errors="replace") as f:
            facts, blocks, _ = parse_report(f.read())
        rows.append((facts.get("kernel", key), [cell(*tool_choices(blocks, t)) for t in TOOLS]))
    if not rows:
        print(f"no VM results under {a.build_dir}/vm-run (run ctest -L vm first)",
              file=sys.stderr)
        return 1
    print("| kernel | " + " | ".join(TOOLS) + " |")
    print("| --- " * (len(TOOLS) + 1) + "|")
    for kernel, cells in rows:
        print(f"| {kernel} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
