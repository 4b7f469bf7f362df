"""One saved query alone over an op stream, with its selection predicates (the single-query reference).

A predicate restricts which tuples of its relation may take part in the
query; results without that relation are still results. The stream's rules
(late ops, duplicate inserts, deletes of missing keys) are judged against
every tuple of the stream in the query's window, admitted or not. This is
what ``python -m streaming run --predicate ...`` evaluates, and what each
query costs on its own ("data shipping", ``run-plan --sharing none``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from .asc.predicates import Predicate, query_holds
from .clock import ClockGuard
from .engine import Change, KeywordEngine, Result, StreamEngine
from .evaluate.filtering import FilterEngine
from .ops import Op, OpRejected
from .schema import Schema

__all__ = ["SelectedQuery", "verdict_store"]


class _Verdicts:
    """The evaluator of a stream that only keeps tuples to judge ops by (no results)."""

    def insert(self, relation: str, key: Any, row: Any) -> list[Result]:
        return []

    def delete(self, relation: str, key: Any, row: Any) -> list[Result]:
        return []

    def snapshot(self) -> list[Result]:
        return []

    def stats(self) -> dict[str, Any]:
        return {}


def verdict_store(schema: Schema, window_seconds: float | None, guard: ClockGuard | None = None) -> StreamEngine:
    """A stream engine that keeps every tuple of its window only to judge ops by the stream rules."""
    engine = StreamEngine(schema, window_seconds, guard)
    engine.evaluator = _Verdicts()
    return engine


class SelectedQuery:
    """One query with selection predicates over an op stream, alone.

    The stream's rules are judged against every tuple of the stream in the
    query's window (a store of its own); the query's engine (keywords:
    :class:`KeywordEngine`, none: a filter subscription's
    :class:`~streaming.evaluate.filtering.FilterEngine`) takes only the tuples
    its predicates admit: a predicate restricts which tuples of its relation
    may take part, and results without that relation are still results.
    Event time still advances the engine's window on the ops it does not take.
    """

    def __init__(self, schema: Schema, keywords: Sequence[str], tmax: int, window_seconds: float | None,
                 predicates: Iterable[Predicate] = (), engine: str = "dynamic", guard: ClockGuard | None = None):
        self.predicates: dict[str, list[Predicate]] = {}
        for p in predicates:
            assert p.relation is not None, "a query's predicates name their relation"
            self.predicates.setdefault(p.relation, []).append(p)
        self.engine: StreamEngine
        if keywords:
            self.engine = KeywordEngine(schema, list(keywords), tmax, window_seconds, engine, guard=guard)
            self.relations: frozenset[str] | None = None
        else:
            self.engine = FilterEngine(schema, self.predicates, window_seconds, guard)
            self.relations = frozenset(self.predicates)
        # without predicates every tuple takes part: the engine's own store judges the ops
        self.stream: StreamEngine | None = None
        if self.predicates:
            self.stream = verdict_store(schema, window_seconds, guard)

    def admits(self, relation: str, values: Mapping[str, Any]) -> bool:
        """Whether a tuple of ``relation`` takes part in the query."""
        if self.relations is not None and relation not in self.relations:
            return False
        return query_holds(self.predicates.get(relation, ()), values)

    def apply(self, op: Op) -> list[Change]:
        """Judge the op by the stream rules, then evaluate it if it takes part; a rejected op raises
        :class:`OpRejected` with the expiries its time caused (docs/ops.md, "The stream clock")."""
        if self.stream is None:
            return self.engine.apply(op)
        try:
            self.stream.apply(op)
        except OpRejected as exc:
            clock = self.stream.last_ts
            if clock is None or clock == self.engine.last_ts:  # late or refused: no clock moved
                raise
            raise OpRejected(str(exc), self.engine.advance(clock)) from None
        if op.kind == "insert":
            assert op.values is not None
            if self.admits(op.relation, op.values):
                return self.engine.apply(op)
        elif op.key in self.engine.store.rows[op.relation]:
            return self.engine.apply(op)
        return self.engine.advance(op.ts)

    def snapshot(self) -> list[Result]:
        return self.engine.snapshot()

    @property
    def clock(self) -> float | None:
        """The stream clock as this query sees it (None before the first op that moved it)."""
        return self.engine.last_ts

    def stored_tuples(self) -> int:
        """Tuples this query keeps: its engine's, plus the verdict store's when it has predicates."""
        return len(self.engine.store) + (len(self.stream.store) if self.stream is not None else 0)
