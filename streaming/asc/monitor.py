"""The driver-side monitor: tuple dropping ratio per period and adaptive rearrangement (Sect. 5.2).

Executors report each batch with :meth:`BatchEvaluator.batch_stats` (JSON);
:meth:`DroppingMonitor.observe` adds it to the current period and, once the
period holds at least ``period`` (λ) tuples, closes it: d_cur is the share of
the period's tuples that satisfied no query, and the sequence is rearranged
from the period's sample when

    Δd = |d_cur − d_init| / d_init ≥ μ                                  (Eq. 5)

where d_init is the dropping ratio measured when the current sequence was
chosen. Ratios are exact fractions, so the rule holds at its boundary too. The first sequence (chosen without data) has no d_init, so the first
period always rearranges; d_init = 0 gives Δd = 0 if d_cur = 0, else ∞.
Every closed period and every rearrangement is appended to ``events`` as a
JSON object for the dashboard; a long-running driver takes them with
:meth:`DroppingMonitor.drain_events`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Mapping

import numpy as np

from .construct import AscIndex
from .sequence_search import hybrid_sequence, macro_order, macro_sequence
from .sequences import Sequence
from .vectorised import BatchEvaluator

__all__ = ["DroppingMonitor", "rearrangement_delta"]


def rearrangement_delta(d_init: Fraction | None, d_cur: Fraction) -> Fraction | float:
    """Δd of Eq. 5, exact (∞ when there is no usable d_init)."""
    if d_init is None:
        return math.inf
    if d_init == 0:
        return Fraction(0) if d_cur == 0 else math.inf
    return abs(d_cur - d_init) / d_init


class DroppingMonitor:
    """Chooses and adapts a macro or hybrid sequence for one relation's ASCs.

    ``sample_rate`` is what executors should sample with so that a period
    holds about ``sample_size`` sampled tuples.
    """

    def __init__(self, index: AscIndex, kind: str = "macro", period: int = 10_000, mu: float = 0.0,
                 sample_size: int = 1000, relation: str | None = None):
        if kind not in ("macro", "hybrid"):
            raise ValueError(f"monitor kind must be macro or hybrid, not {kind!r}")
        if period < 1 or mu < 0 or sample_size < 0:
            raise ValueError("period must be >= 1, mu and sample_size >= 0")
        self.index = index
        self.kind = kind
        self.period = period
        self.mu = mu
        self.relation = relation if relation is not None else index.relation
        self.sample_rate = min(1.0, sample_size / period)
        self._ev = BatchEvaluator(index)
        self.sequence = Sequence(kind, macro_order(self._ev, np.zeros((0, self._ev.n), dtype=np.int64)))
        self.d_init: Fraction | None = None
        self.events: list[dict[str, Any]] = []
        self.rearrangements = 0
        self.tuples = 0
        self.monitor_evaluated = 0
        self._periods = 0
        self._reset()

    def _reset(self) -> None:
        self._p_tuples = 0
        self._p_dropped = 0
        self._p_evaluated = 0
        self._p_sample: list[list[int]] = []

    def observe(self, stats: Mapping[str, Any]) -> Sequence | None:
        """Add one batch's statistics; return the new sequence if this closed a period and rearranged."""
        self._p_tuples += int(stats["tuples"])
        self._p_dropped += int(stats["dropped"])
        self._p_evaluated += int(stats["evaluated"])
        self._p_sample.extend(stats.get("sample", ()))
        self.monitor_evaluated += int(stats.get("monitor_evaluated", 0))
        self.tuples += int(stats["tuples"])
        if self._p_tuples < self.period:
            return None
        return self._close_period()

    def drain_events(self) -> list[dict[str, Any]]:
        """Return the events so far and forget them."""
        out, self.events = self.events, []
        return out

    def _close_period(self) -> Sequence | None:
        d_cur = Fraction(self._p_dropped, self._p_tuples)
        delta = rearrangement_delta(self.d_init, d_cur)
        self.events.append({"type": "period", "relation": self.relation, "period": self._periods,
                            "end": self.tuples, "tuples": self._p_tuples, "dropped": self._p_dropped,
                            "d": float(d_cur), "evaluated": self._p_evaluated})
        self._periods += 1
        sample = np.asarray(self._p_sample, dtype=np.int64).reshape(len(self._p_sample), self._ev.n)
        self._reset()
        if delta < Fraction(self.mu):
            return None
        new = macro_sequence(self._ev, sample) if self.kind == "macro" else hybrid_sequence(self._ev, sample)
        self.events.append({"type": "rearrangement", "relation": self.relation, "period": self._periods - 1,
                            "tuple": self.tuples, "old": self.sequence.names(self.index),
                            "new": new.names(self.index), "micro_arrows": len(new.micro),
                            "d_init": None if self.d_init is None else float(self.d_init),
                            "d_cur": float(d_cur), "delta": None if math.isinf(delta) else float(delta),
                            "mu": self.mu})
        self.sequence = new
        self.d_init = d_cur
        self.rearrangements += 1
        return new
