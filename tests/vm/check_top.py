"""Host checks of memlat top's VM scenario (tests/vm/scenarios/top.sh): the screen in a tmux
pane on a Debian kernel with cgroup v2, as the host's top_screen_keys drives it, with memstall's
and cachestat's programs loaded."""
from __future__ import annotations

import re

from memlat_test import Test, log
from vmcheck import Block, checker, required

# tmux is in every guest (run_vm_tests.py add_tmux): the screen is tested on every kernel.
required("top.screen", lambda facts: True)


def table_rows(screen: str) -> list[str]:
    """The rows under the table's heading, without the status line ("... q quit"): a capture
    may be taken before the screen's last line is drawn (the status line was missing once in
    the emulated arm64 guest, the rows drawn above it)."""
    lines = screen.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("CGROUP "):
            return [x for x in lines[i + 1:] if x.strip() and "q quit" not in x]
    return []


@checker("top.screen")
def screen(t: Test, b: Block) -> None:
    table = b.file("screen.table")
    rows = table_rows(table)
    log("  the table: " + " | ".join(r[:60] for r in rows[:3]))
    t.check(bool(rows) and rows[0].startswith("/memlat_top "),
            "the toucher's cgroup (over its memory.high) drawn as the first row",
            "/memlat_top ...", rows[:1] or table[-300:])
    processes = b.files.get("screen.processes", "")
    pids = {int(m.group(1)) for m in re.finditer(r"^(\d+) ", processes, re.M)}
    t.check("Processes of /memlat_top" in processes,
            "Enter: the cgroup opened into its processes", "Processes of /memlat_top",
            processes[:300])
    toucher = int(b.meta["toucher_pid"])
    t.check(toucher in pids, "the toucher's pid among its processes", toucher, sorted(pids))
    heading = next((ln for ln in table.split("\n") if ln.startswith("CGROUP ")), "")
    for column in ("RECL/s", "HIT%"):
        t.check_in(f"the {column} column at 200 columns", column, heading, "heading")
    # cachestat's programs loaded beside memstall's on this kernel: no line saying otherwise.
    err = b.files.get("top.err", "")
    t.check("no page-cache columns" not in err, "cachestat's programs loaded (HIT%)",
            "no 'no page-cache columns' line", err[-400:])
    t.check_eq("q: exit status", "0", b.file("top.rc").strip())
    after = b.file("screen.after")
    t.check("memlat top" not in after, "the alternate screen left at exit",
            "no 'memlat top' on the screen", after[:200])
