"""Command-line entry point: one module per command.

Each command module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``main(args) -> int``. A command's module is imported only when it runs, so a
slow import (numpy, matplotlib) costs nothing to the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

__all__ = ["COMMANDS", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "nts": ("streaming.cli.nts", "count or list network templates (InitNTGen on G1)"),
    "cns": ("streaming.cli.cns", "generate the candidate networks of a query"),
    "run": ("streaming.cli.run", "evaluate a keyword query over an op stream, writing add/remove events"),
    "compare": ("streaming.cli.compare", "compare two event files of `run` (live sets after every op)"),
    "run-plan": ("streaming.cli.run_plan", "evaluate a plan of queries and aggregates over an op stream, with sharing"),
    "workload": ("streaming.cli.workload", "generate a schema and an op stream (synthetic, ecommerce, dblp, tpch)"),
    "asc": ("streaming.cli.asc", "evaluate selection predicates with attribute selection constructs"),
    "wxquery": ("streaming.cli.wxquery", "WXQuery subscriptions over XML streams: APT, matching, shared evaluation"),
    "cdc": ("streaming.cli.cdc", "capture a PostgreSQL publication (snapshot, then every committed change) into ops"),
    "bench": ("streaming.cli.bench", "run a benchmark (cngen, eval, asc), writing JSON and PNG plots"),
}


def _usage() -> str:
    lines = ["usage: python -m streaming COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<9} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines.append("")
    lines.append("python -m streaming COMMAND --help for a command's options")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, help_ = COMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"python -m streaming {name}", description=help_)
    module.add_arguments(parser)
    return int(module.main(parser.parse_args(rest)) or 0)
