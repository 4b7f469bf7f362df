"""``python -m streaming nts --keywords-count M --tmax T [--count]``: the network templates (InitNTGen on G1).

Without ``--count``, one template a line: its readable form, a tab, its code
(keyword masks in decimal, children in brackets).
"""

from __future__ import annotations

import argparse
import sys

from ..cn.templates import NTNode, generate_nts

HELP = "count or list network templates (InitNTGen on G1)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keywords-count", "-m", type=int, required=True, metavar="M", help="number of keywords m")
    parser.add_argument("--tmax", type=int, required=True, metavar="T", help="maximum number of nodes")
    parser.add_argument("--count", action="store_true", help="print only the number of templates")


def main(args: argparse.Namespace) -> int:
    if args.keywords_count < 1 or args.tmax < 1:
        print("--keywords-count and --tmax must be at least 1", file=sys.stderr)
        return 2
    forest = generate_nts(args.keywords_count, args.tmax)
    if args.count:
        print(len(forest.roots))
        return 0
    out = sys.stdout
    for nt in forest.roots:
        out.write(f"{_describe(nt)}\t{nt.code()}\n")
    return 0


def _describe(node: NTNode) -> str:
    """Readable form, keywords numbered from 1: ``R{}( R{k1}, R{k2} )``."""
    label = "R{" + ",".join(f"k{i + 1}" for i in range(node.mask.bit_length()) if node.mask >> i & 1) + "}"
    if not node.children:
        return label
    return f"{label}( {', '.join(_describe(c) for c in node.children)} )"
