"""How the monitor finds evaluation sequences of ASCs (Sects. 4.2, 4.3).

A :class:`~.sequences.Sequence` (its macro order and, for a hybrid
sequence, its micro-arrows) is found from a
*sample*: an ``(T, n)`` array of the regions of T recent tuples in every ASC,
collected by the executors (:meth:`BatchEvaluator.batch_stats`).

* :func:`macro_order` — the two phases of Sect. 4.2.2. While the prefix does
  not cover every query (the minimal-cover-set phase), append the ASC of
  lowest conditional selectivity s(ρ→A | ρ) (Def. 3, Eqs. 1-2); then append
  the ASC giving the highest tuple dropping ratio d(ρ→A) (Def. 4), ties to the
  lowest single-ASC selectivity. The paper spends one period τ per position;
  here every position is decided on the same sample, which is the same
  measurement done at once.
* :func:`hybrid_sequence` — micro-arrows (Sect. 4.3). ASCs are visited in
  macro order; for each region of ASC i reached by sampled tuples under the
  arrows fixed so far, every candidate j (``cab`` bit set, not yet evaluated,
  able to fail a live query) is measured by the ASC evaluations the tuples of
  that region then need to finish (j next, then the current sequence). That
  one number plays the role of both the conditional selectivity and the
  dropping ratio the paper compares, and it is on the scale of the cost. An
  arrow is kept only when it beats the macro-arrow by ``min_gain`` on at
  least ``min_support`` sampled tuples, so sparse regions keep the macro
  order.
"""

from __future__ import annotations

import numpy as np

from .sequences import Sequence
from .vectorised import BatchEvaluator, popcount

__all__ = ["macro_order", "macro_sequence", "hybrid_sequence", "sequence_cost"]


def _sample_qrb(ev: BatchEvaluator, sample: np.ndarray) -> np.ndarray:
    """``(T, n, W)`` query-result bitmaps of the sampled tuples in every ASC."""
    out = np.empty((len(sample), ev.n, ev.words), dtype=np.uint64)
    for i in range(ev.n):
        out[:, i, :] = ev.qrb[i][sample[:, i]]
    return out


def macro_order(ev: BatchEvaluator, sample: np.ndarray) -> tuple[int, ...]:
    """The macro order of Sect. 4.2.2 measured on ``sample`` (see the module doc).

    With an empty sample every selectivity ties and the order is by the number
    of newly covered queries, then position.
    """
    sample = np.asarray(sample, dtype=np.int64).reshape(len(sample), ev.n)
    q = _sample_qrb(ev, sample)
    t = len(sample)
    coverable = np.bitwise_or.reduce(ev.qub, axis=0) if ev.n else ev.all
    covered = np.zeros(ev.words, dtype=np.uint64)
    grb = np.tile(ev.all, (t, 1))
    remaining = list(range(ev.n))
    order: list[int] = []
    single: dict[int, float] = {}
    while remaining and (covered != coverable).any():
        uncovered = coverable & ~covered
        width = int(popcount(uncovered))
        keys = []
        for v in remaining:
            eta = int(popcount(grb & q[:, v, :] & uncovered).sum())
            s = eta / (width * t) if t else 1.0
            keys.append((s, -int(popcount(ev.qub[v] & uncovered)), v))
        if not order:
            single = {k[2]: k[0] for k in keys}
        v = min(keys)[2]
        order.append(v)
        remaining.remove(v)
        grb &= q[:, v, :]
        covered |= ev.qub[v]
    while remaining:
        keys = []
        for v in remaining:
            dropped = int((~(grb & q[:, v, :]).any(axis=1)).sum())
            keys.append((-(dropped / t if t else 0.0), single.get(v, 1.0), v))
        v = min(keys)[2]
        order.append(v)
        remaining.remove(v)
        grb &= q[:, v, :]
    return tuple(order)


def macro_sequence(ev: BatchEvaluator, sample: np.ndarray) -> Sequence:
    """A macro-sequence (no micro-arrows) from ``sample``."""
    return Sequence("macro", macro_order(ev, sample))


def hybrid_sequence(ev: BatchEvaluator, sample: np.ndarray, order: tuple[int, ...] | None = None,
                    min_support: int = 10, min_gain: float = 0.02) -> Sequence:
    """A hybrid-sequence: ``order`` (default: :func:`macro_order`) plus micro-arrows."""
    sample = np.asarray(sample, dtype=np.int64).reshape(len(sample), ev.n)
    if order is None:
        order = macro_order(ev, sample)
    micro: dict[tuple[int, int], int] = {}
    t = len(sample)

    def region_fn(i: int, rows: np.ndarray) -> np.ndarray:
        return sample[rows, i]

    for i in order:
        current = Sequence("hybrid", order, dict(micro))
        grb, geb, cur, evaluated = ev.initial_state(t, current)
        ev.advance(grb, geb, cur, evaluated, region_fn, current, stop_at=i)
        rows = np.flatnonzero(cur == i)
        if rows.size < min_support:
            continue
        region = sample[rows, i]
        grb_i = grb[rows] & ev.qrb[i][region]
        geb_i = geb[rows]
        geb_i[:, i] = True
        alive = grb_i.any(axis=1)
        rows, region, grb_i, geb_i = rows[alive], region[alive], grb_i[alive], geb_i[alive]
        if not rows.size:
            continue
        elig = ev.eligible(grb_i) & ~geb_i
        # One rollout row per (arrival, eligible first ASC), plus one per arrival
        # for the macro-arrow (choice n); each then follows the current sequence.
        by_order = elig[:, np.asarray(order)]
        default = np.where(by_order.any(axis=1), np.asarray(order)[by_order.argmax(axis=1)], -1)
        arrival, candidate = np.nonzero(elig)
        a_idx = np.concatenate([arrival, np.arange(rows.size)])
        choice = np.concatenate([candidate, np.full(rows.size, ev.n)])
        r_cur = np.concatenate([candidate, default])
        r_grb, r_geb = grb_i[a_idx].copy(), geb_i[a_idx].copy()
        r_eval = np.zeros(len(a_idx), dtype=np.int64)
        ev.advance(r_grb, r_geb, r_cur, r_eval, lambda j, rr: region_fn(j, rows[a_idx[rr]]), current)
        # cost[a, choice]: default cost where the choice is not eligible for arrival a.
        base = np.zeros(rows.size, dtype=np.int64)
        is_default = choice == ev.n
        base[a_idx[is_default]] = r_eval[is_default]
        delta = np.zeros((rows.size, ev.n), dtype=np.int64)
        delta[a_idx[~is_default], choice[~is_default]] = r_eval[~is_default] - base[a_idx[~is_default]]
        for r in np.unique(region).tolist():
            members = region == r
            support = int(members.sum())
            if support < min_support:
                continue
            total = int(base[members].sum())
            gains = -delta[members].sum(axis=0)
            j = int(gains.argmax())
            if gains[j] > max(0.0, min_gain * total):
                micro[(i, int(r))] = j
    return Sequence("hybrid", tuple(order), micro)


def sequence_cost(ev: BatchEvaluator, sample: np.ndarray, sequence: Sequence) -> int:
    """Total ASC evaluations of ``sequence`` over the sampled tuples."""
    sample = np.asarray(sample, dtype=np.int64).reshape(len(sample), ev.n)
    _, evaluated = ev.run(len(sample), lambda i, rows: sample[rows, i], sequence)
    return int(evaluated.sum())
