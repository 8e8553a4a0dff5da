"""Host side of the VM tests: the guest's report (blocks written by guest/lib.sh to the second
serial port) parsed into Blocks, and the registry of checkers.

A tool's checker module tests/vm/check_TOOL.py registers one function per guest scenario
family; the function gets a memlat_test.Test (same check_* methods and output as the runtime
tests) and the scenario's Block:

    from vmcheck import Block, checker, vmstat_delta

    @checker("tlbflush.count")             # matches tlbflush.count and tlbflush.count.*
    def _(t: Test, b: Block) -> None:
        res = b.tool("tool")                 # memlat_test.Result from tool.out/.err/.rc
        t.check_eq("exit status", 0, res.rc)

Block.variant is the part of the name after the registered prefix (e.g. "raw_tp"), which the
scenario scripts use for the hook path.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Callable, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime"))
from memlat_test import Failure, Result, Test, log  # noqa: E402


class Block:
    """One scenario's report: meta facts, the files the guest kept, an optional skip."""

    def __init__(self, name: str):
        self.name = name
        self.meta: dict[str, str] = {}
        self.files: dict[str, str] = {}
        self.skip: Optional[str] = None
        self.complete = False
        self.variant = ""
        self.facts: dict[str, str] = {}     # the guest's global facts (kernel, nodes, ...)

    def file(self, name: str) -> str:
        if name not in self.files:
            raise Failure(f"the guest sent no {name!r} for {self.name} "
                          f"(it sent {sorted(self.files)})")
        return self.files[name]

    def tool(self, label: str) -> Result:
        """The run named `label` (vm_tool/vm_run) as a memlat_test.Result; a tool that was
        never ready or that was killed is a Failure showing its output."""
        rc_text = self.files.get(f"{label}.rc", "").strip()
        res = Result((self.files.get(f"{label}.argv", label)).split(),
                     int(rc_text) if rc_text.lstrip("-").isdigit() else None,
                     self.files.get(f"{label}.out", ""), self.files.get(f"{label}.err", ""), 0.0)
        ready = self.files.get(f"{label}.ready", "").strip()
        if ready and not ready.startswith("ready"):
            raise Failure(f"{label}: {ready} (exit {rc_text or '?'}){_said(res)}\n"
                          f"{res.describe()}")
        if f"{label}.rc" not in self.files:
            raise Failure(f"{label}: the guest kept no exit status (did it run?) "
                          f"files: {sorted(self.files)}")
        if res.rc is None:
            raise Failure(f"{label}: {rc_text or 'no exit status'}\n{res.describe()}")
        return res

    def workload(self, label: str = "workload") -> dict:
        """{"pid", "iterations"} from a workload's "pid=P iterations=N" line."""
        res = self.tool(label)
        m = re.search(r"pid=(\d+) iterations=(\d+)", res.stdout)
        if res.rc != 0 or not m:
            raise Failure(f"workload {label} failed\n{res.describe()}")
        return {"pid": int(m.group(1)), "iterations": int(m.group(2))}


def _said(res: Result) -> str:
    """The tool's own error line (for the one-line summary): the first stderr line that starts
    with the program's name, else the last one."""
    prog = next((w for w in res.argv if "=" not in w), "")
    lines = [line.strip() for line in res.stderr.splitlines() if line.strip()]
    said = next((line for line in lines if prog and line.startswith(prog + ":")),
                lines[-1] if lines else "")
    return f": {said}" if said else ""


def parse_report(text: str) -> tuple[dict[str, str], list[Block], bool]:
    """(global facts, blocks in order, whether the guest said "done")."""
    facts: dict[str, str] = {}
    blocks: list[Block] = []
    done = False
    cur: Optional[Block] = None
    in_file: Optional[str] = None
    buf: list[str] = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if in_file is not None:
            if raw == f"@@vm endfile {in_file}":
                cur.files[in_file] = "".join(line + "\n" for line in buf)
                in_file, buf = None, []
            else:
                buf.append(raw)
            continue
        if not raw.startswith("@@vm "):
            continue
        parts = raw.split(" ", 3)
        word = parts[1] if len(parts) > 1 else ""
        rest = raw.split(" ", 2)[2] if len(parts) > 2 else ""
        if word == "gmeta":
            k, _, v = rest.partition(" ")
            facts[k] = v
        elif word == "begin":
            cur = Block(rest)
            blocks.append(cur)
        elif word == "meta" and cur is not None:
            k, _, v = rest.partition(" ")
            cur.meta[k] = v
        elif word == "skip" and cur is not None:
            cur.skip = rest
        elif word == "file" and cur is not None:
            in_file = rest
        elif word == "end" and cur is not None:
            cur.complete = True
            cur = None
        elif word == "done":
            done = True
    return facts, blocks, done


_CHECKERS: list[tuple[str, Callable[[Test, Block], None]]] = []


def checker(prefix: str):
    """Registers the checker of the scenarios named `prefix` or `prefix.<variant>`."""
    def register(fn):
        _CHECKERS.append((prefix, fn))
        return fn
    return register


# Every scenario a kernel runs must pass on it: a skip fails the kernel's run, but a skip of a
# hook path this boot does not run (BOOT_SKIPS; guest/lib.sh vm_btf_for: a tp_btf path without
# kernel BTF, a BTF-free path that the kernel's boot without BTF runs) and the skips each
# checker allows, by name and reason, with why (allowed_skip(), beside the checker). A prefix
# registered with required() fails, too, when none of its scenarios ran where `when(facts)`
# holds. The paths the host test bed lacks are proven here.
_REQUIRED: list[tuple[str, Callable[[dict], bool]]] = []
_ALLOWED_SKIPS: list[tuple[str, str, str]] = []
BOOT_SKIPS = ("no kernel BTF: ", "run in the boot without kernel BTF: ")


def required(prefix: str, when: Callable[[dict], bool]) -> None:
    _REQUIRED.append((prefix, when))


def allowed_skip(prefix: str, reason: str, why: str) -> None:
    """A skip of the scenarios named `prefix` whose reason starts with `reason` does not fail
    the run: `why` says why the kernel's support cannot be asserted there."""
    _ALLOWED_SKIPS.append((prefix, reason, why))


def skip_allowed(name: str, detail: str) -> Optional[str]:
    """Why a skip of `name` for `detail` is allowed, or None."""
    if detail.startswith(BOOT_SKIPS):
        return "the hook path runs in the kernel's other boot"
    for prefix, reason, why in _ALLOWED_SKIPS:
        if _of(name, prefix) and detail.startswith(reason):
            return why
    return None


def _of(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def required_verdicts(facts: dict, rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """`rows` (name, PASS/FAIL/SKIP, detail) with every skip that is not allowed made a
    failure, and a failure for each required prefix no scenario ran under."""
    out = []
    for name, status, detail in rows:
        if status == "SKIP" and skip_allowed(name, detail) is None:
            status, detail = "FAIL", (f"skipped where it must run (no allowed_skip() of its "
                                      f"checker matches): {detail}")
        out.append((name, status, detail))
    for prefix, when in _REQUIRED:
        if when(facts) and not any(_of(n, prefix) and s != "SKIP" for n, s, _ in out):
            out.append((prefix, "FAIL", "must run on this kernel, and no scenario of it ran"))
    return out


def find_checker(name: str) -> tuple[Optional[Callable], str]:
    best = None
    for prefix, fn in _CHECKERS:
        if name == prefix or name.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, fn)
    if best is None:
        return None, ""
    return best[1], name[len(best[0]) + 1:]


# ---------------------------------------------------------------- parsing /proc snapshots

def vmstat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def vmstat_delta(b: Block, before: str, after: str, *keys: str) -> dict[str, int]:
    """after - before for the given /proc/vmstat keys (a prefix ending in "*" sums them)."""
    x, y = vmstat(b.file(before)), vmstat(b.file(after))
    out = {}
    for key in keys:
        if key.endswith("*"):
            names = [k for k in y if k.startswith(key[:-1])]
            out[key] = sum(y[k] - x.get(k, 0) for k in names)
        else:
            out[key] = y.get(key, 0) - x.get(key, 0)
    return out


def interrupt_row(text: str, name: str) -> list[int]:
    lines = text.splitlines()
    ncpu = len(lines[0].split())
    for line in lines[1:]:
        fields = line.split()
        if fields and fields[0] == name + ":":
            return [int(x) for x in fields[1:1 + ncpu]]
    raise Failure(f"no {name} row in the guest's /proc/interrupts")


def hook_path(t: Test, b: Block, path: str, stderr: str) -> str:
    """The hook kind scenario path `path` runs through on this guest. A fentry path on a kernel
    that cannot attach fentry programs (fact fentry=unsupported: the runner found no ftrace
    direct calls in its config, as on arm64 before 6.4) runs through kprobe, by the tool's own
    fall-back, and -v must show the kernel's refusal."""
    if path == "fentry" and b.facts.get("fentry") == "unsupported":
        t.check_in("-v: the kernel refused fentry (ENOTSUPP), hence the kprobe fall-back",
                   "(ENOTSUPP: this kernel cannot attach fentry programs", stderr, "stderr")
        return "kprobe"
    return path


def hook_lines(stderr: str) -> list[str]:
    """The -v lines naming the hook chosen for each probe ("PROBE: using HOOK ...")."""
    return [line for line in stderr.splitlines() if ": using " in line or "not traced" in line]


def show_hooks(stderr: str) -> None:
    for line in hook_lines(stderr):
        log(f"  -v: {line}")


def stopped_tool(t: Test, b: Block, tool: str) -> Result:
    """The scenario's run of TOOL (label "tool"), stopped by SIGINT once its workload was done:
    its -v hook lines logged, and its exit status checked."""
    res = b.tool("tool")
    show_hooks(res.stderr)
    t.check_eq(f"{tool} exit status after SIGINT", 0, res.rc)
    return res


def check_hook(t: Test, stderr: str, probe: str, hook: str, group: str = "") -> None:
    """-v says that PROBE uses HOOK ("PROBE: using HOOK"), or "using GROUP/HOOK" with GROUP
    given: the group of programs the tool chose, which some name (memstall's stack_loop/)."""
    said = f"{probe}: using " + (f"[{group}/]" if group else "") + hook
    pattern = (re.escape(f"{probe}: using ") + (f"({re.escape(group)}/)?" if group else "") +
               re.escape(hook))
    ok = re.search(pattern, stderr) is not None
    t.check(ok, f"-v: {probe} uses {hook}", repr(said),
            "present" if ok else "absent (see the -v lines above)")


def oracle_trace(t: Test, b: Block, name: str = "ftrace") -> str:
    """The text of the guest's ftrace instance kept as file NAME, which must have lost no
    events: a trace that lost some (ftrace marks each stretch "LOST") is no oracle."""
    text = b.file(name)
    t.check("LOST" not in text, "the ftrace oracle lost nothing", "no LOST",
            "LOST" if "LOST" in text else "none")
    return text


# ---------------------------------------------------------------- TOOL.choices (every tool)

def check_choices(t: Test, b: Block) -> None:
    """TOOL.choices (guest/lib.sh vm_choices): the tool, with nothing forced, starts on this
    kernel with each option set, says with -v what it chose for every probe, and ends cleanly
    on SIGINT. What it chose becomes README's support table (support_table.py)."""
    n = 1
    while f"args{n}" in b.meta or f"run{n}.argv" in b.files:
        res = b.tool(f"run{n}")
        args = b.meta.get(f"args{n}", "")
        what = f"{b.name.split('.')[0]} -v {args}".strip()
        t.check_eq(f"{what}: exit status after SIGINT", 0, res.rc)
        lines = hook_lines(res.stderr)
        for line in lines:
            log(f"  -v: {line}")
        t.check_ge(f"{what}: probes whose hook -v names", 1,
                   sum(": using " in line for line in lines))
        n += 1
    t.check_ge("option sets run", 1, n - 1)


def choices_tools() -> list[str]:
    """The tools whose scenarios run TOOL.choices (a `vm_choices TOOL` line in
    scenarios/TOOL.sh, indented where a condition guards it), found from the files so that the
    list cannot drift; sorted."""
    scenarios = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios")
    tools = set()
    for name in os.listdir(scenarios):
        if name.endswith(".sh"):
            with open(os.path.join(scenarios, name)) as f:
                tools.update(re.findall(r"^\s*vm_choices (\w+)", f.read(), re.M))
    return sorted(tools)


for _tool in choices_tools():
    checker(f"{_tool}.choices")(check_choices)
