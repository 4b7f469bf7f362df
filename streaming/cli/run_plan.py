"""``python -m streaming run-plan``: a whole plan of queries and aggregate subscriptions over one op stream.

PLAN.json holds ``schema`` (the schema JSON), ``queries`` (``{"id", "keywords",
"tmax", "window_seconds", "predicates"}``; no keywords: a filter subscription)
and ``aggregates`` (``{"id", "source": {"query": id} | {"relation": R},
"aggregate", "attribute", "window", "step", "window_kind", "having",
"predicates"}``). Writes ``DIR/query-<id>.ndjson`` (the events of ``run``),
``DIR/aggregate-<id>.ndjson`` (``{"id", "window_end", "value"}`` per closed
window) and ``DIR/stats.json`` (with the CPU time of building the plan,
``plan_cpu_s``, and of encoding and writing the output files, ``output_cpu_s``,
beside the op loop's ``cpu_s``). ``--sharing`` picks how the queries share
work (``none``: each alone; ``match``; ``widen``); every file is the same
whichever it is. See ``docs/sharing.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pydantic import ValidationError

from ..sharing.properties import SharingPlan
from ..sharing.runner import MODES, PlanRun
from .run import EventEncoder, numbered_ops

__all__ = ["HELP", "add_arguments", "main"]

HELP = "evaluate a plan of queries and aggregate subscriptions over an op stream, with sharing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plan", required=True, help="plan JSON file (schema, queries, aggregates)")
    parser.add_argument("--ops", required=True, help="NDJSON op stream ('-' for stdin)")
    parser.add_argument("--out-dir", required=True, help="directory for query-<id>.ndjson, aggregate-<id>.ndjson, stats.json")
    parser.add_argument("--sharing", choices=MODES, default="widen",
                        help="none: each query alone; match: share without widening; widen (default)")
    parser.add_argument("--rejects", default=None, help="file for rejected ops (default: stderr)")


def main(args: argparse.Namespace) -> int:
    started = time.process_time()
    try:
        plan = SharingPlan.model_validate_json(Path(args.plan).read_text(encoding="utf-8"))
        run = PlanRun(plan, args.sharing)
    except (OSError, ValidationError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    plan_cpu_s = time.process_time() - started
    ops_in = sys.stdin if args.ops == "-" else open(args.ops, encoding="utf-8")
    try:
        run.feed((lineno, line) for _, lineno, line in numbered_ops(ops_in))
    finally:
        if ops_in is not sys.stdin:
            ops_in.close()
    started = time.process_time()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    encoder = EventEncoder()
    lines: dict[int, str] = {}  # a change tuple's line by its identity: a change reaching many queries is one tuple
    for qid, changes in run.changes.items():
        text = []
        for change in changes:
            line = lines.get(id(change))
            if line is None:
                line = lines[id(change)] = encoder.line(*change)
            text.append(line)
        with open(out / f"query-{qid}.ndjson", "w", encoding="utf-8") as fh:
            fh.write("".join(text))
    for aid, values in run.values.items():
        with open(out / f"aggregate-{aid}.ndjson", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps({"id": aid, "window_end": end, "value": value}) + "\n" for end, value in values)
    output_cpu_s = time.process_time() - started
    stats = run.stats()
    stats["plan_cpu_s"] = round(plan_cpu_s, 6)
    stats["output_cpu_s"] = round(output_cpu_s, 6)
    (out / "stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    rejects = sys.stderr if args.rejects is None else open(args.rejects, "w", encoding="utf-8")
    try:
        rejects.writelines(f"line {lineno}: {reason}\n" for lineno, reason in run.rejects)
    finally:
        if rejects is not sys.stderr:
            rejects.close()
    return 0
