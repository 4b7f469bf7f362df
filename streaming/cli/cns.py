"""``python -m streaming cns --schema S.json --keywords "k1 k2" --tmax T``: the candidate networks of a query.

Without ``--count``, one CN a line: its readable form, a tab, its canonical
code. ``--lattice text|json`` prints the CN lattice instead.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..cn import ALGORITHMS, generate_cns
from ..cn.nt2cn import build_dag
from ..keywords import KeywordError, parse_keywords
from ..lattice import Lattice
from ..schema import SchemaError, load_schema

HELP = "generate the candidate networks of a query"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", required=True, help="schema JSON file")
    parser.add_argument("--keywords", required=True, help='the query keywords, e.g. "dress texas"')
    parser.add_argument("--tmax", type=int, required=True, metavar="T", help="maximum number of nodes in a CN")
    parser.add_argument("--algorithm", choices=ALGORITHMS, default="nt", help="InitNTGen (nt, default) or InitCNGen")
    parser.add_argument("--count", action="store_true", help="print only the number of CNs")
    parser.add_argument("--lattice", choices=("text", "json"), help="print the CN lattice (text lines or JSON)")


def main(args: argparse.Namespace) -> int:
    try:
        schema = load_schema(args.schema)
        keywords = parse_keywords(args.keywords)
    except (SchemaError, KeywordError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.tmax < 1:
        print("error: --tmax must be at least 1", file=sys.stderr)
        return 2
    m = len(keywords)
    if args.algorithm == "nt" and (args.count or args.lattice):
        lattice = Lattice(build_dag(schema, m, args.tmax))
    else:
        cns = generate_cns(schema, m, args.tmax, args.algorithm)
        if args.count:
            print(len(cns))
            return 0
        if not args.lattice:
            for cn in cns:
                sys.stdout.write(f"{cn.describe(keywords)}\t{cn.code}\n")
            return 0
        lattice = Lattice.from_cns(cns)
    if args.count:
        print(len(lattice.roots))
    elif args.lattice == "json":
        json.dump(lattice.to_json(), sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(lattice.dump_text() + "\n")
    return 0
