"""The keyword-query engine: a state machine ``apply(op) -> changes`` over one stream.

:class:`StreamRules` are what every engine of a stream shares: the stream
rules, the live store and the sliding window. :class:`StreamEngine` drives an
evaluator through them (an :class:`~streaming.evaluate.protocol.Evaluator`,
which turns inserted and deleted tuples into results); the shared engine
(``streaming.sharing``) drives its sharing classes. One :class:`KeywordEngine`
serves one continuous keyword query (keywords, ``tmax``, window) with one of
three evaluators:

* ``dynamic`` — CNEvalDynamic from an empty window;
* ``static-dynamic`` — :meth:`KeywordEngine.load` evaluates the ops already in
  the window with CNEvalStatic, then CNEvalDynamic continues op by op;
* ``mesh`` — the left-deep operator mesh of Markowetz et al. (the baseline).

Stream rules are those of docs/ops.md ("The stream clock"): an op of a
known relation that is neither late nor refused by the stream's
:class:`~streaming.clock.ClockGuard` moves the clock to its ``ts`` first, and
every tuple inserted at ``s`` with ``s + W <= t`` expires, oldest first, with
its results reported at that op whatever its verdict; then the insert of a
live key or the delete of a missing key is rejected with
:class:`~streaming.ops.OpRejected` (which carries those expiries) and changes
nothing more. A late or refused op changes nothing at all.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .evaluate.dynamic import DynamicEvaluator
from .evaluate.mesh import MeshEvaluator
from .evaluate.plan import LatticePlan
from .evaluate.results import Change, Result
from .evaluate.protocol import BulkEvaluator, Evaluator
from .clock import ClockGuard
from .keywords import KeywordSet, tokens
from .ops import Op, OpRejected
from .schema import Schema
from .window import LiveStore, SlidingWindow

__all__ = ["ENGINES", "Result", "Change", "StreamRules", "StreamEngine", "KeywordEngine"]

ENGINES = ("dynamic", "static-dynamic", "mesh")
_KINDS = ("insert", "delete")


class StreamRules:
    """The stream rules of one stream: live store, sliding window, clock guard; an op judged and the
    clock moved, what the new time pushes out of the window expired.

    A subclass says what a tuple leaving the store ends (:meth:`_delete`)
    and applies ops: :class:`StreamEngine` through an
    :class:`~streaming.evaluate.protocol.Evaluator`, the shared engine
    (``streaming.sharing``) through its classes.
    """

    def __init__(self, schema: Schema, window_seconds: float | None = None, guard: ClockGuard | None = None):
        self.schema = schema
        self.store = LiveStore(schema)
        self.window = SlidingWindow(window_seconds)
        self.last_ts: float | None = None
        self.applied = 0
        self.rejected = 0
        self.set_guard(guard or ClockGuard())

    def set_guard(self, guard: ClockGuard) -> None:
        """The stream's guard against absurd timestamps (judged before an op moves the clock)."""
        self.guard = guard
        self._ts_min, self._ts_max = guard.ts_min, guard.ts_max
        self._max_jump = float("inf") if guard.max_jump is None else guard.max_jump

    # -- the op path --------------------------------------------------------------

    def time_reason(self, op: Op) -> str | None:
        """Why ``op`` may not move the stream clock (unknown relation, not an insert or delete, late, or
        refused by the guard), or None."""
        if op.relation not in self.schema.relations:
            return f"unknown relation {op.relation!r}"
        if op.kind not in _KINDS:
            return f"op must be 'insert' or 'delete', got {op.kind!r}"
        if self.last_ts is not None and op.ts < self.last_ts:
            return f"late op: ts {op.ts:g} is before the stream clock {self.last_ts:g}"
        return self.guard.refuse(op.ts, self.last_ts)

    def clock_reason(self, ts: float) -> str | None:
        """Why the stream clock may not move to ``ts`` (late, or refused by the guard), or None."""
        if self.last_ts is not None and ts < self.last_ts:
            return f"late time: {ts:g} is before the stream clock {self.last_ts:g}"
        return self.guard.refuse(ts, self.last_ts)

    def check(self, op: Op) -> None:
        """Raise :class:`OpRejected` if ``op`` would be rejected now (changes nothing)."""
        reason = self.time_reason(op)
        if reason is None:
            row = self.store.rows[op.relation].get(op.key)
            if (op.kind == "insert") == (row is not None and not self.window.expires_by(row, op.ts)):
                reason = self._refused_by_key(op)
        if reason is not None:
            raise OpRejected(reason)

    @staticmethod
    def _refused_by_key(op: Op) -> str:
        """The reason an op whose time moved the clock is rejected: an insert of a live key or a delete
        of a missing one."""
        if op.kind == "insert":
            return f"insert of {op.relation} {op.key!r}: the key is already live"
        return f"delete of {op.relation} {op.key!r}: no live tuple with this key"

    def _move_clock(self, op: Op) -> None:
        """Judge the op's time (raising :class:`OpRejected`, nothing changed) and move the clock to it;
        the caller then expires what the new time pushes out of the window."""
        ts, last = op.ts, self.last_ts
        if (op.relation not in self.store.rows or op.kind not in _KINDS or not self._ts_min <= ts <= self._ts_max
                or (last is not None and not 0 <= ts - last <= self._max_jump)):
            self.rejected += 1
            raise OpRejected(self.time_reason(op) or f"op refused: {op}")
        self.last_ts = ts

    def _delete(self, relation: str, key: Any) -> list[Result]:
        """Take a tuple out of the store; return the results that die with it."""
        raise NotImplementedError

    def _expire(self, now: float) -> list[Result]:
        gone: list[Result] = []
        for relation, key in self.window.due(now, self.store):
            gone.extend(self._delete(relation, key))
        return gone

    def tuple_values(self, relation: str, key: Any) -> dict | None:
        """The live tuple's values (for display), or None."""
        rows = self.store.rows.get(relation)
        row = rows.get(key) if rows is not None else None
        return None if row is None else dict(row.values)


class StreamEngine(StreamRules):
    """The op path of one stream driven through an evaluator: stream rules, window expiry, loading, inspection.

    A subclass sets ``self.evaluator`` (an
    :class:`~streaming.evaluate.protocol.Evaluator`), may set
    ``self.bulk_evaluator`` (see :meth:`load`) and may override :meth:`_mask`
    (the keyword mask stored with a tuple).
    """

    evaluator: Evaluator
    # Bulk start: load() only stores the tuples, then this evaluator evaluates them at once.
    bulk_evaluator: BulkEvaluator | None = None

    def apply(self, op: Op) -> list[Change]:
        """Move the clock to the op's time (expiring what it pushes out of the window), then apply the op;
        return the changes. A rejected op raises :class:`OpRejected` carrying the expiries it caused."""
        relation, key, ts = op.relation, op.key, op.ts
        self._move_clock(op)
        changes = [Change("remove", r) for r in self._expire(ts)] if self.window.pending(ts) else []
        insert = op.kind == "insert"
        if insert == (key in self.store.rows[relation]):
            self.rejected += 1
            raise OpRejected(self._refused_by_key(op), changes)
        if insert:
            values = op.values
            row = self.store.add(relation, key, values, self._mask(relation, values), ts)
            self.window.push(relation, key, row)
            added = self.evaluator.insert(relation, key, row)
            if added:
                changes.extend(Change("add", r) for r in added)
        else:
            changes.extend(Change("remove", r) for r in self._delete(relation, key))
        self.applied += 1
        return changes

    def advance(self, ts: float) -> list[Change]:
        """Let event time reach ``ts`` with no op: remove the results of tuples that leave the window.

        For an op of the stream this engine does not take (a tuple its
        query's predicates reject, or an op the stream rejected by its key
        after it moved the clock), so results still end when the stream's
        time passes their window. A late time, or one the guard refuses, is
        rejected with :class:`OpRejected` and changes nothing.
        """
        reason = self.clock_reason(ts)
        if reason is not None:
            raise OpRejected(reason)
        self.last_ts = ts
        return [Change("remove", r) for r in self._expire(ts)] if self.window.pending(ts) else []

    def _mask(self, relation: str, values: dict) -> int:
        """The keyword mask stored with a tuple (none without keywords)."""
        return 0

    def _delete(self, relation: str, key: Any) -> list[Result]:
        gone = self.evaluator.delete(relation, key, self.store.rows[relation][key])
        self.store.remove(relation, key)
        return gone

    # -- starting on a non-empty window -------------------------------------------

    def load(self, ops: Iterable[Op], on_reject: Callable[[int, Op, str], None] | None = None) -> None:
        """Take in the ops already in the window without reporting changes.

        A bulk-loading engine (``static-dynamic``) stores the tuples and
        evaluates them once at the end (``bulk_evaluator``); the others
        apply them one by one. A rejected op is passed to
        ``on_reject(index, op, reason)``, or raised when there is no callback
        (the ops before it stay loaded and evaluated).
        """
        if self.applied or len(self.store):
            raise RuntimeError("load() starts an engine: it must come before any other op")
        bulk = self.bulk_evaluator
        try:
            for i, op in enumerate(ops):
                try:
                    if bulk is None:
                        self.apply(op)
                    else:
                        self._store_only(op)
                except OpRejected as exc:
                    if on_reject is None:
                        raise
                    on_reject(i, op, str(exc))
        finally:
            if bulk is not None:
                bulk.bulk_load()

    def _store_only(self, op: Op) -> None:
        """The op path of :meth:`apply` with no evaluation (a bulk load evaluates at the end)."""
        self._move_clock(op)
        for relation, key in self.window.due(op.ts, self.store):
            self.store.remove(relation, key)
        insert = op.kind == "insert"
        if insert == (op.key in self.store.rows[op.relation]):
            self.rejected += 1
            raise OpRejected(self._refused_by_key(op))
        if insert:
            row = self.store.add(op.relation, op.key, op.values, self._mask(op.relation, op.values), op.ts)
            self.window.push(op.relation, op.key, row)
        else:
            self.store.remove(op.relation, op.key)
        self.applied += 1

    # -- inspection ---------------------------------------------------------------

    def snapshot(self) -> list[Result]:
        """The live results, sorted."""
        return self.evaluator.snapshot()

    def stats(self) -> dict[str, Any]:
        """Sizes for dashboards and benchmarks: window, live tuples, ops, and the evaluator's own."""
        return {
            "window_seconds": self.window.seconds,
            "live_tuples": self.store.counts(),
            "ops_applied": self.applied,
            "ops_rejected": self.rejected,
            "last_ts": self.last_ts,
            **self.evaluator.stats(),
        }


class KeywordEngine(StreamEngine):
    """Live MTJNTs of one keyword query over one op stream."""

    def __init__(self, schema: Schema, keywords: str | Iterable[str], tmax: int,
                 window_seconds: float | None = None, engine: str = "dynamic", lattice: Any = None,
                 guard: ClockGuard | None = None):
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        if tmax < 1:
            raise ValueError(f"tmax must be at least 1, got {tmax}")
        self.keywords = KeywordSet(keywords if isinstance(keywords, str) else list(keywords))
        super().__init__(schema, window_seconds, guard)
        self.tmax = tmax
        self.engine = engine
        self._keyword_words = self.keywords.keywords
        self._searchable = {name: rel.searchable for name, rel in schema.relations.items()}
        if lattice is None:
            from .lattice import Lattice

            lattice = Lattice.build(schema, len(self.keywords), tmax)
        self.lattice = lattice
        self.plan = LatticePlan(lattice, schema)
        if engine == "mesh":
            self.evaluator = MeshEvaluator(self.plan, self.store)
        else:
            self.evaluator = dynamic = DynamicEvaluator(self.plan, self.store)
            if engine == "static-dynamic":
                self.bulk_evaluator = dynamic

    def _mask(self, relation: str, values: dict) -> int:
        """Keyword mask of a tuple; a substring test skips tokenising text that holds no keyword."""
        mask = 0
        keywords = self._keyword_words
        for attr in self._searchable[relation]:
            value = values.get(attr)
            if value.__class__ is str:
                low = value.casefold()
                for word in keywords:
                    if word in low:
                        mask |= self.keywords.mask_of_tokens(tokens(low))
                        break
        return mask

    def stats(self) -> dict[str, Any]:
        """Sizes for dashboards and benchmarks: lattice, live tuples, sub-relations, results."""
        labels: dict[str, int] = {}
        for relation, rows in self.store.rows.items():
            for row in rows.values():
                name = f"{relation}{{{','.join(self.keywords.names(row.mask))}}}"
                labels[name] = labels.get(name, 0) + 1
        return {
            "engine": self.engine,
            "keywords": list(self.keywords.keywords),
            "tmax": self.tmax,
            "lattice_nodes": self.plan.size,
            "lattice_roots": len(self.plan.roots),
            "live_tuples_by_subrelation": dict(sorted(labels.items())),
            **super().stats(),
        }
