"""``python -m streaming workload NAME ... --out-dir DIR``: write schema.json, ops.ndjson, query.json.

NAME is ``synthetic`` (the paper's Table 3 workload), ``ecommerce``, ``dblp``
or ``tpch`` (``tpchgen-cli`` data in date order). ``query.json`` suggests a
query for ``python -m streaming run`` (keywords, tmax, window_seconds).
"""

from __future__ import annotations

import argparse
import json

__all__ = ["HELP", "add_arguments", "main"]

HELP = "generate a schema and an op stream (synthetic, ecommerce, dblp, tpch)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=("synthetic", "ecommerce", "dblp", "tpch"))
    parser.add_argument("--out-dir", required=True, help="directory for schema.json, ops.ndjson, query.json")
    parser.add_argument("--seed", type=int, default=0)
    syn = parser.add_argument_group("synthetic (paper Table 3; defaults in bold there)")
    syn.add_argument("--relations", type=int, default=15, help="|V| (tree schema, each joins up to 4 others)")
    syn.add_argument("--seconds", type=int, default=3600, help="stream length; one insert per relation per second")
    syn.add_argument("--kwf", type=float, default=0.01, help="probability of each keyword in a tuple")
    syn.add_argument("--sel", type=int, default=1000, help="FK values among the last sel keys (selectivity 1/sel)")
    syn.add_argument("--window-seconds", type=float, default=1200, help="W suggested in query.json")
    syn.add_argument("--m", type=int, default=3, help="keywords in the suggested query")
    syn.add_argument("--tmax", type=int, default=4, help="tmax of the suggested query")
    other = parser.add_argument_group("ecommerce / dblp / tpch")
    other.add_argument("--ops", type=int, default=5000, help="ecommerce: number of ops")
    other.add_argument("--shift-every", type=int, default=0,
                       help="ecommerce: alternate two seasons (prices, customers' states) every N ops (0: stationary)")
    other.add_argument("--papers", type=int, default=2000, help="dblp: number of papers")
    other.add_argument("--scale-factor", type=float, default=0.01, help="tpch: tpchgen-cli scale factor")
    other.add_argument("--max-orders", type=int, default=None, help="tpch: keep the first N orders by date")


def main(args: argparse.Namespace) -> int:
    from ..workloads import write_workload

    if args.name == "synthetic":
        from ..workloads import synthetic

        workload = synthetic.build(args.relations, args.seconds, args.kwf, args.sel, seed=args.seed,
                                   window_seconds=args.window_seconds, m=args.m, tmax=args.tmax)
    elif args.name == "ecommerce":
        from ..workloads import ecommerce

        workload = ecommerce.build(args.ops, args.seed, shift_every=args.shift_every)
    elif args.name == "dblp":
        from ..workloads import dblp

        workload = dblp.build(args.papers, args.seed)
    else:
        from ..workloads import tpch

        workload = tpch.build(args.scale_factor, args.max_orders)
    print(json.dumps(write_workload(workload, args.out_dir)))
    return 0
