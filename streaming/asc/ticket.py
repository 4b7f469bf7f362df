"""Baseline: Eddies ticket routing (Avnur & Hellerstein 2000) over the same ASCs.

Each ASC is a selection module shared by all queries. For every tuple the
eddy picks the next module by lottery among the unevaluated ones that can
still fail a live query, weighted by tickets: a module gains a ticket when it
receives a tuple and gives it back when it returns the tuple (so modules that
drop tuples accumulate tickets). Cost is the number of modules visited.
"""

from __future__ import annotations

import random
from typing import Any, Sequence as Seq

from .construct import AscIndex

__all__ = ["TicketRouter"]


class TicketRouter:
    """Routes canonical tuples (``AscIndex.canonical``) one at a time."""

    def __init__(self, index: AscIndex, seed: int = 0):
        self.index = index
        self.tickets = [1] * len(index.ascs)
        self._rng = random.Random(seed)

    def evaluate(self, values: Seq[Any]) -> tuple[int, int]:
        """Return ``(query bitmap, number of modules visited)`` and update the tickets."""
        ascs, tickets = self.index.ascs, self.tickets
        grb = self.index.all_queries
        pending = list(range(len(ascs)))
        evaluated = 0
        while grb:
            eligible = [i for i in pending if ascs[i].qub & grb]
            if not eligible:
                break
            x = self._rng.random() * sum(tickets[i] for i in eligible)
            for i in eligible:
                x -= tickets[i]
                if x < 0:
                    break
            pending.remove(i)
            a = ascs[i]
            grb &= a.qrb[a.region(values[i])]
            evaluated += 1
            tickets[i] += 1
            if grb:
                tickets[i] -= 1
        return grb, evaluated
