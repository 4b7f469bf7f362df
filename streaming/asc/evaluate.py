"""Scalar GRB evaluation of one tuple along a macro, hybrid or fixed sequence (Sects. 3.2, 5.1).

The global-result bitmap (GRB) starts with every query bit set; each
evaluated ASC ANDs in the query-result bitmap of the region holding the
tuple's value, and the tuple is dropped as soon as the GRB is 0. The global
evaluation bitmap (GEB) records evaluated ASCs. After ASC i, the next ASC is
the micro-arrow of the visited region when it has one that is still
unevaluated, else the first unevaluated ASC of the macro order.

An ASC whose query-usage bitmap shares no bit with the GRB cannot change it,
so it is never evaluated (the candidate-arrow test of Sect. 4.1 applied to
the whole GRB); every strategy, baselines included, follows this rule, and
``evaluated`` counts exactly the ASCs whose bitmaps were ANDed in.
"""

from __future__ import annotations

from typing import Any, Sequence as Seq

from .construct import AscIndex
from .sequences import Sequence

__all__ = ["ScalarEvaluator"]


class ScalarEvaluator:
    """Evaluates canonical tuples (``AscIndex.canonical``) one at a time."""

    def __init__(self, index: AscIndex):
        self.index = index
        self._ascs = index.ascs
        self._qubs = [a.qub for a in index.ascs]

    def evaluate(self, sequence: Sequence, values: Seq[Any]) -> tuple[int, int]:
        """Return ``(query bitmap, number of ASCs evaluated)`` for one tuple."""
        grb = self.index.all_queries
        qubs, ascs, order, micro = self._qubs, self._ascs, sequence.order, sequence.micro
        cur = self._first(order, 0, grb)
        geb = 0
        evaluated = 0
        while cur >= 0:
            a = ascs[cur]
            r = a.region(values[cur])
            grb &= a.qrb[r]
            geb |= 1 << cur
            evaluated += 1
            if not grb:
                break
            nxt = micro.get((cur, r), -1)
            if nxt < 0 or geb >> nxt & 1 or not qubs[nxt] & grb:
                nxt = self._first(order, geb, grb)
            cur = nxt
        return grb, evaluated

    def _first(self, order: Seq[int], geb: int, grb: int) -> int:
        """First ASC of ``order`` not in ``geb`` that can still change ``grb`` (or -1)."""
        qubs = self._qubs
        for i in order:
            if not geb >> i & 1 and qubs[i] & grb:
                return i
        return -1
