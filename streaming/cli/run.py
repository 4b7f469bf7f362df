"""``python -m streaming run``: evaluate one keyword query over an NDJSON op stream.

Writes one event per line (docs/cli.md)::

    {"seq": 17, "type": "add", "tuples": [["Customer",5],["Order",9]], "edges": [...]}

``seq`` is the 0-based index of the op (non-blank line) during whose
processing the change happened. Rejected ops (malformed, unknown relation,
bad type, late, refused by the clock guard, duplicate insert, delete of a
missing key) are reported as ``line N: reason`` to stderr or ``--rejects
FILE``; processing continues. A rejected op that moved the stream clock
still reports the results its time ended (docs/ops.md, "The stream clock").
``--ts-min``, ``--ts-max`` and ``--max-clock-jump`` set the guard against
absurd timestamps (:class:`~streaming.clock.ClockGuard`).

``--predicate "Relation.attribute OP value"`` (repeatable; OP one of
``= != < <= > >= between``, the value JSON or a bare word, ``between [lo, hi]``)
restricts which tuples of that relation take part (results without the
relation are still results); with ``--keywords ""`` the query is a filter
subscription whose results are the tuples its predicates admit.

``--engine static-dynamic`` starts the query on a window that already holds
the first ``--static-prefix N`` ops: they are loaded and evaluated at once
with CNEvalStatic, the results found are reported as adds at the seq of the
last prefix op (N - 1), and CNEvalDynamic takes the rest op by op. With
``N = 0`` (the default) the query starts on an empty window, so the events
are those of ``dynamic``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from typing import IO, Any, Iterator

from ..asc.predicates import Predicate, PredicateError, parse_predicate
from ..clock import MAX_CLOCK_JUMP, TS_MAX, TS_MIN, ClockGuard
from ..engine import ENGINES, KeywordEngine
from ..evaluate.results import Result, TupleRef
from ..keywords import KeywordError, parse_keywords
from ..ops import Op, OpRejected, parse_op
from ..schema import Schema, SchemaError, load_schema
from ..query_alone import SelectedQuery

__all__ = ["HELP", "add_arguments", "main", "numbered_ops", "event_line", "EventEncoder", "parse_predicate_option"]

HELP = "evaluate a keyword query over an op stream, writing add/remove events"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", required=True, help="schema JSON file")
    parser.add_argument("--keywords", required=True,
                        help='the query, e.g. "dress texas" ("" with --predicate: a filter subscription)')
    parser.add_argument("--tmax", type=int, required=True, help="maximum number of tuples in a result")
    parser.add_argument("--window-seconds", type=float, default=None, help="sliding window W (default: none)")
    parser.add_argument("--engine", choices=ENGINES, default="dynamic")
    parser.add_argument("--static-prefix", type=int, default=0, metavar="N",
                        help="static-dynamic: the first N ops are the window the query starts on")
    parser.add_argument("--predicate", action="append", default=[], metavar='"Rel.attr OP value"',
                        help="selection predicate on one relation (repeatable; a conjunction)")
    parser.add_argument("--ops", required=True, help="NDJSON op stream ('-' for stdin)")
    parser.add_argument("--ts-min", type=float, default=TS_MIN, help=f"earliest ts the stream takes (default {TS_MIN:.0f})")
    parser.add_argument("--ts-max", type=float, default=TS_MAX, help=f"latest ts the stream takes (default {TS_MAX:.0f})")
    parser.add_argument("--max-clock-jump", type=float, default=MAX_CLOCK_JUMP, metavar="SECONDS",
                        help=f"how far one op may move the clock (default {MAX_CLOCK_JUMP:.0f}; 0: no limit)")
    parser.add_argument("--out", default="-", help="events NDJSON file (default: stdout)")
    parser.add_argument("--rejects", default=None, help="file for rejected ops (default: stderr)")


def parse_predicate_option(text: str, schema: Schema) -> Predicate:
    """``"Product.price >= 40"`` -> a checked :class:`Predicate` (raises ``PredicateError``)."""
    parts = text.strip().split(None, 2)
    if len(parts) != 3 or "." not in parts[0]:
        raise PredicateError(f"predicate {text!r}: expected 'Relation.attribute OP value'")
    relation, _, attribute = parts[0].partition(".")
    if relation not in schema.relations:
        raise PredicateError(f"predicate {text!r}: unknown relation {relation!r}")
    try:
        value: Any = json.loads(parts[2])
    except json.JSONDecodeError:
        value = parts[2]
    doc = {"relation": relation, "attribute": attribute, "op": parts[1], "value": value}
    rel = schema.relations[relation]
    return parse_predicate(doc, rel.attributes, relation, f"predicate {text!r}")


def numbered_ops(stream: IO[str]) -> Iterator[tuple[int, int, str]]:
    """``(seq, line number, text)`` of every non-blank line."""
    seq = 0
    for lineno, line in enumerate(stream, 1):
        if line.strip():
            yield seq, lineno, line
            seq += 1


def event_line(seq: int, kind: str, result: Result) -> str:
    """One event of the ``run`` output: ``{"seq", "type", "tuples", "edges"}``."""
    return json.dumps({"seq": seq, "type": kind, **result.to_json()})


class EventEncoder:
    """:func:`event_line`, with each result's part encoded once (a result is added and removed, and a
    shared result reaches many queries) and written the way ``json.dumps`` writes it: its relation and
    foreign key names, few, encoded once each, and integer keys as their digits."""

    def __init__(self) -> None:
        self._encoded: dict[Result, str] = {}
        self._names: dict[str, str] = {}

    def line(self, seq: int, kind: str, result: Result) -> str:
        """The event line (``kind`` is ``add`` or ``remove``)."""
        body = self._encoded.get(result)
        if body is None:
            body = self._encoded[result] = self._body(result)
        return f'{{"seq": {seq}, "type": "{kind}", {body}\n'

    def _body(self, result: Result) -> str:
        """``json.dumps(result.to_json())`` without its opening brace (an edge joins two of the result's
        tuples, whose JSON is made once)."""
        names = self._names
        refs = {ref: self._ref(ref) for ref in result.tuples}
        edges = ", ".join([f"[{refs.get(holder) or self._ref(holder)}, {refs.get(target) or self._ref(target)}, "
                           f"{names.get(fk) or self._name(fk)}]" for holder, target, fk in result.edges])
        return f'"tuples": [{", ".join(refs.values())}], "edges": [{edges}]}}'

    def _ref(self, ref: TupleRef) -> str:
        relation, key = ref
        return f"[{self._names.get(relation) or self._name(relation)}, {key if key.__class__ is int else json.dumps(key)}]"

    def _name(self, name: str) -> str:
        text = self._names[name] = json.dumps(name)
        return text


def main(args: argparse.Namespace) -> int:
    engine: KeywordEngine | SelectedQuery
    try:
        guard = ClockGuard(ts_min=args.ts_min, ts_max=args.ts_max, max_jump=args.max_clock_jump or None)
        schema = load_schema(args.schema)
        predicates = [parse_predicate_option(text, schema) for text in args.predicate]
        if predicates:
            keywords = parse_keywords(args.keywords) if args.keywords.split() else ()
            engine = SelectedQuery(schema, keywords, args.tmax, args.window_seconds, predicates, args.engine, guard)
        else:
            engine = KeywordEngine(schema, args.keywords, args.tmax, args.window_seconds, args.engine, guard=guard)
    except (SchemaError, KeywordError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.static_prefix < 0 or (args.static_prefix and args.engine != "static-dynamic"):
        print("error: --static-prefix N (N >= 0) goes with --engine static-dynamic", file=sys.stderr)
        return 2
    if args.static_prefix and predicates:
        print("error: --static-prefix does not go with --predicate", file=sys.stderr)
        return 2
    ops_in = sys.stdin if args.ops == "-" else open(args.ops, encoding="utf-8")
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    rejects = sys.stderr if args.rejects is None else open(args.rejects, "w", encoding="utf-8")
    try:
        numbered = numbered_ops(ops_in)
        if args.static_prefix:
            assert isinstance(engine, KeywordEngine)
            prefix: list[tuple[int, Op]] = []
            last = -1
            for seq, lineno, line in itertools.islice(numbered, args.static_prefix):
                last = seq
                try:
                    prefix.append((lineno, parse_op(line, schema)))
                except OpRejected as exc:
                    rejects.write(f"line {lineno}: {exc}\n")
            engine.load([op for _, op in prefix],
                        on_reject=lambda i, _op, reason: rejects.write(f"line {prefix[i][0]}: {reason}\n"))
            for result in engine.snapshot():
                out.write(event_line(last, "add", result) + "\n")
        for seq, lineno, line in numbered:
            try:
                changes = engine.apply(parse_op(line, schema))
            except OpRejected as exc:
                rejects.write(f"line {lineno}: {exc}\n")
                changes = exc.changes
            for change in changes:
                out.write(event_line(seq, change.type, change.result) + "\n")
    finally:
        for fh in (ops_in, out, rejects):
            if fh not in (sys.stdin, sys.stdout, sys.stderr):
                fh.close()
    return 0
