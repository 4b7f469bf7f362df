"""Which queries admit a tuple: every query's predicates at once, as a bitmask over the plan's queries.

Each query of a plan owns one bit (:class:`~streaming.sharing.engine.SharedEngine`
keeps it while the query stays). For a tuple of relation ``R`` the *query
mask* has the bit of every query that takes ``R`` (a keyword query takes
every relation, a filter subscription those it has predicates on) and whose
predicates on ``R`` it satisfies. The predicates of all queries are the
attribute selection constructs of :class:`~streaming.asc_selection.GroupSelection`
(shared, adaptively ordered, with its dropping monitors): the executors
evaluate them in bulk and send the global-result bitmap, or
:meth:`Admission.qmask` evaluates one tuple here along the monitor's current
sequence and feeds the monitor the same statistics.
"""

from __future__ import annotations

import random
from typing import Any, Mapping

from ..asc import ScalarEvaluator
from ..schema import Schema
from ..asc_selection import GroupSelection
from .properties import QueryProperties

__all__ = ["Admission"]

_OBSERVE_EVERY = 1_000


class Admission:
    """Query masks for one plan: ``queries`` maps bit index -> properties."""

    def __init__(self, schema: Schema, queries: Mapping[int, QueryProperties], kind: str = "hybrid",
                 period: int = 10_000, mu: float = 0.1, seed: int = 0):
        self.takes: dict[str, int] = {r: 0 for r in schema.relations}
        for bit, q in queries.items():
            for relation in q.relations:
                self.takes[relation] |= 1 << bit
        width = max(queries, default=-1) + 1
        predicates = {bit: [p.to_json() for p in queries[bit].predicates] if bit in queries else []
                      for bit in range(width)}
        self.selection = (GroupSelection(schema, predicates, kind, period, mu)
                          if any(predicates.values()) else None)
        monitors = self.selection.monitors if self.selection is not None else {}
        self._scalar = {r: ScalarEvaluator(m.index) for r, m in monitors.items()}
        self._pending: dict[str, dict[str, Any]] = {r: _fresh() for r in monitors}
        self._rng = random.Random(seed)

    def covers(self, relation: str) -> bool:
        """Whether some query has predicates on ``relation`` (else its mask is :attr:`takes`)."""
        return relation in self._scalar

    def qmask(self, relation: str, values: Mapping[str, Any], observe: bool = True) -> int:
        """The query mask of one tuple, evaluated here (a few ASCs, adaptively ordered).

        ``observe`` feeds the evaluation to the dropping monitor (not for
        re-evaluating stored tuples after a plan change).
        """
        takes = self.takes.get(relation, 0)
        scalar = self._scalar.get(relation)
        if scalar is None or not takes:
            return takes
        assert self.selection is not None
        monitor = self.selection.monitors[relation]
        canon = monitor.index.canonical(values)
        grb, evaluated = scalar.evaluate(monitor.sequence, canon)
        if not observe:
            return grb & takes
        stats = self._pending[relation]
        stats["tuples"] += 1
        stats["dropped"] += not grb
        stats["evaluated"] += evaluated
        if self._rng.random() < monitor.sample_rate:
            stats["sample"].append([a.region(v) for a, v in zip(monitor.index.ascs, canon)])
            stats["monitor_evaluated"] += len(canon)
        if stats["tuples"] >= _OBSERVE_EVERY:
            self.selection.observe(relation, stats)
            self._pending[relation] = _fresh()
        return grb & takes

    def from_bitmap(self, relation: str, grb: int) -> int:
        """The query mask from the global-result bitmap the executors computed with this plan."""
        return grb & self.takes.get(relation, 0)

    def flush(self) -> None:
        """Feed the monitors what this side evaluated since the last call (end of a batch)."""
        if self.selection is None:
            return
        for relation, stats in self._pending.items():
            if stats["tuples"]:
                self.selection.observe(relation, stats)
                self._pending[relation] = _fresh()


def _fresh() -> dict[str, Any]:
    return {"tuples": 0, "dropped": 0, "evaluated": 0, "sample": [], "monitor_evaluated": 0}
