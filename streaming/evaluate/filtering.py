"""Pure filter subscriptions: a saved query with selection predicates and no keywords.

Issue 4, item 1: such a query's results are the live tuples that satisfy its
predicates, one tuple per result and no edges, of the relations it has
predicates on. The predicates themselves are evaluated before the engine (by
the group evaluator or the executors' selection constructs), like those of a
keyword query: only admitted tuples reach it. :class:`FilterEngine` keeps the
op path of :class:`~streaming.engine.StreamEngine` (stream rules, window
expiry, load, inspection), so a filter subscription rejects and expires
exactly as a keyword query over the same ops does.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..clock import ClockGuard
from ..engine import StreamEngine
from ..schema import Schema
from ..window import LiveTuple
from .results import Result, TupleRef

__all__ = ["FilterEvaluator", "FilterEngine"]


class FilterEvaluator:
    """Each live tuple of the filtered relations is a result on its own."""

    def __init__(self, relations: Iterable[str]):
        self.relations = frozenset(relations)
        self.results: dict[TupleRef, Result] = {}

    def insert(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        if relation not in self.relations:
            return []
        ref = (relation, key)
        result = Result((ref,), ())
        self.results[ref] = result
        return [result]

    def delete(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        result = self.results.pop((relation, key), None)
        return [] if result is None else [result]

    def snapshot(self) -> list[Result]:
        return sorted(self.results.values(), key=lambda r: r.tuples)

    def stats(self) -> dict[str, Any]:
        return {"live_results": len(self.results)}


class FilterEngine(StreamEngine):
    """Live matching tuples of a filter subscription over one op stream.

    ``relations`` are those the query has predicates on: their admitted
    tuples are its results. Ops on other relations are checked and stored
    like any op (so the stream rules are the same as a keyword engine's) but
    produce no result; the group evaluator does not send them.
    """

    engine = "filter"

    def __init__(self, schema: Schema, relations: Iterable[str], window_seconds: float | None = None,
                 guard: ClockGuard | None = None):
        names = sorted(set(relations))
        if not names:
            raise ValueError("a query without keywords needs predicates on at least one relation")
        unknown = [name for name in names if name not in schema.relations]
        if unknown:
            raise ValueError(f"unknown relation {unknown[0]!r} in schema {schema.name!r}")
        super().__init__(schema, window_seconds, guard)
        self.relations = tuple(names)
        self.evaluator = FilterEvaluator(names)

    def stats(self) -> dict[str, Any]:
        """The shared sizes plus the relations whose tuples are results."""
        return {"engine": self.engine, "keywords": [], "relations": list(self.relations), **super().stats()}
