"""The keyword-query engine: a state machine ``apply(op) -> changes`` over one stream.

:class:`StreamEngine` is the op path every engine shares: the stream rules,
the live store and the sliding window; a subclass supplies the evaluator that
turns inserted and deleted tuples into results. One :class:`KeywordEngine`
serves one continuous keyword query (keywords, ``tmax``, window) with one of
three evaluators:

* ``dynamic`` — CNEvalDynamic from an empty window;
* ``static-dynamic`` — :meth:`KeywordEngine.load` evaluates the ops already in
  the window with CNEvalStatic, then CNEvalDynamic continues op by op;
* ``mesh`` — the left-deep operator mesh of Markowetz et al. (the baseline).

Stream rules are those of docs/ops.md: before an op at time ``t``
every tuple inserted at ``s`` with ``s + W <= t`` expires, oldest first; a late
op, the insert of a live key and the delete of a missing key are rejected
with :class:`~streaming.ops.OpRejected` and change nothing (not even the
expiries the op would have triggered).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .evaluate.dynamic import DynamicEvaluator
from .evaluate.mesh import MeshEvaluator
from .evaluate.plan import LatticePlan
from .evaluate.results import Change, Result
from .evaluate.static import evaluate_static
from .keywords import KeywordSet, tokens
from .ops import Op, OpRejected
from .schema import Schema
from .window import LiveStore, SlidingWindow

__all__ = ["ENGINES", "Result", "Change", "StreamEngine", "KeywordEngine"]

ENGINES = ("dynamic", "static-dynamic", "mesh")


class StreamEngine:
    """The op path of one stream: stream rules, live store, window expiry, loading, inspection.

    A subclass sets ``self.evaluator`` (``insert``/``delete`` of a stored
    tuple returning the results born or dead with it, ``snapshot``,
    ``stats``) and may override :meth:`_mask` (the keyword mask stored with a
    tuple) and ``_bulk_evaluate`` (see :meth:`load`).
    """

    evaluator: Any
    # Bulk start: load() only stores the tuples, then calls this on the evaluator.
    _bulk_evaluate: Callable[[Any], Any] | None = None

    def __init__(self, schema: Schema, window_seconds: float | None = None):
        self.schema = schema
        self.store = LiveStore(schema)
        self.window = SlidingWindow(window_seconds)
        self.last_ts: float | None = None
        self.applied = 0
        self.rejected = 0

    # -- the op path --------------------------------------------------------------

    def check(self, op: Op) -> None:
        """Raise :class:`OpRejected` if ``op`` may not be applied now (changes nothing)."""
        if op.relation not in self.schema.relations:
            raise OpRejected(f"unknown relation {op.relation!r}")
        if self.last_ts is not None and op.ts < self.last_ts:
            raise OpRejected(f"late op: ts {op.ts:g} is before the last accepted ts {self.last_ts:g}")
        row = self.store.rows[op.relation].get(op.key)
        alive = row is not None and not self.window.expires_by(row, op.ts)
        if op.kind == "insert":
            if alive:
                raise OpRejected(f"insert of {op.relation} {op.key!r}: the key is already live")
        elif op.kind == "delete":
            if not alive:
                raise OpRejected(f"delete of {op.relation} {op.key!r}: no live tuple with this key")
        else:
            raise OpRejected(f"op must be 'insert' or 'delete', got {op.kind!r}")

    def _judge(self, op: Op) -> bool:
        """The stream rules, fast: True for an insert and False for a delete the stream accepts; any
        other op raises :class:`OpRejected` (with :meth:`check`'s reason) and changes nothing."""
        rows = self.store.rows.get(op.relation)
        row = None if rows is None else rows.get(op.key)
        insert = op.kind == "insert"
        if (rows is None or (self.last_ts is not None and op.ts < self.last_ts)
                or (not insert and op.kind != "delete")
                or insert == (row is not None and not self.window.expires_by(row, op.ts))):
            self.rejected += 1
            self.check(op)
            raise AssertionError(f"check() accepted an op apply() rejects: {op}")
        return insert

    def apply(self, op: Op) -> list[Change]:
        """Expire what the op's time pushes out of the window, then apply it; return the changes."""
        relation, key, ts = op.relation, op.key, op.ts
        insert = self._judge(op)
        changes = [Change("remove", r) for r in self._expire(ts)] if self.window.pending(ts) else []
        if insert:
            values = op.values
            row = self.store.add(relation, key, values, self._mask(relation, values), ts)
            self.window.push(relation, key, row)
            added = self.evaluator.insert(relation, key, row)
            if added:
                changes.extend(Change("add", r) for r in added)
        else:
            changes.extend(Change("remove", r) for r in self._delete(relation, key))
        self.last_ts = ts
        self.applied += 1
        return changes

    def advance(self, ts: float) -> list[Change]:
        """Let event time reach ``ts`` with no op: remove the results of tuples that leave the window.

        For an op of the stream this engine does not take (a tuple its
        query's predicates reject), so results still end when the stream's
        time passes their window. A time before the last accepted one is
        rejected with :class:`OpRejected` and changes nothing.
        """
        if self.last_ts is not None and ts < self.last_ts:
            raise OpRejected(f"late time: {ts:g} is before the last accepted ts {self.last_ts:g}")
        changes = [Change("remove", r) for r in self._expire(ts)] if self.window.pending(ts) else []
        self.last_ts = ts
        return changes

    def _expire(self, now: float) -> list[Result]:
        gone: list[Result] = []
        for relation, key in self.window.due(now, self.store):
            gone.extend(self._delete(relation, key))
        return gone

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
        evaluates them once at the end (``_bulk_evaluate``); the others
        apply them one by one. A rejected op is passed to
        ``on_reject(index, op, reason)``, or raised when there is no callback
        (the ops before it stay loaded and evaluated).
        """
        if self.applied or len(self.store):
            raise RuntimeError("load() starts an engine: it must come before any other op")
        bulk = self._bulk_evaluate
        try:
            for i, op in enumerate(ops):
                try:
                    self.check(op)
                except OpRejected as exc:
                    self.rejected += 1
                    if on_reject is None:
                        raise
                    on_reject(i, op, str(exc))
                    continue
                if bulk is None:
                    self.apply(op)
                    continue
                for relation, key in self.window.due(op.ts, self.store):
                    self.store.remove(relation, key)
                if op.kind == "insert":
                    mask = self._mask(op.relation, op.values)
                    row = self.store.add(op.relation, op.key, op.values, mask, op.ts)
                    self.window.push(op.relation, op.key, row)
                else:
                    self.store.remove(op.relation, op.key)
                self.last_ts = op.ts
                self.applied += 1
        finally:
            if bulk is not None:
                bulk(self.evaluator)

    # -- inspection ---------------------------------------------------------------

    def snapshot(self) -> list[Result]:
        """The live results, sorted."""
        return self.evaluator.snapshot()

    def tuple_values(self, relation: str, key: Any) -> dict | None:
        """The live tuple's values (for display), or None."""
        rows = self.store.rows.get(relation)
        row = rows.get(key) if rows is not None else None
        return None if row is None else dict(row.values)

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
                 window_seconds: float | None = None, engine: str = "dynamic", lattice: Any = None):
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        if tmax < 1:
            raise ValueError(f"tmax must be at least 1, got {tmax}")
        self.keywords = KeywordSet(keywords if isinstance(keywords, str) else list(keywords))
        super().__init__(schema, window_seconds)
        self.tmax = tmax
        self.engine = engine
        self._bulk_evaluate = evaluate_static if engine == "static-dynamic" else None
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
            self.evaluator = DynamicEvaluator(self.plan, self.store)

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
