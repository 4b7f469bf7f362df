"""One relational stream evaluated tuple by tuple with a named strategy (the ``asc`` CLI's engine).

Strategies: ``macro`` and ``hybrid`` (adaptive, with a :class:`DroppingMonitor`
fed every λ tuples), ``ticket`` (Eddies ticket routing) and
``fixed:A3,A1,...`` (a fixed macro order naming every p-attribute).
"""

from __future__ import annotations

import random
from typing import Any, Mapping

from .construct import AscIndex
from .evaluate import ScalarEvaluator
from .monitor import DroppingMonitor
from .predicates import PredicateError
from .sequences import Sequence
from .ticket import TicketRouter

__all__ = ["AscStream"]


class AscStream:
    """Evaluates a stream of tuples, counting ASC evaluations and drops."""

    def __init__(self, index: AscIndex, strategy: str, period: int = 10_000, mu: float = 0.0,
                 sample_size: int = 1000, seed: int = 0):
        self.index = index
        self.strategy = strategy
        self.monitor: DroppingMonitor | None = None
        self.router: TicketRouter | None = None
        self.sequence: Sequence | None = None
        if strategy in ("macro", "hybrid"):
            self.monitor = DroppingMonitor(index, strategy, period, mu, sample_size)
            self.sequence = self.monitor.sequence
        elif strategy == "ticket":
            self.router = TicketRouter(index, seed)
        elif strategy.startswith("fixed:"):
            self.sequence = Sequence.fixed(index, [a for a in strategy[6:].split(",") if a])
        else:
            raise PredicateError(f"strategy {strategy!r}: expected macro, hybrid, ticket or fixed:A,B,...")
        self._scalar = ScalarEvaluator(index)
        self._rng = random.Random(seed)
        self.cost = 0
        self.dropped = 0
        self.tuples = 0
        self.monitor_evaluated = 0
        self._stats = self._fresh_stats()

    @staticmethod
    def _fresh_stats() -> dict[str, Any]:
        return {"tuples": 0, "dropped": 0, "evaluated": 0, "sample": [], "monitor_evaluated": 0}

    def process(self, values: Mapping[str, Any]) -> tuple[int, int]:
        """Evaluate one tuple; return ``(query bitmap, ASCs evaluated)``.

        Raises ``ValueRejected`` (nothing counted) when a value has the wrong type.
        """
        canon = self.index.canonical(values)
        if self.router is not None:
            grb, evaluated = self.router.evaluate(canon)
        else:
            assert self.sequence is not None
            grb, evaluated = self._scalar.evaluate(self.sequence, canon)
        self.tuples += 1
        self.cost += evaluated
        self.dropped += not grb
        if self.monitor is not None:
            self._observe(canon, grb, evaluated)
        return grb, evaluated

    def _observe(self, canon: list[Any], grb: int, evaluated: int) -> None:
        assert self.monitor is not None
        s = self._stats
        s["tuples"] += 1
        s["dropped"] += not grb
        s["evaluated"] += evaluated
        if self._rng.random() < self.monitor.sample_rate:
            s["sample"].append([a.region(v) for a, v in zip(self.index.ascs, canon)])
            s["monitor_evaluated"] += len(canon)
            self.monitor_evaluated += len(canon)
        if s["tuples"] >= self.monitor.period:
            new = self.monitor.observe(s)
            if new is not None:
                self.sequence = new
            self._stats = self._fresh_stats()

    def drain_events(self) -> list[dict[str, Any]]:
        """New period and rearrangement events of the monitor (none for baselines)."""
        return self.monitor.drain_events() if self.monitor is not None else []

    def summary(self) -> dict[str, Any]:
        """Totals: cost (ASCs evaluated), dropped, tuples, rearrangements, monitor overhead."""
        m = self.monitor
        return {"cost": self.cost, "dropped": self.dropped, "tuples": self.tuples,
                "rearrangements": m.rearrangements if m else 0,
                "monitor_evaluated": self.monitor_evaluated}
