#!/usr/bin/env python3
"""Every command the user documentation shows is run here, as a user would type it, so that a
page cannot show what the tools do not do.

- **Captures** (a fenced block without a language that starts with a `# ` or `$ ` prompt, in
  README.md, docs/ and docs/tools/): the page's recipe. A block whose first command runs a
  memlat tool is a *tool block*; the others are *workload blocks*. Each tool block runs with
  the nearest workload block before it: the workload's set-up first (its commands before the
  first that starts a program: mkdir, echo into a cgroup), then the tool and, once it is
  ready, the rest of the workload as written (in a shell of its own, "from another
  terminal"); a tool that runs until Ctrl-C gets SIGINT once the workload has ended. In a tool
  block, `$ ` lines run beside the tool (another terminal), `# ` lines after it. Each command
  must exit 0 and each heading of the capture must be printed by the run: a table header or
  a section title ending in ":" without digits (numbers change from run to run, headings must
  not; a title's parenthesis may describe the machine and is left out), and the labels of a
  record ("  why:"). Metric lines (`memlat_...`) are compared as series: every series the page
  shows must be served and, for `memlat_tool_up`, the page must show every tool served.
- **Command lists** (```sh blocks, and the command list of docs/top.md): each memlat command
  runs once (LIST_RUN seconds, then Ctrl-C); one that needs a terminal runs in a tmux pane and
  is quit with `q`. Each must exit 0 and print something.
- A command that is not run is listed in NOT_RUN below with the reason; any other command
  fails the scenario. Code spans in prose name options and modes (`memstall -s`); they are
  checked against `-h` by test_docs.py, not run.

The files a recipe reads (/var/tmp/memlat-docs-NNm: NN MiB) are made by this test and evicted
from the page cache (POSIX_FADV_DONTNEED on that file alone), as the pages say; the cgroups
a recipe makes with `mkdir` are removed afterwards, and every process the recipe started is
killed."""
from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memlat_test import (Test, binary, build_dir, log, main, read_file,  # noqa: E402
                         remove_cgroup_dir, scenario, skip, source_tools)
from tmux_screen import ScreenTool  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = source_tools()
COMMANDS = set(TOOLS) | {"memlat"} | {f"memlat-{t}" for t in TOOLS}
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)
PROMPT = re.compile(r"^([#$]) (.*)$")
DOC_FILE = re.compile(r"/var/tmp/memlat-docs-(\d+)m\b")
# A command that runs until Ctrl-C gets SIGINT this long after its workload ended (or after it
# became ready, without one): long enough for an interval of the commands the pages show
# (`memstall 5` prints at Ctrl-C whatever the interval).
CTRL_C_AFTER = 3.0
# A command of a command list runs this long at most (then Ctrl-C): each is run to show it
# works as written; how -d and counts end a run is tested with each tool.
LIST_RUN = 2.0
# A bounded command (-d, or an interval and a count) gets this much more than it asked for.
BOUND_SLACK = 30.0
# How long a command that runs until Ctrl-C waits for its workload to end.
WORKLOAD_WAIT = 10.0

# Commands shown but not run, each with the reason (matched at the start of the command).
NOT_RUN = {
    "./build.sh": "the build itself: .ci/run builds with `./build.sh --arch arm64 --tls` "
                  "(test.sh), and the build tests check --release's packages",
    "./test.sh": "this suite: .ci/run runs it",
    "cmake ": "the build's steps: ./build.sh runs them, the build tests check what they make",
    "ctest ": "how this suite is run: ./test.sh runs ctest",
    "python3 tests/runtime/test_": "ctest asks every script for --list at each configure "
                                   "(tests/CMakeLists.txt)",
    "tests/vm/run_vm_tests.py": "the VM matrix: ./test.sh runs it (ctest -L vm)",
    "python3 bench/": "benchmarks measure and are read by hand (bench/README.md); they do not "
                      "pass or fail",
    "dpkg ": "runtime.deb_install installs and purges the package (check_deb.py) on a machine "
             "without one",
    "make -f Makefile.btf": "downloads a Debian kernel package and runs pahole: minutes; the "
                            "BTF of btf/kernels.txt is made this way and the VM matrix's "
                            "--hide-btf boots use it",
    "go tool pprof": "Go is not a dependency of the project; the profile it reads is checked "
                     "by runtime.exporter_memstall_profile (pprof's protobuf, decoded)",
    "curl -s -o memstall.pb.gz": "the profile the next line reads (not run, see go tool pprof)",
}


@dataclass
class Command:
    text: str
    terminal: str            # "#": this terminal, after the tool; "$": another, beside it
    output: list[str] = field(default_factory=list)

    def words(self) -> list[str]:
        try:
            return shlex.split(self.text, comments=True)
        except ValueError:
            return self.text.split()

    def program(self) -> str:
        """The program the command runs: past environment assignments and the commands that
        run another (setpriv ... memlat drsnoop, env ...)."""
        words = [w for w in self.words() if not re.match(r"^[A-Z_]+=", w)]
        if words and words[0] in ("setpriv", "env", "sudo"):
            words = [w for w in words[1:] if not w.startswith("-")]
        return os.path.basename(words[0]) if words else ""

    def runs_tool(self) -> bool:
        return self.program() in COMMANDS

    def not_run_reason(self) -> str | None:
        for prefix, reason in NOT_RUN.items():
            if self.text.startswith(prefix):
                return reason
        return None


def bound_seconds(words: list[str]) -> float | None:
    """The run time a tool command asks for: -d SECONDS, or INTERVAL COUNT (memlat top: -b
    INTERVAL COUNT too); None when it runs until Ctrl-C."""
    for i, w in enumerate(words):
        if w in ("-d", "--duration") and i + 1 < len(words):
            return float(words[i + 1])
        if w.startswith("--duration="):
            return float(w.split("=", 1)[1])
    numbers = [w for w in words if re.fullmatch(r"\d+(\.\d+)?", w)]
    if len(numbers) >= 2 and words[-1] == numbers[-1]:
        return float(numbers[-2]) * float(numbers[-1])
    return None


def needs_terminal(words: list[str]) -> bool:
    """memlat top's live screen: neither -b, -j nor a redirection."""
    tool = [w for w in words if w in ("top",) or w.endswith("memtop")]
    return bool(tool) and not any(w in ("-b", "-j") or w.startswith(">") for w in words)


def headings(output: list[str]) -> list[str]:
    """The lines of a capture that must be printed whatever the numbers: a table header (three
    or more columns, the first in capitals) or a section title ending in ":", without digits,
    not indented; and the labels of a record's lines (oomwhy's "  why:", "  victim:")."""
    out = []
    for line in output:
        label = re.match(r"^  ([a-z][a-z-]*:) ", line)
        if label:
            out.append(label.group(1))
            continue
        if not line or line[0].isspace() or re.search(r"\d", line) or line == "...":
            continue
        cols = line.split()
        if (len(cols) >= 3 and re.fullmatch(r"[A-Z][A-Z_%()/]*", cols[0])) or \
                line.rstrip().endswith(":"):
            out.append(" ".join(cols))
    return out


SERIES = re.compile(r"^(memlat_[a-z_]+(?:\{[^}]*\})?) ")


def series(lines: list[str]) -> set[str]:
    """The series of metric lines: name and labels; an info metric by its name alone (its
    labels describe the machine: memlat_tlb_remote_flush_path_info's path and hypervisor)."""
    out = set()
    for m in map(SERIES.match, lines):
        if m:
            name = m.group(1)
            out.add(name.split("{")[0] if name.split("{")[0].endswith("_info") else name)
    return out


@dataclass
class Block:
    page: str
    line: int
    lang: str
    commands: list[Command]
    prompted: bool       # a capture: commands after a prompt, then their output

    def where(self) -> str:
        return f"{os.path.relpath(self.page, SOURCE_DIR)}:{self.line}"

    def is_capture(self) -> bool:
        return self.lang == "" and self.prompted and bool(self.commands)

    def first_tool(self) -> Command | None:
        return next((c for c in self.commands if c.runs_tool()), None)


def blocks(page: str) -> list[Block]:
    text = open(page, encoding="utf-8").read()
    out = []
    for m in FENCE.finditer(text):
        lang, body = m.group(1).strip(), m.group(2)
        line = text[:m.start()].count("\n") + 1
        cmds: list[Command] = []
        prompted = bool(PROMPT.match(body.split("\n", 1)[0]))
        for raw in re.sub(r"\\\n\s*", "", body).splitlines():   # continuation lines joined
            p = PROMPT.match(raw)
            if prompted and p:
                cmds.append(Command(p.group(2), p.group(1)))
            elif prompted and cmds:
                cmds[-1].output.append(raw.rstrip())
            elif not prompted and lang == "sh" and raw.strip() and not raw.startswith("#"):
                cmds.append(Command(raw.split("  #")[0].strip(), "#"))
            elif not prompted and lang == "" and raw.split() and \
                    raw.split()[0] in COMMANDS and "#" in raw:
                # docs/top.md's command list: `memlat top ...    # what it does`.
                cmds.append(Command(raw.split("  #")[0].strip(), "#"))
        out.append(Block(page, line, lang, cmds, prompted))
    return out


def starts_program(c: Command) -> bool:
    """A workload step that runs a program (a workload of tests/, anything in the background),
    not a step of set-up."""
    return c.text.rstrip().endswith("&") or c.program().startswith("tests") or \
        c.text.startswith(("tests/", "sh -c"))


def setup_assignments(setup: list[Command]) -> list[Command]:
    """The variables the set-up assigns (CG=...), for the workload after it."""
    return [c for c in setup if re.match(r"^[A-Z_]+=\S+$", c.text.split("  #")[0].strip())]


class Scratch:
    """A directory to run a page's commands in, as a build directory: `tests/` holds the
    workloads, `../scripts/` the project's scripts, and every tool's name (and memlat-TOOL) is on
    PATH as a link to memlat. Removes what the recipe made on exit."""

    def __init__(self):
        self.top = tempfile.mkdtemp(prefix="memlat_examples_", dir=build_dir())
        self.dir = os.path.join(self.top, "build")      # pages run their commands in build/
        self.bin = os.path.join(self.top, "bin")
        os.mkdir(self.dir)
        os.mkdir(self.bin)
        os.symlink(os.path.join(build_dir(), "tests"), os.path.join(self.dir, "tests"))
        os.symlink(os.path.join(SOURCE_DIR, "scripts"), os.path.join(self.top, "scripts"))
        for name in COMMANDS:
            os.symlink(binary("memlat"), os.path.join(self.bin, name))
        self.env = dict(os.environ, PATH=f"{self.bin}:{os.environ.get('PATH', '')}")
        self.env.pop("MEMLAT_READY", None)
        self.files: set[str] = set()
        self.cgroups: list[str] = []
        self.groups: list[subprocess.Popen] = []

    def prepare(self, commands: list[Command]) -> None:
        """The files the commands read, made cold; the cgroups they make, noted for removal;
        the variables they set (CG=...), set for the commands after them."""
        for c in commands:
            for mib in DOC_FILE.findall(c.text):
                path = f"/var/tmp/memlat-docs-{mib}m"
                if path not in self.files:
                    with open(path, "wb") as f:
                        chunk = os.urandom(1 << 20)
                        for _ in range(int(mib)):
                            f.write(chunk)
                        f.flush()
                        os.fsync(f.fileno())
                        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                    self.files.add(path)
            words = [re.sub(r"\$(\w+)", lambda m: self.env.get(m.group(1), m.group(0)), w)
                     for w in c.words()]
            if words[:1] == ["mkdir"]:
                # The directory and those `mkdir -p` makes above it, if not there yet.
                for path in (w.rstrip(";") for w in words[1:] if w.startswith("/sys/fs/cgroup")):
                    while not os.path.exists(path) and path.count("/") > 4:
                        self.cgroups.append(path)
                        path = os.path.dirname(path)
            m = re.match(r"^([A-Z_]+)=(\S+)", c.text)
            if m and len(words) == 1:
                self.env[m.group(1)] = m.group(2)

    def spawn(self, text: str, **kw) -> subprocess.Popen:
        p = subprocess.Popen(["bash", "-c", text], cwd=self.dir, env=kw.pop("env", self.env),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True, text=True, **kw)
        self.groups.append(p)
        return p

    def __enter__(self) -> "Scratch":
        return self

    def __exit__(self, *exc) -> None:
        for p in self.groups:
            kill_group(p)
        for cg in sorted(set(self.cgroups), key=len, reverse=True):
            if os.path.isdir(cg):
                remove_cgroup_dir(cg)
        for path in self.files:
            try:
                os.unlink(path)
            except OSError:
                pass
        shutil.rmtree(self.top, ignore_errors=True)


def kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class Output(threading.Thread):
    """Collects a stream's lines while the command runs."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.lines = stream, []
        self.start()

    def run(self) -> None:
        for line in self.stream:
            self.lines.append(line.rstrip("\n"))


def run_tool(t: Test, s: Scratch, block: Block, workload: Block | None) -> None:
    """A tool block with its workload, as the page says, and its checks."""
    cmds = [c for c in block.commands if c.not_run_reason() is None]
    tool = block.first_tool()
    before = cmds[:cmds.index(tool)]
    after_tool = cmds[cmds.index(tool) + 1:]
    for c in before:      # the variable a block sets first (CG=...), files and cgroups
        s.prepare([c])
        if not re.match(r"^[A-Z_]+=\S+$", c.text.split("  #")[0].strip()):
            check_run(t, s, c, block)
    work = [c for c in (workload.commands if workload else []) if c.not_run_reason() is None]
    s.prepare(work + [tool] + after_tool)
    # The workload's set-up (the commands before the first that starts a program: mkdir, echo
    # into a cgroup, CG=...) runs before the tool, which may name what it makes (-G $CG).
    starts = next((i for i, c in enumerate(work) if starts_program(c)), len(work))
    setup, work = work[:starts], work[starts:]
    if setup:
        log("  set-up: " + "; ".join(c.text for c in setup))
        res = s.spawn("set -e\n" + "\n".join(c.text for c in setup))
        _, setup_err = res.communicate(timeout=60)
        t.require(res.returncode == 0, f"the set-up of {workload.where()} ran", "exit status 0",
                  f"{res.returncode}: {setup_err[-300:]}")
        work = setup_assignments(setup) + work
    words = tool.words()
    bound = bound_seconds(words)
    log(f"# {tool.text}    ({block.where()}; workload: "
        f"{workload.where() if workload else 'none'})")
    env = dict(s.env, MEMLAT_READY="1")
    proc = s.spawn(tool.text, env=env)
    out, err = Output(proc.stdout), Output(proc.stderr)
    end = time.monotonic() + 30
    while time.monotonic() < end and proc.poll() is None and \
            not any("memlat: ready" in l for l in err.lines):
        time.sleep(0.05)
    if not t.check(any("memlat: ready" in l for l in err.lines), f"`{tool.text}` became ready",
                   "memlat: ready", "\n".join(err.lines[-10:])):
        kill_group(proc)
        return
    w = None
    if work:
        log("  workload: " + "; ".join(c.text for c in work))
        # Every step must succeed, those in the background (&) too, but for a process the OOM
        # killer ended (SIGKILL, status 137): oomwhy's recipe is made of them.
        w = s.spawn("set -e\n" + "\n".join(c.text for c in work) +
                    "\nfor job in $(jobs -p); do wait $job || { rc=$?; "
                    "[ $rc -eq 137 ] || exit $rc; }; done")
    # Another terminal's commands (`$ curl ...`) and Ctrl-C come once the workload ended (or
    # at most WORKLOAD_WAIT later).
    if w is not None:
        try:
            w.wait(timeout=WORKLOAD_WAIT)
        except subprocess.TimeoutExpired:
            pass
    for c in after_tool:
        if c.terminal == "$":
            time.sleep(1.0)
            check_run(t, s, c, block)
    if bound is None:
        time.sleep(CTRL_C_AFTER)
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=(bound or 0) + BOUND_SLACK)
    except subprocess.TimeoutExpired:
        t.check(False, f"`{tool.text}` ended", f"within {(bound or 0) + BOUND_SLACK:.0f} s",
                "still running; killed")
        kill_group(proc)
        return
    if w is not None:
        if w.poll() is None:
            log("  the workload still ran when the tool ended: stopped")
            kill_group(w)
        else:
            t.check(w.returncode == 0, f"the workload of {block.where()} ran",
                    "exit status 0", f"{w.returncode}: {w.stderr.read()[-400:]}")
    out.join(5)
    err.join(5)
    printed = out.lines + err.lines
    redirected = re.search(r">\s*(\S+)", tool.text)
    if redirected:
        path = os.path.join(s.dir, redirected.group(1))
        written = open(path, errors="replace").read().splitlines() \
            if os.path.exists(path) else []
        t.check(written, f"`{tool.text}` wrote {redirected.group(1)}", "lines", len(written))
        printed += written
    t.check(proc.returncode == 0, f"`{tool.text}` ({block.where()}) exits 0", "0",
            f"{proc.returncode}: {' | '.join(err.lines[-5:])}")
    check_output(t, tool, printed, block)
    for c in after_tool:
        if c.terminal == "#":
            check_run(t, s, c, block)


def check_run(t: Test, s: Scratch, c: Command, block: Block) -> None:
    """A command that ends by itself (a workload step, curl, a script), and its headings."""
    log(f"{c.terminal} {c.text}")
    p = s.spawn(c.text)
    try:
        stdout, stderr = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill_group(p)
        t.check(False, f"`{c.text}` ({block.where()}) ends", "within 60 s", "killed")
        return
    t.check(p.returncode == 0, f"`{c.text}` ({block.where()}) exits 0", "0",
            f"{p.returncode}: {stderr[-300:]}")
    check_output(t, c, stdout.splitlines() + stderr.splitlines(), block)


def heading_key(line: str) -> str:
    """What of a heading must match: a section title up to its parenthesis, which may say what
    the machine does ("delivered here by shootdown IPI or by the hypervisor" on a KVM guest,
    "by the hypervisor, without IPIs" on a PVM guest); a table header whole."""
    line = " ".join(line.split())
    return line.split(" (")[0] if line.endswith(":") else line


def check_output(t: Test, c: Command, printed: list[str], block: Block) -> None:
    normal = {heading_key(l) for l in printed} | \
        {m.group(1) for m in (re.match(r"^  ([a-z][a-z-]*:) ", l) for l in printed) if m}
    missing = [h for h in headings(c.output) if heading_key(h) not in normal]
    t.check(not missing, f"the headings {block.where()} shows for `{c.text}` are printed",
            "all of them", f"missing {missing}" if missing else "all")
    shown = series(c.output)
    if shown:
        served = series(printed)
        t.check(shown <= served, f"the series {block.where()} shows are served", "all",
                sorted(shown - served) or "all")
        tools_up = {x for x in served if x.startswith("memlat_tool_up")}
        t.check_eq(f"{block.where()} shows memlat_tool_up for every tool served",
                   sorted(tools_up), sorted(x for x in shown if x.startswith("memlat_tool_up")))


def run_examples(t: Test, page: str) -> None:
    if os.path.basename(page) == "oomwhy.md" and \
            read_file("/proc/sys/vm/panic_on_oom", "0").strip() != "0":
        skip("vm.panic_on_oom is set: the page's OOM kill would panic this machine")
    captures = [b for b in blocks(page) if b.is_capture()]
    t.require(captures, f"{os.path.relpath(page, SOURCE_DIR)}'s example has captures",
              ">= 1", len(captures))
    ran = 0
    workload: Block | None = None
    for b in captures:
        if b.first_tool() is None:
            skipped = [c.text for c in b.commands if c.not_run_reason()]
            if skipped:
                log(f"not run ({b.where()}): {skipped}: {b.commands[0].not_run_reason()}")
                continue
            workload = b
            continue
        with Scratch() as s:     # each run from the same state: files cold, no cgroup yet
            run_tool(t, s, b, workload)
        ran += 1
    t.check(ran > 0, f"{os.path.relpath(page, SOURCE_DIR)}: tool commands run", ">= 1", ran)


def run_command_list(t: Test, page: str, block: Block, seen: set[str]) -> int:
    """A list of commands (README's quick start, docs/top.md's): each runs, by itself."""
    ran = 0
    with Scratch() as s:
        for c in block.commands:
            if c.text in seen:
                continue
            reason = c.not_run_reason()
            if reason:
                log(f"not run ({block.where()}): `{c.text}`: {reason}")
                continue
            if not c.runs_tool():
                t.check(False, f"`{c.text}` ({block.where()}) is run or listed in NOT_RUN "
                        "with a reason", "one of them", "neither")
                continue
            ran += 1
            seen.add(c.text)
            words = c.words()
            if needs_terminal(words):
                run_in_terminal(t, s, c, block)
                continue
            bound = bound_seconds(words)
            log(f"$ {c.text}    ({block.where()})")
            p = s.spawn(c.text, env=dict(s.env, MEMLAT_READY="1"))
            out, err = Output(p.stdout), Output(p.stderr)
            limit = bound if bound is not None and bound <= LIST_RUN else None
            if limit is None:
                end = time.monotonic() + 30
                while time.monotonic() < end and p.poll() is None and \
                        not any("memlat: ready" in l for l in err.lines):
                    time.sleep(0.05)
                time.sleep(LIST_RUN)
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGINT)
            try:
                p.wait(timeout=(limit or 0) + BOUND_SLACK)
            except subprocess.TimeoutExpired:
                kill_group(p)
            out.join(5)
            err.join(5)
            t.check(p.returncode == 0, f"`{c.text}` ({block.where()}) exits 0"
                    + ("" if limit is not None else " at Ctrl-C"), "0",
                    f"{p.returncode}: {' | '.join(err.lines[-5:])}")
            printed = [l for l in out.lines + err.lines if l.strip() and l != "memlat: ready"]
            t.check(printed, f"`{c.text}` prints something", "output", f"{len(printed)} lines")
    return ran


def run_in_terminal(t: Test, s: Scratch, c: Command, block: Block) -> None:
    words = c.words()
    args = words[words.index("top") + 1:] if "top" in words else words[1:]
    with ScreenTool(*args, program=f"{os.path.join(s.bin, 'memlat')} top", rows=24,
                    columns=80, cwd=s.dir) as screen:
        # Ready: the tools loaded ("memlat: ready"), or a replay's first screen drawn.
        end = time.monotonic() + 30
        while time.monotonic() < end and not screen.file("rc") and \
                "memlat: ready" not in screen.file("err") and \
                not any(l.startswith("memlat top") for l in screen.screen()):
            time.sleep(0.1)
        if not t.check(not screen.file("rc"), f"`{c.text}` ({block.where()}) in a terminal: "
                       "runs", "running", screen.file("err")[-300:]):
            return
        time.sleep(CTRL_C_AFTER)
        shown = screen.screen()
        screen.press("q")
        rc = screen.wait_exit()
        t.check(rc == 0, f"`{c.text}` quits with q and exits 0", "0", rc)
        t.check(any(l.startswith("memlat top") for l in shown), f"`{c.text}` draws its screen",
                "a line starting \"memlat top\"", shown[:2])


def pages() -> list[str]:
    return [os.path.join(SOURCE_DIR, "README.md")] + \
        sorted(glob.glob(os.path.join(SOURCE_DIR, "docs", "*.md"))) + \
        sorted(glob.glob(os.path.join(SOURCE_DIR, "docs", "tools", "*.md")))


def pages_with_examples() -> list[str]:
    """The pages with captures: each is a scenario."""
    return [p for p in pages() if any(b.is_capture() for b in blocks(p))]


for _page in pages_with_examples():
    _name = os.path.splitext(os.path.basename(_page))[0]

    @scenario(f"docs_example_{_name}")
    def _(t: Test, page=_page):
        run_examples(t, page)


@scenario("docs_command_lists")
def _(t: Test):
    """README's and the docs' ```sh blocks and docs/top.md's command list."""
    ran = 0
    seen: set[str] = set()     # a command two pages show runs once
    for page in pages():
        for b in blocks(page):
            if b.prompted or not b.commands:
                continue
            ran += run_command_list(t, page, b, seen)
    t.check(ran >= 20, "memlat commands run from the command lists", ">= 20", ran)


if __name__ == "__main__":
    sys.exit(main())
