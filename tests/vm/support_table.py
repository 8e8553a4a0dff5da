#!/usr/bin/env python3
"""The support table of docs/kernels.md, written from what the tools said with -v in the VM tests, not by
hand: for each amd64 kernel of tests/vm/kernels.txt, its last run in BUILD/vm-run/KERNEL/, the
TOOL.choices scenario's runs (each tool started with nothing forced, guest/lib.sh vm_choices)
give, per tool, the hook each probe used, the features the tool had to do without, and what
it said it cannot show there. The table stands in docs/kernels.md between the two
`support_table.py` comment lines; ctest's vm.support_table runs --check after the VM tests.

    tests/vm/support_table.py --build-dir build                          # prints the table
    tests/vm/support_table.py --build-dir build --write docs/kernels.md  # after ctest -L vm
    tests/vm/support_table.py --build-dir build --check docs/kernels.md  # 1 when it differs
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "runtime"))
from vmcheck import choices_tools, parse_report  # noqa: E402
from vmkernel import kernel_table  # noqa: E402

TOOLS = choices_tools()
BEGIN = "<!-- support_table.py: begin (generated from the VM runs; do not edit) -->"
END = "<!-- support_table.py: end -->"
USING = re.compile(r"^(\S.*?): using (\S+)")
# "task-local storage" is what tools before the rename to bpf_get_current_task_btf() printed.
FEATURE = re.compile(r"^(bpf_get_current_task_btf\(\)|task-local storage|ring buffer|kernel BTF)"
                     r"[^:]*: no")
OLD_FEATURE_NAMES = {"task-local storage": "bpf_get_current_task_btf()"}
# What a tool says once on stderr that it cannot show on this kernel ("tlbflush: without the
# csd tracepoints ... is not known", "numamove: cannot time ...", "cachestat: HITS ... are
# unavailable").
CANNOT = re.compile(r"^(?:" + "|".join(TOOLS) + r"): "
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


def table(build_dir: str) -> tuple[list[str], list[str]]:
    """(the table's lines, the amd64 kernels of kernels.txt with no run in build_dir)."""
    rows, missing = [], []
    for key in kernel_table():
        if key.startswith("arm64"):
            continue  # docs/kernels.md's arm64 section says what arm64 runs
        report = os.path.join(build_dir, "vm-run", key, "results.log")
        if not os.path.exists(report):
            missing.append(key)
            continue
        with open(report, errors="replace") as f:
            facts, blocks, _ = parse_report(f.read())
        rows.append((facts.get("kernel", key), [cell(*tool_choices(blocks, t)) for t in TOOLS]))
    lines = ["| kernel | " + " | ".join(TOOLS) + " |", "| --- " * (len(TOOLS) + 1) + "|"]
    lines += [f"| {kernel} | " + " | ".join(cells) + " |" for kernel, cells in rows]
    return lines, missing


def documented(doc: str) -> tuple[str, list[str], str]:
    """docs/kernels.md cut around its table: (before, the table's lines, after)."""
    with open(doc) as f:
        text = f.read()
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise SystemExit(f"{doc}: no one pair of support_table.py comment lines around a table")
    before, rest = text.split(BEGIN)
    inside, after = rest.split(END)
    return before, inside.strip("\n").splitlines(), after


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", metavar="DOC", help="replace the table in DOC")
    mode.add_argument("--check", metavar="DOC",
                      help="exit 1 when the table in DOC is not what the runs say")
    a = ap.parse_args()
    lines, missing = table(a.build_dir)
    if missing:
        print(f"no VM results of {', '.join(missing)} under {a.build_dir}/vm-run: the table "
              "wants every amd64 kernel's (ctest -L vm)", file=sys.stderr)
        # Where the boots themselves were skipped (no qemu; CI sets MEMLAT_VM_REQUIRED=1 and
        # fails them instead), the check is skipped too, never passed.
        if a.check and os.environ.get("MEMLAT_VM_REQUIRED") != "1":
            print("skipped: the boots did not run here", file=sys.stderr)
            return 77
        return 1
    if a.write:
        before, _, after = documented(a.write)
        with open(a.write, "w") as f:
            f.write(before + BEGIN + "\n" + "\n".join(lines) + "\n" + END + after)
        return 0
    if a.check:
        _, doc_lines, _ = documented(a.check)
        if doc_lines == lines:
            print(f"{a.check}: the support table is what the VM runs of {a.build_dir} say")
            return 0
        print(f"{a.check}: the support table is not what the VM runs say; after checking the "
              f"difference, run {sys.argv[0]} --build-dir {a.build_dir} --write {a.check}",
              file=sys.stderr)
        sys.stderr.writelines(difflib.unified_diff([x + "\n" for x in doc_lines],
                                                   [x + "\n" for x in lines],
                                                   "documented", "the VM runs"))
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
