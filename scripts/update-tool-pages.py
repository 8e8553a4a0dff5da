#!/usr/bin/env python3
"""Rewrites the "## Usage" block of each docs/tools/TOOL.md with what `BUILD/TOOL -h` prints
now, after a change of an option or its help. runtime.docs_options_match_help fails until the
pages say what the binaries say; this is how to make them.

    scripts/update-tool-pages.py build"""
import os
import re
import subprocess
import sys

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    build = sys.argv[1]
    pages = os.path.join(SOURCE, "docs", "tools")
    for name in sorted(os.listdir(pages)):
        tool, ext = os.path.splitext(name)
        if ext != ".md":
            continue
        path = os.path.join(pages, name)
        page = open(path).read()
        at = page.find("\n## Usage")
        m = FENCE.search(page, at) if at >= 0 else None
        if m is None:
            print(f"{path}: no fenced block after \"## Usage\"", file=sys.stderr)
            return 1
        out = subprocess.run([os.path.join(build, tool), "-h"], capture_output=True, text=True,
                             check=True).stdout
        text = "\n".join(line.rstrip() for line in out.strip("\n").splitlines()) + "\n"
        if text != m.group(1):
            open(path, "w").write(page[:m.start(1)] + text + page[m.end(1):])
            print(f"updated {os.path.relpath(path, SOURCE)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
