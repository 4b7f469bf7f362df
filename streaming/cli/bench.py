"""``python -m streaming bench NAME`` — dispatch to ``streaming.bench.NAME``.

Each benchmark module defines ``HELP``, ``add_arguments(parser)`` and
``main(args) -> int``, like a command.
"""

from __future__ import annotations

import argparse
import importlib

HELP = "run a benchmark, writing JSON and PNG plots"

BENCHMARKS = {
    "cngen": "CN generation: InitNTGen vs InitCNGen, lattice build",
    "eval": "evaluation: CNEvalDynamic vs the operator mesh, static-dynamic",
    "asc": "selection constructs: macro, hybrid, ticket routing, fixed sequences",
    "sharing": "many saved queries over one stream: each alone vs sharing and widening",
    "wxquery": "WXQuery sharing on the photons stream: 32 random subscriptions, none / match / widen",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=sorted(BENCHMARKS), help="; ".join(f"{k}: {v}" for k, v in BENCHMARKS.items()))
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's own options (NAME --help)")


def main(args: argparse.Namespace) -> int:
    module = importlib.import_module(f"streaming.bench.{args.name}")
    parser = argparse.ArgumentParser(prog=f"python -m streaming bench {args.name}", description=BENCHMARKS[args.name])
    module.add_arguments(parser)
    return int(module.main(parser.parse_args(args.options)) or 0)
