"""``python -m streaming asc`` — evaluate selection predicates over one relational stream.

Reads ``Q.json`` (``[{"id": "q1", "predicates": [...]}, ...]``) and
``T.ndjson`` (one tuple object a line) and prints one line per tuple,
``{"i": 0, "queries": ["q1"], "evaluated": 3}``, then the totals
``{"cost", "dropped", "tuples", "rearrangements", "monitor_evaluated", "rejected"}``.
Rejected tuples (bad JSON, wrong type) and every rearrangement event go to
stderr as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..asc import AscIndex, AscStream, PredicateError
from ..schema import ValueRejected

HELP = "evaluate selection predicates with attribute selection constructs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queries", required=True, help="Q.json: [{id, predicates: [...]}, ...]")
    parser.add_argument("--tuples", required=True, help="T.ndjson: one tuple object a line")
    parser.add_argument("--strategy", required=True, help="macro | hybrid | ticket | fixed:A3,A1,...")
    parser.add_argument("--period", type=int, default=10_000, help="re-computation period λ in tuples")
    parser.add_argument("--mu", type=float, default=0.0, help="rearrangement threshold μ")
    parser.add_argument("--sample-size", type=int, default=1000, help="sampled tuples per period for the monitor")
    parser.add_argument("--seed", type=int, default=0, help="seed of sampling and ticket lotteries")


def load_queries(doc: Any) -> dict[str, list[Any]]:
    """``[{"id", "predicates"}, ...]`` as ``{id: predicates}``; raises ``PredicateError``."""
    if not isinstance(doc, list):
        raise PredicateError("queries: expected a JSON list of {id, predicates}")
    out: dict[str, list[Any]] = {}
    for n, q in enumerate(doc):
        if not isinstance(q, dict) or set(q) - {"id", "predicates"} or "id" not in q:
            raise PredicateError(f"queries[{n}]: expected an object with id and predicates")
        if q["id"] in out:
            raise PredicateError(f"queries[{n}]: duplicate id {q['id']!r}")
        out[q["id"]] = q.get("predicates", [])
    return out


def main(args: argparse.Namespace) -> int:
    try:
        with open(args.queries, encoding="utf-8") as fh:
            index = AscIndex.build(load_queries(json.load(fh)))
        stream = AscStream(index, args.strategy, args.period, args.mu, args.sample_size, args.seed)
    except (OSError, json.JSONDecodeError, PredicateError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rejected = 0
    out = sys.stdout
    with open(args.tuples, encoding="utf-8") as fh:
        i = -1
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            i += 1
            try:
                values = json.loads(line)
                if not isinstance(values, dict):
                    raise ValueRejected("a tuple must be a JSON object")
                grb, evaluated = stream.process(values)
            except (json.JSONDecodeError, ValueRejected) as exc:
                rejected += 1
                print(json.dumps({"type": "reject", "line": lineno, "i": i, "reason": str(exc)}), file=sys.stderr)
                continue
            out.write(json.dumps({"i": i, "queries": index.query_names(grb), "evaluated": evaluated}) + "\n")
            for event in stream.drain_events():
                if event["type"] == "rearrangement":
                    print(json.dumps(event), file=sys.stderr)
    out.write(json.dumps({**stream.summary(), "rejected": rejected}) + "\n")
    return 0
