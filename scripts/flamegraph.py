#!/usr/bin/env python3
"""Draws folded stacks (memstall --folded: "root;...;leaf VALUE" per line) as a flame graph in
SVG, root at the bottom, each frame as wide as its share of the total. Standard library only:
Debian packages no flame graph tool, and the docs build needs nothing beyond python3.

    scripts/flamegraph.py [--title TEXT] [--unit ns|count] < stalls.folded > stalls.svg

Colours tell frames apart by kind: the root frames of memstall (cause, process) grey, kernel
frames (marked "_[k]") orange, user frames blue. Each frame has a tooltip with its value and
share. Frames narrower than --min-width pixels are left out (their time stays in the parent).
"""
import argparse
import html
import sys
import zlib

ROW = 17          # pixels per stack level
FONT = 11         # px
CHAR = 6.2        # px per character at that size (monospace-ish estimate for clipping)
WIDTH = 1200
MARGIN = 10


class Node:
    def __init__(self, name: str):
        self.name = name
        self.value = 0
        self.children: dict[str, "Node"] = {}


def parse(lines) -> Node:
    root = Node("all")
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, value = line.rpartition(" ")
        if not stack or not value.isdigit():
            sys.exit(f"flamegraph.py: line {n} is not 'frames value': {line[:80]!r}")
        node = root
        node.value += int(value)
        for frame in stack.split(";"):
            node = node.children.setdefault(frame, Node(frame))
            node.value += int(value)
    return root


def colour(name: str, depth: int, roots: int) -> str:
    # A stable colour per name (its CRC), within the kind's hue band.
    shade = zlib.crc32(name.encode()) % 55
    if depth <= roots:
        return f"rgb({170 + shade // 2},{170 + shade // 2},{170 + shade // 2})"
    if name.endswith("_[k]"):
        return f"rgb({200 + shade},{110 + shade},{40})"
    return f"rgb({60 + shade},{130 + shade},{210})"


def draw(root: Node, title: str, unit: str, min_width: float, roots: int) -> str:
    def depth_of(node: Node) -> int:
        return 1 + max((depth_of(c) for c in node.children.values()), default=0)

    levels = depth_of(root)
    height = (levels + 1) * ROW + 3 * MARGIN + 20
    scale = (WIDTH - 2 * MARGIN) / max(1, root.value)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="monospace" font-size="{FONT}">',
           f'<rect width="100%" height="100%" fill="#fdfdf6"/>',
           f'<text x="{WIDTH / 2}" y="{MARGIN + 12}" text-anchor="middle" font-size="14">'
           f'{html.escape(title)}</text>']

    def amount(value: int) -> str:
        if unit == "ns":
            return f"{value / 1e6:.2f} ms"
        return f"{value} stalls"

    def place(node: Node, x: float, depth: int) -> None:
        w = node.value * scale
        if w < min_width:
            return
        y = height - MARGIN - (depth + 1) * ROW
        name = node.name
        share = 100.0 * node.value / max(1, root.value)
        out.append(f'<g><title>{html.escape(name)} ({amount(node.value)}, {share:.1f}%)</title>'
                   f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{ROW - 1}" rx="2" '
                   f'fill="{colour(name, depth, roots)}"/>')
        fits = int((w - 6) / CHAR)
        if fits >= 3:
            label = name if len(name) <= fits else name[:fits - 2] + ".."
            out.append(f'<text x="{x + 3:.1f}" y="{y + ROW - 5}">{html.escape(label)}</text>')
        out.append("</g>")
        child_x = x
        for child in sorted(node.children.values(), key=lambda c: c.name):
            place(child, child_x, depth + 1)
            child_x += child.value * scale

    place(root, MARGIN, 0)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--title", default="memlat memstall: stalled stacks")
    ap.add_argument("--unit", choices=("ns", "count"), default="ns",
                    help="what the values are (memstall --folded: ns; --folded-counts: count)")
    ap.add_argument("--min-width", type=float, default=0.5, help="pixels (default 0.5)")
    ap.add_argument("--roots", type=int, default=2,
                    help="leading frames that are not code (memstall's cause and process: 2)")
    args = ap.parse_args()
    root = parse(sys.stdin)
    if root.value == 0:
        sys.exit("flamegraph.py: no stacks on stdin")
    sys.stdout.write(draw(root, args.title, args.unit, args.min_width, args.roots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
