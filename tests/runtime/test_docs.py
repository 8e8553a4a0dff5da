#!/usr/bin/env python3
"""The user documentation follows the binaries it describes: each tool's page,
docs/tools/TOOL.md, shows the tool's `-h` as the tool prints it, names every long option `-h`
lists, and names no option `-h` does not list (so a page cannot keep an option that was
renamed or removed, nor invent one). The metric table of docs/exporter.md is checked against
what the exporters serve by test_prometheus.py's prometheus_metric_names."""
from __future__ import annotations

import calendar
import difflib
import json
import os
import re
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from json_vocabulary import KEYS_SECTION, vocabulary  # noqa: E402
from json_vocabulary import check_keys as check_vocabulary_keys  # noqa: E402
from memlat_test import Test, binary, log, main, run, scenario, source_tools  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = source_tools()  # every tool has a page
# A long option: two dashes, a letter, then letters, digits, '-', '_' or '.' (--web.config.file,
# --TOOL.NAME of memlat exporter), not ending in punctuation.
LONG_OPTION = re.compile(r"(?<![\w-])--[A-Za-z][\w.-]*[\w]")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def help_text(tool: str, *args: str) -> str:
    res = run([binary(tool), *args, "-h"], timeout=15)
    if res.rc != 0:
        raise RuntimeError(f"{tool} {' '.join(args)} -h: exit status {res.rc}: {res.stderr[:300]}")
    return res.stdout


def normalized(text: str) -> list[str]:
    """Lines without trailing blanks, and without blank lines at either end."""
    lines = [l.rstrip() for l in text.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def usage_block(page: str) -> str | None:
    """The first fenced block after the page's "## Usage" heading."""
    at = page.find("\n## Usage")
    if at < 0:
        return None
    m = FENCE.search(page, at)
    return m.group(1) if m else None


def command_options(command: str, tool: str) -> list[str]:
    """The long options a command line gives to the tool: those of `TOOL ...`, `memlat TOOL
    ...` and `memlat-TOOL ...` (after an optional shell prompt, path or environment
    assignments), and a bare `--option`; none of another program's command line (a workload,
    stress-ng, setpriv) or of output lines."""
    words = command.strip().split()
    while words and words[0] in ("#", "$"):
        words.pop(0)
    while words and re.match(r"^[A-Z_]+=", words[0]):
        words.pop(0)
    if not words:
        return []
    first = os.path.basename(words[0])
    if first.startswith("--"):
        return LONG_OPTION.findall(command)
    if first in (tool, f"memlat-{tool}") or (first == "memlat" and words[1:2] == [tool]):
        return LONG_OPTION.findall(" ".join(words[1:]))
    return []


def page_options(page: str, tool: str) -> tuple[set[str], set[str]]:
    """(options the page names, the options its usage block shows). Options are taken from
    prose (outside code), from code spans and from the lines of code blocks that run the tool;
    the usage block (the `-h` text) is left out of the first set."""
    named: set[str] = set()
    usage = usage_block(page) or ""
    rest = page.replace(usage, "", 1) if usage else page
    # Code blocks: only the lines that run the tool.
    for block in FENCE.findall(rest):
        for line in block.splitlines():
            named.update(command_options(line.split("  #")[0], tool))
    prose = FENCE.sub("", rest)
    for span in CODE_SPAN.findall(prose):
        named.update(command_options(span, tool))
    named.update(LONG_OPTION.findall(CODE_SPAN.sub("", prose)))
    return named, set(LONG_OPTION.findall(usage))


@scenario("docs_options_match_help")
def _(t: Test):
    exporter_help = help_text("memlat", "exporter")
    exporter_options = set(LONG_OPTION.findall(exporter_help))
    for tool in TOOLS:
        path = os.path.join(SOURCE_DIR, "docs", "tools", f"{tool}.md")
        if not t.check(os.path.isfile(path), f"{tool} has a page", path,
                       "present" if os.path.isfile(path) else "missing"):
            continue
        page = open(path, encoding="utf-8").read()
        text = help_text(tool)
        listed = set(LONG_OPTION.findall(text))
        t.check(len(listed) >= 8, f"{tool} -h lists its long options", ">= 8", sorted(listed))
        usage = usage_block(page)
        t.check(usage is not None, f"docs/tools/{tool}.md has a \"## Usage\" block", "present",
                "present" if usage is not None else "absent")
        if usage is not None:
            diff = list(difflib.unified_diff(normalized(usage), normalized(text),
                                             f"docs/tools/{tool}.md", f"{tool} -h", lineterm=""))
            t.check(not diff, f"docs/tools/{tool}.md's usage block is `{tool} -h` as the tool "
                    "prints it (paste the tool's -h there)", "no difference",
                    "\n".join(diff[:60]))
        named, shown = page_options(page, tool)
        t.check_eq(f"{tool} -h options missing from docs/tools/{tool}.md", [],
                   sorted(listed - (named | shown)))
        # `memlat exporter`'s --TOOL.NAME options may be named where the page points there.
        invented = {o for o in named - listed
                    if not (o.startswith(f"--{tool}.") and o in exporter_options)}
        t.check_eq(f"options docs/tools/{tool}.md names that {tool} -h does not list", [],
                   sorted(invented))


@scenario("docs_tolerances_quoted")
def _(t: Test):
    """docs/testing.md's "Tolerances" table is tests/runtime/tolerances.py's, row for row: each
    tolerance's name, what it allows, its oracle and why."""
    import tolerances
    page = open(os.path.join(SOURCE_DIR, "docs", "testing.md"), encoding="utf-8").read()
    at = page.find("\n## Tolerances")
    t.require(at >= 0, "docs/testing.md has a \"## Tolerances\" section", "present", "absent")
    section = page[at:page.find("\n## ", at + 1)]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:]
    t.check_eq("tolerances the page lists vs tolerances.py's", sorted(tolerances.TOLERANCES),
               sorted(rows))
    for name, tol in tolerances.TOLERANCES.items():
        t.check_eq(f"{name}: the page's row (allowed, oracle, why)",
                   [tol.allowed(), tol.oracle, tol.why], rows.get(name))


TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
         "object": (dict,), "array": (list,)}
ISO_UTC_MS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z$")


# What docs/output.md's type row says a line can be.
LINE_KINDS = {"event", "interval", "summary", "kill", "reaper"}


def row_words(section: str, key: str) -> list[str]:
    """The `quoted` words of the meaning of KEY's row in the table under SECTION."""
    page = open(os.path.join(SOURCE_DIR, "docs", "output.md"), encoding="utf-8").read()
    at = page.find(f"\n### {section}\n")
    row = re.search(rf"^\| `{key}` \|[^|]*\|(.*)\|$", page[at:], re.M) if at >= 0 else None
    return re.findall(r"`([a-z_]+)`", row.group(1)) if row else []


def json_objects(t: Test, what: str, stdout: str) -> list[dict]:
    objects = []
    for number, line in enumerate(stdout.splitlines(), 1):
        try:
            objects.append(json.loads(line))
        except ValueError as e:
            t.check(False, f"{what}: line {number} is JSON", "an object", f"{e}: {line[:200]}")
    return objects


def check_stamp(t: Test, what: str, obj: dict, rules: dict[str, str],
                window: tuple[float, float] | None) -> bool:
    """OBJ has every key of RULES with its type, its timestamp is ISO 8601 UTC to the
    millisecond, epoch_ms is the same instant, and (WINDOW: seconds since the epoch) it falls
    in the run. True when all hold."""
    ok = True
    for key, kind in rules.items():
        if not isinstance(obj.get(key), TYPES[kind]) or isinstance(obj.get(key), bool) != \
                (kind == "boolean"):
            ok = t.check(False, f"{what}: \"{key}\" is a {kind}", kind,
                         f"{obj.get(key)!r} in {json.dumps(obj)[:200]}") and ok
    m = ISO_UTC_MS.match(str(obj.get("timestamp")))
    if not m or not isinstance(obj.get("epoch_ms"), int):
        return t.check(False, f"{what}: timestamp in ISO 8601 UTC with milliseconds",
                       "2026-12-06T07:40:01.123Z", obj.get("timestamp")) and False
    seconds = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    same = seconds * 1000 + int(m.group(2)) == obj["epoch_ms"]
    ok = t.check(same, f"{what}: epoch_ms is the timestamp's instant", obj["timestamp"],
                 obj["epoch_ms"]) and ok
    if window is not None:
        # The tool's clock and this test's are the same wall clock: the line was written
        # between the start of the command and its end.
        inside = window[0] - 0.001 <= obj["epoch_ms"] / 1000 <= window[1] + 0.001
        ok = t.check(inside, f"{what}: written during the run", f"in {window}",
                     obj["epoch_ms"] / 1000) and ok
    return ok


def check_keys(t: Test, lines: list[tuple[str, dict]]) -> None:
    """json_vocabulary.check_keys(), with a count of the keys that carry a unit."""
    seen = check_vocabulary_keys(t, lines)
    units = vocabulary(KEYS_SECTION)
    log(f"  {len(seen)} keys, {sum(1 for k in seen if any(k.endswith(s) for s in units))} "
        "with a unit's suffix")


@scenario("docs_json_vocabulary")
def _(t: Test):
    """Every JSON line of every tool carries the fields docs/output.md's "Fields every line
    has" lists, with their types: each tool with -j for about a second (the event tools also
    with -H intervals), memlat top's -j, its -o record and a replay of that record, which
    keeps the record's own time stamps."""
    rules = vocabulary("Fields every line has")
    t.require(rules.get("timestamp") == "string" and rules.get("epoch_ms") == "integer",
              "docs/output.md's \"Fields every line has\" table lists timestamp and epoch_ms",
              "timestamp string, epoch_ms integer", rules)
    t.check(all(kind in TYPES for kind in rules.values()), "the table's types are JSON's",
            sorted(TYPES), sorted(set(rules.values())))
    t.require(rules.get("type") == "string", "the table lists type, a string", "string",
              rules.get("type"))
    kinds = row_words("Fields every line has", "type")
    t.check_eq("the type row's kinds of line", sorted(LINE_KINDS), sorted(kinds))
    runs = {tool: [["-j", "-d", "1.2", "0.5"]] for tool in TOOLS + ["top"]}
    runs["oomwhy"] = [["-j", "-d", "1"]]
    runs["lockstall"] = [["-j", "-d", "1"]]  # events, then its summary: no interval
    for tool in ("drsnoop", "compactsnoop"):  # events and a summary; -H intervals
        runs[tool] = [["-j", "-d", "1"], ["-j", "-H", "-d", "1.2", "0.5"]]
    # Events and the final count (every task switch flushes: there are events in a second).
    runs["tlbflush"].append(["--trace", "-j", "-d", "1"])
    # The views whose lines have other keys, for the keys' section.
    views = {"tlbflush": [["-P", "-L", "--culprits", "-s"]], "drsnoop": [["-H", "-P"]],
             "numamove": [["--reasons"], ["-P"]], "cachestat": [["-P"], ["--per-file"]],
             "memstall": [["-C"], ["-s"]]}
    for tool, options in views.items():
        runs[tool] += [["-j", *o, "-d", "1.2", "0.5"] for o in options]
    every_line = []
    for tool, argvs in runs.items():
        for args in argvs:
            what = f"memlat {tool} {' '.join(args)}"
            # What each line must be: the tools with an exit summary end with it (oomwhy's
            # run of a second, without a kill, prints only that), the others with an interval
            # (tlbflush --trace: the final count); before it, events or intervals (-H).
            body = "event" if "--trace" in args or (
                "-H" not in args and tool in ("drsnoop", "compactsnoop", "lockstall")) else "interval"
            last = "summary" if tool in ("drsnoop", "compactsnoop", "cachestat", "oomwhy",
                                         "lockstall") or \
                (tool == "memstall" and "-s" in args) else "interval"
            start = time.time()
            res = run([binary("memlat"), tool, *args], timeout=60)
            window = (start, time.time())
            if not t.check(res.rc == 0, f"{what}: exit status", "0",
                           f"{res.rc}: {res.stderr[-300:]}"):
                continue
            objects = json_objects(t, what, res.stdout)
            every_line += [(what, o) for o in objects]
            t.check(len(objects) >= 1, f"{what}: printed JSON lines", ">= 1", len(objects))
            stamped = sum(check_stamp(t, what, o, rules, window) for o in objects)
            log(f"{what}: {len(objects)} lines, {stamped} as docs/output.md says")
            if objects:
                t.check_eq(f"{what}: the lines' types", [body] * (len(objects) - 1) + [last],
                           [o.get("type") for o in objects])
    check_keys(t, every_line)
    with tempfile.TemporaryDirectory() as tmp:
        record = os.path.join(tmp, "record.json")
        start = time.time()
        res = run([binary("memlat"), "top", "-b", "-o", record, "-d", "1.2", "0.5"], timeout=60)
        window = (start, time.time())
        t.require(res.rc == 0, "memlat top -o: exit status", "0", f"{res.rc}: {res.stderr[-300:]}")
        with open(record, encoding="utf-8") as f:
            recorded = json_objects(t, "memlat top -o's record", f.read())
        t.check(len(recorded) >= 2, "memlat top -o: intervals recorded", ">= 2", len(recorded))
        for obj in recorded:
            check_stamp(t, "memlat top -o's record", obj, rules, window)
        t.check_eq("memlat top -o: the record's lines are intervals",
                   ["interval"] * len(recorded), [o.get("type") for o in recorded])
        replay = run([binary("memlat"), "top", "--replay", record, "-j", "--rows", "100000"],
                     timeout=60)
        t.require(replay.rc == 0, "memlat top -r RECORD -j: exit status", "0",
                  f"{replay.rc}: {replay.stderr[-300:]}")
        replayed = json_objects(t, "memlat top -r", replay.stdout)
        t.check_eq("memlat top -r -j: the record's time stamps, line for line",
                   [(o.get("timestamp"), o.get("epoch_ms")) for o in recorded],
                   [(o.get("timestamp"), o.get("epoch_ms")) for o in replayed])


if __name__ == "__main__":
    sys.exit(main())
