#!/usr/bin/env python3
"""Build check: the multi-call binary. `memlat -h` lists every tool, one line each;
`memlat --version` prints the version; `memlat TOOL ARGS`, the link BUILD/TOOL and a link named
memlat-TOOL (the Debian package's name) give the same output and exit status (help, a usage
error); an unknown tool or no tool is a usage error.

usage: check_multicall.py BUILD_DIR NAME=LINK...  (the registry's entries; LINK, the bare link
in BUILD that runs it, may be empty)"""
import os
import subprocess
import sys
import tempfile


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def main() -> int:
    build = sys.argv[1]
    entries = dict(word.split("=", 1) for word in sys.argv[2:])
    tools = list(entries)
    memlat = os.path.join(build, "memlat")
    failures = []

    listing = run([memlat, "-h"])
    lines = listing.stdout.splitlines()
    if listing.returncode != 0:
        failures.append(f"memlat -h exited {listing.returncode}: {listing.stderr}")
    for tool in tools:
        mine = [line for line in lines if line.split()[:1] == [tool]]
        if len(mine) != 1 or len(mine[0].split()) < 3:
            failures.append(f"memlat -h has no line for {tool} (with what it does):\n"
                            f"{listing.stdout}")
    print(listing.stdout)

    version = run([memlat, "--version"])
    if version.returncode != 0 or not version.stdout.startswith("memlat "):
        failures.append(f"memlat --version: exit {version.returncode}, {version.stdout!r}")

    for argv, why in (([], "no tool"), (["nosuchtool"], "an unknown tool")):
        res = run([memlat, *argv])
        if res.returncode != 2 or not res.stderr.startswith("memlat: ") and argv:
            failures.append(f"memlat {' '.join(argv)} ({why}): exit {res.returncode} "
                            f"(expected 2), stderr {res.stderr[:200]!r}")
        if not res.stderr:
            failures.append(f"memlat {' '.join(argv)} ({why}): nothing on stderr")

    prefixed_links = tempfile.TemporaryDirectory()
    for tool in tools:
        prefixed = os.path.join(prefixed_links.name, f"memlat-{tool}")
        os.symlink(os.path.abspath(memlat), prefixed)
        for args in (["-h"], ["--no-such-option"], ["-p", "x"]):
            via_memlat = run([memlat, tool, *args])
            bare = [os.path.join(build, entries[tool])] if entries[tool] else []
            for link in bare + [prefixed]:
                via_link = run([link, *args])
                for what in ("returncode", "stdout", "stderr"):
                    if getattr(via_link, what) != getattr(via_memlat, what):
                        failures.append(f"{os.path.basename(link)} {' '.join(args)} and memlat "
                                        f"{tool} {' '.join(args)} differ in {what}:\n"
                                        f"{getattr(via_link, what)!r}\n"
                                        f"{getattr(via_memlat, what)!r}")
        if not via_link.stderr.startswith((f"{tool}: ", f"memlat {tool}: ")):
            failures.append(f"{tool} -p x: the usage error names the tool: {via_link.stderr!r}")

    prefixed_links.cleanup()
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
