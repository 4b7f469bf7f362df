"""Batch evaluation of the ASCs with numpy, for Spark executors and benchmarks (issue 4, item 4).

The API an evaluator uses on each micro-batch::

    ev = BatchEvaluator(AscIndex.from_json(index_doc))
    seq = Sequence.from_json(sequence_doc, ev.index)     # broadcast by the driver
    bitmaps, evaluated = ev.evaluate_batch(columns, seq)  # columns: {attr: array}
    stats = ev.batch_stats(columns, bitmaps, evaluated, sample_rate, seed)  # JSON
    # driver: new = monitor.observe(stats); broadcast new.to_json(index) if new

``bitmaps`` is an ``(N, W)`` uint64 array (bit j of word j // 64 = query j),
``evaluated`` the number of ASCs evaluated per row. Columns hold canonical
values: numbers (timestamps as epoch seconds) with NaN or ``None`` for null,
text as ``str`` arrays or object arrays with ``None``. Regions are found with
``searchsorted``; rows leave the working set as soon as their GRB is 0, and
every step follows the same rule as :class:`~streaming.asc.evaluate.ScalarEvaluator`,
so both give identical bitmaps and counts.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..schema import ValueRejected, coerce_value
from .construct import AscIndex
from .sequences import Sequence

__all__ = ["BatchEvaluator", "int_to_words", "words_to_int", "popcount"]

RegionFn = Callable[[int, np.ndarray], np.ndarray]


def int_to_words(bits: int, words: int) -> np.ndarray:
    """A Python-int bitset as ``words`` little-endian uint64 words."""
    return np.array([(bits >> (64 * w)) & 0xFFFFFFFFFFFFFFFF for w in range(words)], dtype=np.uint64)


def words_to_int(row: np.ndarray) -> int:
    """Inverse of :func:`int_to_words` for one row."""
    out = 0
    for w, x in enumerate(row.tolist()):
        out |= int(x) << (64 * w)
    return out


def popcount(words: np.ndarray) -> np.ndarray:
    """Number of set bits over the last axis."""
    return np.bitwise_count(words).sum(axis=-1, dtype=np.int64)


class BatchEvaluator:
    """Numpy tables of an :class:`AscIndex` and the batch evaluation over them."""

    def __init__(self, index: AscIndex):
        self.index = index
        self.n = len(index.ascs)
        self.words = max(1, (len(index.query_ids) + 63) // 64)
        self.all = int_to_words(index.all_queries, self.words)
        self.qub = np.array([int_to_words(a.qub, self.words) for a in index.ascs], dtype=np.uint64).reshape(
            self.n, self.words)
        self.qrb = [np.array([int_to_words(b, self.words) for b in a.qrb], dtype=np.uint64) for a in index.ascs]
        self.max_regions = max((a.regions for a in index.ascs), default=1)
        self._constants = [np.array(a.constants, dtype=str if a.type == "text" else np.float64)
                           for a in index.ascs]

    # -- columns and regions -------------------------------------------------

    def canonical_columns(self, columns: Mapping[str, Any], size: int | None = None
                          ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each ASC's column as ``(values, null mask)``; a missing column is all null."""
        if size is None:
            size = len(next(iter(columns.values()))) if columns else 0
        out = []
        for a in self.index.ascs:
            col = columns.get(a.attribute)
            if col is None:
                out.append((np.zeros(size) if a.type != "text" else np.full(size, "", dtype=str),
                            np.ones(size, dtype=bool)))
                continue
            arr = np.asarray(col)
            if len(arr) != size:
                raise ValueRejected(f"column {a.attribute!r} has {len(arr)} rows, expected {size}")
            out.append(self._canonical(a.type, a.attribute, arr))
        return out

    @staticmethod
    def _canonical(typ: str, attr: str, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if typ == "text":
            if arr.dtype.kind == "U":
                return arr, np.zeros(len(arr), dtype=bool)
            if arr.dtype.kind != "O":
                raise ValueRejected(f"{attr}: expected text, got {arr.dtype}")
            null = np.array([v is None for v in arr], dtype=bool)
            for v in arr[~null]:
                if not isinstance(v, str):
                    raise ValueRejected(f"{attr}: expected text, got {v!r}")
            return np.where(null, "", arr).astype(str), null
        if arr.dtype.kind in "iuf":
            vals = arr.astype(np.float64)
            return vals, np.isnan(vals)
        if arr.dtype.kind != "O":
            raise ValueRejected(f"{attr}: expected {typ}, got {arr.dtype}")
        null = np.array([v is None for v in arr], dtype=bool)
        vals = np.array([0.0 if v is None else float(coerce_value(v, typ, attr)) for v in arr], dtype=np.float64)
        return vals, null

    def regions(self, i: int, values: np.ndarray, null: np.ndarray) -> np.ndarray:
        """Region numbers of canonical values in ASC ``i`` (null → 2m+1)."""
        consts = self._constants[i]
        m = len(consts)
        k = np.searchsorted(consts, values, side="left")
        eq = consts[np.minimum(k, m - 1)] == values
        r = 2 * k + ((k < m) & eq)
        r[null] = 2 * m + 1
        return r.astype(np.int64)

    def region_matrix(self, cols: list[tuple[np.ndarray, np.ndarray]], rows: np.ndarray) -> np.ndarray:
        """The region of ``rows`` in every ASC, ``(len(rows), n)`` (a full evaluation)."""
        out = np.empty((len(rows), self.n), dtype=np.int64)
        for i, (vals, null) in enumerate(cols):
            out[:, i] = self.regions(i, vals[rows], null[rows])
        return out

    # -- evaluation ----------------------------------------------------------

    def evaluate_batch(self, columns: Mapping[str, Any], sequence: Sequence
                       ) -> tuple[np.ndarray, np.ndarray]:
        """Query bitmaps ``(N, W)`` and evaluated-ASC counts ``(N,)`` of a batch."""
        cols = self.canonical_columns(columns)
        size = len(cols[0][0]) if cols else (len(next(iter(columns.values()))) if columns else 0)

        def region_fn(i: int, rows: np.ndarray) -> np.ndarray:
            vals, null = cols[i]
            return self.regions(i, vals[rows], null[rows])

        return self.run(size, region_fn, sequence)

    def run(self, size: int, region_fn: RegionFn, sequence: Sequence) -> tuple[np.ndarray, np.ndarray]:
        """Evaluate ``size`` fresh rows whose regions ``region_fn(i, rows)`` gives."""
        grb, geb, cur, evaluated = self.initial_state(size, sequence)
        if sequence.micro:
            self.advance(grb, geb, cur, evaluated, region_fn, sequence)
        else:
            self._advance_in_order(grb, geb, cur, evaluated, region_fn, sequence)
        return grb, evaluated

    def initial_state(self, size: int, sequence: Sequence
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Fresh ``(grb, geb, cur, evaluated)`` for ``size`` rows about to enter ``sequence``."""
        grb = np.tile(self.all, (size, 1))
        geb = np.zeros((size, self.n), dtype=bool)
        first = next((i for i in sequence.order if self.index.ascs[i].qub & self.index.all_queries), -1)
        cur = np.full(size, first, dtype=np.int64)
        return grb, geb, cur, np.zeros(size, dtype=np.int64)

    def micro_table(self, sequence: Sequence) -> np.ndarray:
        """Micro-arrows as an ``(n, max regions)`` array, -1 where there is none."""
        table = np.full((self.n, self.max_regions), -1, dtype=np.int64)
        for (i, r), j in sequence.micro.items():
            table[i, r] = j
        return table

    def advance(self, grb: np.ndarray, geb: np.ndarray, cur: np.ndarray, evaluated: np.ndarray,
                region_fn: RegionFn, sequence: Sequence, stop_at: int = -1) -> None:
        """Run rows whose ``cur`` is an ASC until they drop or run out of ASCs (in place).

        ``cur`` is the next ASC of each row (-1 when done). With ``stop_at``,
        a row halts just before evaluating that ASC, keeping ``cur == stop_at``.
        """
        order = np.asarray(sequence.order, dtype=np.int64)
        micro = self.micro_table(sequence)
        active = np.flatnonzero((cur >= 0) & (cur != stop_at))
        while active.size:
            c = cur[active]
            last = np.empty(active.size, dtype=np.int64)
            for i in np.unique(c).tolist():
                sel = np.flatnonzero(c == i)
                rows = active[sel]
                r = region_fn(i, rows)
                grb[rows] &= self.qrb[i][r]
                last[sel] = r
            geb[active, c] = True
            evaluated[active] += 1
            g = grb[active]
            alive = g.any(axis=1)
            cur[active[~alive]] = -1
            active, c, last, g = active[alive], c[alive], last[alive], g[alive]
            if not active.size:
                break
            elig = self.eligible(g) & ~geb[active]
            nxt = micro[c, last]
            has_micro = np.flatnonzero(nxt >= 0)
            ok = np.zeros(active.size, dtype=bool)
            ok[has_micro] = elig[has_micro, nxt[has_micro]]
            by_order = elig[:, order]
            fallback = np.where(by_order.any(axis=1), order[by_order.argmax(axis=1)], -1)
            nxt = np.where(ok, nxt, fallback)
            cur[active] = nxt
            active = active[(nxt >= 0) & (nxt != stop_at)]

    def eligible(self, g: np.ndarray) -> np.ndarray:
        """``(rows, n)``: whether ASC i can still fail a query live in the GRBs ``g``."""
        elig = (g[:, 0:1] & self.qub[None, :, 0]) != 0
        for w in range(1, self.words):
            elig |= (g[:, w:w + 1] & self.qub[None, :, w]) != 0
        return elig

    def _advance_in_order(self, grb: np.ndarray, geb: np.ndarray, cur: np.ndarray, evaluated: np.ndarray,
                          region_fn: RegionFn, sequence: Sequence) -> None:
        """:meth:`advance` for fresh rows and no micro-arrows: the next ASC is then the
        first eligible one in order, and an ASC skipped once stays ineligible (the
        GRB only loses bits), so one pass per ASC does it."""
        active = np.flatnonzero(cur >= 0)
        for i in sequence.order:
            if not active.size:
                break
            g = grb[active]
            take = ~geb[active, i] & ((g & self.qub[i]) != 0).any(axis=1)
            rows = active[take]
            if rows.size:
                grb[rows] &= self.qrb[i][region_fn(i, rows)]
                geb[rows, i] = True
                evaluated[rows] += 1
                active = active[grb[active].any(axis=1)]
        cur[:] = -1

    # -- statistics for the monitor ------------------------------------------

    def batch_stats(self, columns: Mapping[str, Any], bitmaps: np.ndarray, evaluated: np.ndarray,
                    sample_rate: float, seed: int | None = None) -> dict[str, Any]:
        """JSON statistics of one evaluated batch for :class:`DroppingMonitor`.

        ``sample`` lists, for a Bernoulli(``sample_rate``) sample of rows, the
        region of the row in every ASC; computing it costs ``n`` ASC
        evaluations per sampled row, reported as ``monitor_evaluated``.
        """
        size = len(evaluated)
        rng = np.random.default_rng(seed)
        rows = np.flatnonzero(rng.random(size) < sample_rate) if sample_rate > 0 else np.zeros(0, np.int64)
        cols = self.canonical_columns(columns, size)
        sample = self.region_matrix(cols, rows) if rows.size else np.zeros((0, self.n), dtype=np.int64)
        return {"tuples": int(size), "dropped": int((~bitmaps.any(axis=1)).sum()),
                "evaluated": int(evaluated.sum()), "sample": sample.tolist(),
                "monitor_evaluated": int(rows.size * self.n)}

    def query_ids(self, row: np.ndarray) -> list[str]:
        """Ids of the queries set in one bitmap row."""
        return self.index.query_names(words_to_int(row))
