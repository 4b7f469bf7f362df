"""The shared engine's event-time work: one heap of timers, fired as the stream clock passes them.

Three kinds of work wait on it, so an op costs nothing per class or
aggregate unless something is due: a tuple leaving a filter class's window
narrower than the store's retention (``expire``), a result leaving a member
window narrower than its class's (``window``), and an aggregate class's next
time window closing (``aggregate``). A timer whose class was dropped or
replaced since (``alive``, ``generation``), or whose tuple was replaced, is
ignored when it comes due.
"""

from __future__ import annotations

import heapq
import itertools

from ..window import LiveStore
from .aggregates import AggregateClass

__all__ = ["EventTimers"]


class EventTimers:
    """The timers of one stream, earliest first (ties in the order they were set).

    ``heap`` is a :mod:`heapq` of ``(due, tick, payload)``: the engine reads
    its first entry on every op to see whether :meth:`fire` has work.
    """

    def __init__(self, store: LiveStore):
        self.store = store
        self.heap: list[tuple[float, int, tuple]] = []
        self._tick = itertools.count()

    def schedule(self, due: float, payload: tuple) -> None:
        """Run ``payload`` (``("expire", class, relation, key, serial)`` or ``("window", class, generation,
        window, result)``) once the clock reaches ``due``."""
        heapq.heappush(self.heap, (due, next(self._tick), payload))

    def arm(self, agg: AggregateClass, due: float | None) -> None:
        """Wake ``agg`` when its next time window closes (one pending wake-up at a time)."""
        if due is not None and due != agg.pending:
            agg.pending = due
            self.schedule(due, ("aggregate", agg, due))

    def fire(self, now: float) -> None:
        """Run every timer due by ``now``, earliest first."""
        timers, rows = self.heap, self.store.rows
        while timers and timers[0][0] <= now:
            due, _, payload = heapq.heappop(timers)
            kind = payload[0]
            if kind == "expire":
                _, cls, relation, key, serial = payload
                row = rows[relation].get(key)
                if cls.alive and row is not None and row.serial == serial:
                    cls.expire(relation, key, row)
            elif kind == "window":
                _, cls, generation, window, result = payload
                if cls.alive and cls.generation == generation:
                    cls.delivery.expire_window(window, result, due)
            else:
                _, agg, due = payload
                if agg.alive and agg.pending == due:
                    agg.pending = None
                    self.arm(agg, agg.close(now))
