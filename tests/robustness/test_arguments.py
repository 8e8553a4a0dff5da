#!/usr/bin/env python3
"""Arguments a user or an attacker would try, for every tool: each must be a usage error
(exit 2) whose message names the problem, before anything is loaded into the kernel. One
table; each row is (tools, arguments, a phrase the message must contain)."""
from __future__ import annotations

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime"))
from memlat_test import Test, binary, main, run, scenario, skip, source_tools  # noqa: E402

# Every tool of the tree (tools/NAME/NAME.bpf.c): a row for ALL applies to each tool whose -h
# lists the row's first option (takes()), so a new tool is tried without editing a list, and
# a tool without that option (oomwhy has no -p) is not asked for it.
ALL = source_tools()
_HELP: dict[str, str] = {}


def takes(tool: str, args: list[str]) -> bool:
    """Whether the row's first argument is an option of `tool` (by its -h), or no option."""
    option = args[0] if args else ""
    if not option.startswith("-"):
        return True
    if tool not in _HELP:
        _HELP[tool] = run([binary(tool), "-h"], timeout=15).stdout
    return re.search(rf"(^|[\s,]){re.escape(option)}([=,\s]|$)", _HELP[tool], re.M) is not None
NO_PID = "999999999"

CASES: list[tuple[list[str], list[str], str]] = [
    # Durations and intervals that are numbers to a parser but no time to wait.
    (ALL, ["-d", "inf"], "must be a positive number of seconds"),
    (ALL, ["-d", "nan"], "must be a positive number of seconds"),
    (ALL, ["-d", "-1"], "must be a positive number of seconds"),
    (ALL, ["-d", "0"], "must be a positive number of seconds"),
    (ALL, ["-d", "1e300"], "longer than memlat can wait"),
    (ALL, ["-d", "9223372037"], "longer than memlat can wait"),
    (ALL, ["-d", "1s"], "takes a number"),
    (["tlbflush", "numamove", "cachestat", "memstall"], ["nan"], "must be a positive number of seconds"),
    (["tlbflush", "numamove", "cachestat", "memstall"], ["inf"], "must be a positive number of seconds"),
    (["tlbflush", "numamove", "cachestat", "memstall"], ["0.0001"], "must be at least 0.01 seconds"),
    (["tlbflush", "numamove", "cachestat", "memstall"], ["1", "0"], "count must be a positive number"),
    (["tlbflush", "numamove", "cachestat", "memstall"], ["1", "-3"], "invalid option"),
    # Empty values: -c '' would select nothing, or everything, silently.
    (ALL, ["-p", ""], "-p needs a value"),
    (["tlbflush"], ["-c", ""], "-c needs a value"),
    (["tlbflush"], ["--reason", ""], "--reason needs a value"),
    (["drsnoop", "compactsnoop"], ["-k", ""], "-k needs a value"),
    (["drsnoop", "cachestat", "memstall"], ["-G", ""], "-G needs a value"),
    (["drsnoop"], ["-n", ""], "-n needs a value"),
    (["drsnoop", "memstall"], ["-t", ""], "-t needs a value"),
    # Ids that name nothing.
    (ALL, ["-p", NO_PID], "no process with id"),
    (ALL, ["-p", "0"], "no process with id"),
    (ALL, ["-p", "-5"], "no process with id"),
    (ALL, ["-p", "12abc"], "takes a number"),
    (ALL, ["-p", "99999999999999999999"], "takes a number"),
    (["drsnoop", "memstall"], ["-t", NO_PID], "no thread with id"),
    # A thread of another process than -p's (this test's own, alive while it runs).
    (["drsnoop", "memstall"], ["-p", "1", "-t", str(os.getpid())],
     f"-t {os.getpid()} is a thread of process {os.getpid()}, not of -p 1"),
    # CPU lists and reasons.
    (["tlbflush"], ["-c", "4096"], "does not exist"),
    (["tlbflush"], ["-c", "1-0"], "runs backwards"),
    (["tlbflush"], ["-c", "0,,1"], "empty item"),
    (["tlbflush"], ["-c", "x"], "is not a CPU number"),
    (["tlbflush"], ["--reason", "99999999999999999999"], "unknown TLB flush reason"),
    (["tlbflush"], ["--reason", "31"], "unknown TLB flush reason"),
    (["tlbflush"], ["--reason", "no_such_reason"], "unknown TLB flush reason"),
    (["tlbflush"], ["--reason", "1,"], "empty item"),
    # Short options a tool gave up: the letter means another thing in the other tools.
    (["tlbflush"], ["-t"], "-t is no longer tlbflush's: write --trace"),
    (["tlbflush"], ["-r", "remote_shootdown"], "-r is no longer tlbflush's: write --reason"),
    (["numamove"], ["-r"], "-r is no longer numamove's: write --reasons"),
    (["numamove"], ["-c"], "-c is no longer numamove's: write --per-call"),
    (["cachestat"], ["-f"], "-f is no longer cachestat's: write --per-file"),
    # Cgroups that are not cgroups.
    (["drsnoop", "cachestat", "memstall"], ["-G", "/nonexistent/cgroup"], "does not exist"),
    (["drsnoop", "cachestat", "memstall"], ["-G", "/tmp"], "is not a cgroup directory"),
    (["drsnoop", "cachestat", "memstall"], ["-G", "/sys/fs/cgroup/memory/memory.stat"] if
     os.path.exists("/sys/fs/cgroup/memory/memory.stat") else ["-G", "/sys/fs/cgroup/cgroup.procs"],
     "is a file, not a cgroup"),
    # Kinds, names and options that do not exist.
    (["drsnoop"], ["-k", "nonsense"], "nonsense"),
    (["drsnoop"], ["-n", "a-name-longer-than-fifteen"], "longer than a task name"),
    (list(ALL), ["--no-such-option"], "unrecognized option"),  # every tool, no -h needed
    # Table sizes: none, more than the kernel should be asked for, not a number.
    (ALL, ["--max-entries", "0"], "--max-entries takes 1 to"),
    (ALL, ["--max-entries", "2000000"], "--max-entries takes 1 to"),
    (ALL, ["--max-entries", "many"], "takes a number"),
    (ALL, ["--max-entries", ""], "--max-entries needs a value"),
    (ALL, ["--btf", "/nonexistent/vmlinux.btf"], "cannot read it"),
    # Options of a mode the command line does not select would be silently ignored.
    (ALL, ["--max-series", "5"], "--max-series goes with --prometheus"),
    (["cachestat", "numamove", "tlbflush", "compactsnoop"], ["--max-entries", "5"],
     "it has nothing to size"),
    (ALL, ["--prometheus", "127.0.0.1:0", "-T"], "it takes no -T"),
    (["drsnoop"], ["-H", "-U"], "-U and -e go with the per-stall output"),
    (["drsnoop"], ["-H", "-e"], "-U and -e go with the per-stall output"),
    (["drsnoop"], ["--prometheus", "127.0.0.1:0", "-e"], "-U and -e go with the per-stall output"),
    (ALL, ["1", "2", "3"], "unexpected argument"),
    # The events' buffer: a size the ring buffer cannot have, or a mode without events.
    (["drsnoop", "compactsnoop"], ["--buffer-size", "12K"], "not a power of two"),
    (["drsnoop", "compactsnoop"], ["--buffer-size", "1K"], "less than one page"),
    (["drsnoop", "compactsnoop"], ["--buffer-size", "2G"], "more than 1G"),
    (["drsnoop", "compactsnoop"], ["--buffer-size", "lots"], "not a size"),
    (["drsnoop", "compactsnoop"], ["--buffer-size", ""], "--buffer-size needs a value"),
    (["drsnoop", "compactsnoop"], ["-H", "--buffer-size", "64K"], "this mode has none"),
    (["tlbflush"], ["--trace", "--buffer-size", "100000"], "not a power of two"),
    (["tlbflush"], ["--buffer-size", "64K"], "this mode has none"),
    (["numamove", "cachestat", "memstall"], ["--buffer-size", "64K"], "unrecognized option"),
]


# Environment variables the tools read, set to what names nothing.
ENV_CASES: list[tuple[list[str], dict[str, str], str]] = [
    (ALL, {"MEMLAT_DISABLE_HOOKS": "tp_btf,no_such_hook"}, "'no_such_hook' is not a hook"),
    (ALL, {"MEMLAT_DISABLE_FEATURES": "no_such_feature"}, "no_such_feature"),
]


@scenario("bad_arguments")
def _(t: Test):
    cases = 0
    for tools, env, phrase in ENV_CASES:
        for tool in tools:
            res = run([binary(tool), "-d", "0.1"], timeout=15, env=env)
            cases += 1
            what = f"{' '.join(f'{k}={v}' for k, v in env.items())} {tool}"
            t.check_eq(f"{what}: exit status", 2, res.rc)
            t.check(phrase in res.stderr, f"{what}: message", phrase, res.stderr.strip()[:200])
    for tools, args, phrase in CASES:
        for tool in tools:
            if tools is ALL and not takes(tool, args):
                continue
            res = run([binary(tool), *args], timeout=15)
            cases += 1
            what = f"{tool} {' '.join(repr(a) if a == '' else a for a in args)}"
            t.check_eq(f"{what}: exit status", 2, res.rc)
            t.check(phrase in res.stderr, f"{what}: message",
                    phrase, res.stderr.strip().splitlines()[0] if res.stderr.strip() else "(nothing)")
            t.check(res.stdout == "", f"{what}: nothing on stdout", "", res.stdout[:100])
    t.check_ge("cases run", 100, cases)


SYSFS_BTF = "/sys/kernel/btf/vmlinux"
FOREIGN_BTF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "btf", "debian",
                           "6.1.0-56-amd64.btf.xz")


@scenario("bad_btf")
def _(t: Test):
    """--btf FILE that is no BTF, or not this kernel's, is refused with a message naming the
    file and the problem (exit 1, before anything is loaded); valid BTF through a pipe is read."""
    import lzma
    import shlex
    import tempfile
    if not os.access(SYSFS_BTF, os.R_OK):
        skip(f"{SYSFS_BTF} is missing: the pipe and foreign-BTF cases compare with it")
    with tempfile.TemporaryDirectory(prefix="memlat_btf_") as tmp:
        empty = os.path.join(tmp, "empty.btf")
        open(empty, "w").close()
        foreign = os.path.join(tmp, "deb61.btf")
        with lzma.open(FOREIGN_BTF) as src, open(foreign, "wb") as dst:
            dst.write(src.read())
        if os.uname().release == "6.1.0-56-amd64":
            skip("the running kernel is the one whose BTF serves as the foreign one")
        bad = [([("--btf", tmp)], "is a directory, not a BTF file"),
               ([("--btf", empty)], "the file is empty, it holds no BTF"),
               ([("--btf", foreign)], "does not match the running kernel"),
               ([("MEMLAT_BTF", foreign)], "does not match the running kernel")]
        for tool in ALL:
            for spec, phrase in bad:
                name, value = spec[0]
                env = {name: value} if name == "MEMLAT_BTF" else None
                args = [] if env else [name, value]
                res = run([binary(tool), *args, "-d", "0.3"], timeout=30, env=env)
                what = f"{tool} {name} {os.path.basename(value)}"
                t.check_eq(f"{what}: exit status", 1, res.rc)
                t.check(phrase in res.stderr, f"{what}: message", phrase,
                        res.stderr.strip()[:240])
                t.check(value in res.stderr, f"{what}: names the file", value,
                        res.stderr.strip()[:240])
                t.check("reason_" not in res.stdout, f"{what}: no unnamed reason printed",
                        "none", res.stdout[:100])
            # Valid BTF through a process substitution (a pipe, read once, not seekable).
            cmd = f"exec {shlex.quote(binary(tool))} --btf <(cat {SYSFS_BTF}) -v -d 0.3"
            res = run(["bash", "-c", cmd], timeout=30)
            t.check_eq(f"{tool} --btf <(cat {SYSFS_BTF}): exit status", 0, res.rc)
            t.check("(--btf)" in res.stderr and "BTF: /dev/fd/" in res.stderr,
                    f"{tool} --btf <(...): -v names the piped BTF", "BTF: /dev/fd/N (--btf)",
                    next((l for l in res.stderr.splitlines() if "BTF:" in l), "(none)"))


if __name__ == "__main__":
    sys.exit(main())
