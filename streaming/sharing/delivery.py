"""Each member query's exact results from its class's results (SELECTJOINRESULT, paper 002 Sect. 5.3.2).

A class evaluates the merged (widest) properties of its members; a result of
the class reaches member ``q`` iff it has at most ``tmax(q)`` tuples, every
tuple satisfies ``q``'s predicates (the tuple's ``qmask`` has ``q``'s bit),
and every tuple was inserted inside ``q``'s window. The last test is the
paper's window selection on join results: a result leaves a narrow-window
member when its oldest tuple passes that member's window, at the same op
where a single-query engine with that window would expire it, while the class
(wider) keeps it. Whether a tree is an MTJNT depends only on its own tuples,
so these filters give each member exactly its own results (docs/results.md).

Queries are bits of one integer mask (their position in the plan), so a
result is tested against all members at once with a few big-integer ANDs,
and handed on once with the mask of the members it reaches (the engine names
them; a consumer that keeps one change for all of them never pays per query).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ..evaluate.results import Result
from ..window import LiveStore
from .properties import QueryProperties

__all__ = ["Sink", "Delivery"]

#: ``sink(receivers, "add" | "remove", result)``: ``receivers`` is the mask of the member bits it reaches
Sink = Callable[[int, str, Result], None]


class Delivery:
    """The member filter of one class, with who holds which result.

    ``members`` maps each member's bit index to its properties; ``window``
    and ``tmax`` are the class's. ``schedule(due, window, result)`` asks the
    engine to call :meth:`expire_window` at event time ``due`` (with that ``due``).
    """

    def __init__(self, members: Mapping[int, QueryProperties], window: float | None, tmax: int,
                 store: LiveStore, sink: Sink, schedule: Callable[[float, float, Result], None]):
        self.store = store
        self.sink = sink
        self.schedule = schedule
        self.member_mask = 0
        for bit in members:
            self.member_mask |= 1 << bit
        # members whose Tmax is below the class's: size -> members that take results of that size
        self.tmax_ok: list[int] | None = None
        if any(q.tmax < tmax for q in members.values()) and any(q.output == "results" for q in members.values()):
            self.tmax_ok = [sum(1 << b for b, q in members.items() if q.tmax >= size) for size in range(tmax + 1)]
        # members whose window is narrower than the class's, by window
        self.narrow: dict[float, int] = {}
        for bit, q in members.items():
            if q.window is not None and (window is None or q.window < window):
                self.narrow[q.window] = self.narrow.get(q.window, 0) | 1 << bit
        self.receivers: dict[Result, int] = {}
        self.produced = 0
        self.undelivered = 0

    def receivers_of(self, result: Result, now: float) -> int:
        """The members ``result`` belongs to at event time ``now``."""
        rows = self.store.rows
        mask = self.member_mask
        for relation, key in result.tuples:
            row = rows[relation][key]
            mask &= row.qmask
        if self.tmax_ok is not None:
            mask &= self.tmax_ok[len(result.tuples)]
        if self.narrow and mask:
            oldest = self._oldest(result)
            for window, bits in self.narrow.items():
                if bits & mask and oldest + window <= now:
                    mask &= ~bits
        return mask

    def _oldest(self, result: Result) -> float:
        rows = self.store.rows
        oldest = float("inf")
        for relation, key in result.tuples:
            row = rows[relation][key]
            ts = row.ts
            if ts < oldest:
                oldest = ts
        return oldest

    def add(self, result: Result, now: float) -> None:
        """A class result appeared: give it to the members it belongs to."""
        mask = self.receivers_of(result, now)
        self.receivers[result] = mask
        self.produced += 1
        if not mask:
            self.undelivered += 1
            return
        self.sink(mask, "add", result)
        if self.narrow:
            self._schedule(result, mask)

    def _schedule(self, result: Result, mask: int) -> None:
        oldest = self._oldest(result)
        for window, bits in self.narrow.items():
            if bits & mask:
                self.schedule(oldest + window, window, result)

    def remove(self, result: Result) -> None:
        """A class result ended: its holders see it end."""
        mask = self.receivers.pop(result, 0)
        if mask:
            self.sink(mask, "remove", result)

    def expire_window(self, window: float, result: Result, due: float) -> None:
        """The oldest tuple of ``result`` left ``window`` at ``due``: its members with that window lose it.

        A timer of an earlier life of the result (the same tuples, one deleted and inserted again since)
        finds the result younger than it was told: that life's own timer removes it when its time comes.
        """
        mask = self.receivers.get(result)
        if not mask or self._oldest(result) + window > due:
            return
        gone = mask & self.narrow.get(window, 0)
        if gone:
            self.receivers[result] = mask & ~gone
            self.sink(gone, "remove", result)

    def reset(self, results: Sequence[Result], now: float) -> None:
        """Recompute every holder from the class's live results (after a rebuild or a membership change)."""
        self.receivers = {}
        for result in results:
            mask = self.receivers_of(result, now)
            self.receivers[result] = mask
            if mask and self.narrow:
                self._schedule(result, mask)

    def results_of(self, bit: int) -> list[Result]:
        """The live results of the member with bit index ``bit``."""
        b = 1 << bit
        return sorted((r for r, m in self.receivers.items() if m & b), key=lambda r: (r.tuples, r.edges))

    def stats(self) -> dict[str, Any]:
        return {"class_results": len(self.receivers), "produced": self.produced, "undelivered": self.undelivered,
                "narrow_windows": sorted(self.narrow)}
