"""A stored line once parsed: what the executors hand the driver, and what the driver and recovery apply.

Executor code (``streaming.spark.parse``, the pre-processor) imports this
module, never the driver's (``streaming.evaluator``), so a Spark task does not
load the evaluator with its Redis and engine dependencies (``.importlinter``).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from .keywords import tuple_tokens
from .ops import Op, OpRejected, op_to_dict, parse_item_op, parse_op
from .schema import Schema
from .stored_lines import SourceError, split_seq, stamp

__all__ = ["ParsedOp", "parse_stored_line"]


@dataclass(frozen=True, slots=True)
class ParsedOp:
    """One stored line after parsing: an op, or the reason it was rejected.

    ``hits`` are the group's keywords the inserted tuple contains (keyword
    classification, done where the line was parsed); ``queries`` the
    global-result bitmap of the selection constructs (bit ``i``: the query of
    the plan's bit ``i`` admits the tuple), when the executors evaluated them
    (None: not evaluated, the driver does it). ``line`` is None for an op
    read from a derived record (``streaming.preprocess``): its line is made
    from the op only if it becomes a dead letter (:meth:`text`).
    """

    seq: int | None
    line: str | None
    op: Op | None
    reason: str | None = None
    hits: tuple[str, ...] = ()
    queries: int | None = None
    reported: bool = False  # a reject already published as a dead letter (by the stream's pre-processor)

    def text(self) -> str:
        """The stored line, as a dead letter shows it."""
        if self.line is not None:
            return self.line
        assert self.op is not None and self.seq is not None
        return stamp(self.seq, orjson.dumps(op_to_dict(self.op)).decode())


def parse_stored_line(line: str, schema: Schema, keywords: frozenset[str]) -> ParsedOp:
    """Parse and validate one stored line and classify its tuple against ``keywords``."""
    try:
        seq, obj = split_seq(line)
    except SourceError as exc:
        return ParsedOp(None, line, None, str(exc))
    try:
        op = parse_item_op(obj) if obj.get("op") == "item" else parse_op(obj, schema)
    except OpRejected as exc:
        return ParsedOp(seq, line, None, str(exc))
    hits: tuple[str, ...] = ()
    if op.kind == "insert" and keywords:
        hits = tuple(sorted(keywords.intersection(tuple_tokens(schema.relations[op.relation], op.values))))
    return ParsedOp(seq, line, op, None, hits)
