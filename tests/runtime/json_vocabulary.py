"""docs/output.md's JSON vocabulary as the tests hold the tools to it: the tables under its
headings, and the rule that a key has one JSON type and, with a unit's suffix, the type the
keys table gives that unit. runtime.docs_json_vocabulary applies it to every tool's idle
output; the harness (memlat_test.main) to every JSON line a scenario read from a tool."""
from __future__ import annotations

import os

OUTPUT_PAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "docs", "output.md")
KEYS_SECTION = "Keys: one type each, the unit in the name"

# Objects whose member names are data (docs/output.md, "Keys: one type each"): their members
# are not keys; a member that is an object is walked as any, the others are of the map's kind.
DATA_MAPS = {"causes", "unmeasured_causes", "deferred", "memory_bytes", "vmstat_delta",
             "events_since_start"}


def vocabulary(section: str) -> dict[str, str]:
    """The keys of the table under docs/output.md's heading SECTION, with their types."""
    page = open(OUTPUT_PAGE, encoding="utf-8").read()
    at = page.find(f"\n### {section}\n")
    if at < 0:
        return {}
    text = page[at + 1:page.find("\n#", at + 1)]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def json_kind(value) -> str | None:
    if value is None:
        return None
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array",
            dict: "object"}[type(value)]


def key_kinds(lines: list[tuple[str, dict]]) -> dict[str, dict[str, str]]:
    """Every key of LINES (what printed it, the object), with each JSON type it was seen with
    and where it was first seen so."""
    seen: dict[str, dict[str, str]] = {}

    def walk(value, where: str) -> None:
        if isinstance(value, list):
            for item in value:
                walk(item, where)
        elif isinstance(value, dict):
            for key, member in value.items():
                if key.isdigit():  # a CPU's number
                    walk(member, where)
                    continue
                if key in DATA_MAPS and isinstance(member, dict):
                    # A map's members are of its key's kind (memory_bytes: integers).
                    for item in member.values():
                        if isinstance(item, dict):
                            walk(item, where)
                        elif (kind := json_kind(item)) is not None:
                            seen.setdefault(key, {}).setdefault(kind, where)
                    continue
                if (kind := json_kind(member)) is not None:
                    seen.setdefault(key, {}).setdefault(kind, where)
                walk(member, where)
    for what, obj in lines:
        walk(obj, what)
    return seen


def mixed_kinds(seen: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The keys seen with more than one JSON type."""
    return {key: kinds for key, kinds in seen.items() if len(kinds) > 1}


def check_keys(t, lines: list[tuple[str, dict]], what: str = "keys") -> dict:
    """Test T's checks that every key of LINES (what printed it, the object) has one JSON type,
    and a key with a unit's suffix the type docs/output.md's keys table gives it. Returns the
    keys seen (key_kinds())."""
    units = vocabulary(KEYS_SECTION)
    t.require(units.get("_ns") == "integer", "docs/output.md's keys table lists the suffixes",
              "_ns integer, ...", units)
    seen = key_kinds(lines)
    t.check_eq(f"{what} with more than one JSON type, over {len(seen)} keys of {len(lines)} "
               "lines (docs/output.md)", {}, mixed_kinds(seen))
    t.check_eq(f"{what} whose type is not their unit's (docs/output.md)", {},
               wrong_unit_kinds(seen, units))
    return seen


def wrong_unit_kinds(seen: dict[str, dict[str, str]], units: dict[str, str]) -> dict[str, str]:
    """The keys with a unit's suffix seen with a type the keys table does not give it."""
    wrong = {}
    for key, kinds in seen.items():
        suffix = max((s for s in units if key.endswith(s)), key=len, default=None)
        allowed = {"integer", "float"} if units.get(suffix) == "number" else \
            {units.get(suffix)}
        if suffix and set(kinds) - allowed:
            wrong[key] = f"{sorted(kinds)} ({next(iter(kinds.values()))}), {suffix} is " \
                         f"{units[suffix]}"
    return wrong
