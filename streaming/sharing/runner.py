"""A whole plan over an op stream, with no Spark, Redis or Django (``python -m streaming run-plan``).

:class:`PlanRun` feeds numbered op lines to the plan's queries and aggregate
subscriptions under one sharing mode and keeps, per query, its changes and,
per subscription, its window values:

* ``none`` — "data shipping": each query alone
  (:class:`~streaming.query_alone.SelectedQuery`: its own store, window,
  keyword classification, predicates and lattice) and each aggregate alone
  (its own verdicts and window); only the parse of an op line is shared;
* ``match`` — sharing without widening: a query rides on the first class
  whose properties serve it unchanged, else it gets a class of its own;
* ``widen`` — every query of a keyword set (filter subscriptions: all of
  them) shares one class, widened to serve all.

Every query's changes are the same in every mode, on any stream that does not
re-insert a key (``docs/sharing.md``); ``stats`` says what sharing saved.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path
from typing import Any, Iterable

from ..clock import ClockGuard
from ..evaluate.results import Result
from ..ops import Op, OpRejected, parse_op
from ..schema import Schema
from ..engine import StreamEngine
from ..query_alone import SelectedQuery, verdict_store
from .aggregates import AggregateClass
from .engine import SharedEngine
from .matching import AggregateClassProperties, registration_aggregate_classes, registration_classes
from .properties import AggregateProperties, QueryProperties, SharingPlan, aggregate_properties, query_properties

__all__ = ["MODES", "PlanRun"]

MODES = ("none", "match", "widen")
_PEAK_EVERY = 256


class _Alone:
    """``none``: every query and every aggregate subscription on its own."""

    def __init__(self, schema: Schema, queries: list[QueryProperties], aggregates: list[AggregateProperties],
                 run: "PlanRun", guard: ClockGuard):
        self.run = run
        self.queries = [(q.id, SelectedQuery(schema, sorted(q.keywords), q.tmax, q.window, q.predicates, guard=guard))
                        for q in queries]
        windows = [q.window for q in queries]
        verdict_window = None if not windows or None in windows else max(w for w in windows if w is not None)
        self.aggregates: list[tuple[AggregateProperties, AggregateClass, StreamEngine | None]] = []
        for a in aggregates:
            cls = AggregateClass(AggregateClassProperties.of(a), [a], run.value)
            verdicts = None
            if a.source_relation is not None:  # reads the raw stream with the stream's verdicts
                verdicts = verdict_store(schema, verdict_window, guard)
            self.aggregates.append((a, cls, verdicts))
        self.by_query: dict[int, list[AggregateClass]] = {}
        for a, cls, _ in self.aggregates:
            if a.source_query is not None:
                self.by_query.setdefault(a.source_query, []).append(cls)
        self.started = False

    def apply(self, op: Op) -> str | None:
        """Apply ``op`` to every query and aggregate alone; the reason it was rejected, or None."""
        reasons: list[str] = []
        for a, cls, verdicts in self.aggregates:
            if verdicts is None:
                continue
            try:
                verdicts.apply(op)
            except OpRejected as exc:
                reasons.append(str(exc))
                if verdicts.last_ts is not None:  # a rejected op may still have moved the clock
                    self._tick(cls, verdicts.last_ts)
                continue
            self._tick(cls, op.ts)
            if op.kind == "insert" and op.relation == a.source_relation:
                assert op.values is not None
                cls.offer(op.ts, op.values)
        accepted = not self.queries and not reasons
        for qid, query in self.queries:
            try:
                changes = query.apply(op)
            except OpRejected as exc:
                reasons.append(str(exc))
                changes = exc.changes
            else:
                accepted = True
            aggs = self.by_query.get(qid, ())
            if query.clock is not None:
                for cls in aggs:
                    self._tick(cls, query.clock)
            for change in changes:
                self.run.change(qid, change.type, change.result)
                if change.type == "add":
                    for cls in aggs:
                        cls.offer_result(op.ts, change.result, query.engine.store.rows)
        return None if accepted or not reasons else reasons[0]

    @staticmethod
    def _tick(cls: AggregateClass, ts: float) -> None:
        if cls.pending is None:
            cls.pending = cls.start(ts)
        elif cls.aggregator.next_close is not None and cls.aggregator.next_close <= ts:
            cls.close(ts)

    def stored(self) -> int:
        return sum(q.stored_tuples() for _, q in self.queries) + sum(
            len(v.store) for _, _, v in self.aggregates if v is not None)

    def stats(self, queries: list[QueryProperties], aggregates: list[AggregateProperties]) -> dict[str, Any]:
        return {"classes": len(queries), "queries_sharing": 0,
                "lattices": sum(1 for q in queries if q.keywords),
                "aggregate_classes": len(aggregates), "aggregates_sharing": 0}


class PlanRun:
    """Runs one plan in one sharing mode; feed it lines, then read ``changes``, ``values``, ``stats()``."""

    def __init__(self, plan: SharingPlan, mode: str = "widen", engine: str = "dynamic"):
        if mode not in MODES:
            raise ValueError(f"sharing must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.schema = Schema.from_dict(plan.schema_)
        self.queries = [query_properties(q, self.schema) for q in plan.queries]
        by_id = {q.id: q for q in self.queries}
        self.aggregates = [aggregate_properties(a, self.schema, by_id) for a in plan.aggregates]
        # each query's changes as (seq, kind, result); a change reaching several queries is one tuple in each list
        self.changes: dict[int, list[tuple[int, str, Result]]] = {q.id: [] for q in self.queries}
        self._receivers: dict[int, list[list[tuple[int, str, Result]]]] = {}  # query-bit mask -> their lists
        self.values: dict[int, list[tuple[float, Any]]] = {a.id: [] for a in self.aggregates}
        self.rejects: list[tuple[int, str]] = []
        self.seq = -1
        self.ops = 0
        self.cpu_s = 0.0
        self.store_peak = 0
        self._shared: SharedEngine | None = None
        self._alone: _Alone | None = None
        if mode == "none":
            self._alone = _Alone(self.schema, self.queries, self.aggregates, self, plan.clock)
        else:
            self._shared = SharedEngine(self.schema, mode, aggregate_sink=self.value, guard=plan.clock,
                                        delivery_sink=self.delivered)
            self._shared.set_plan(self.queries, self.aggregates)

    def change(self, query_id: int, kind: str, result: Result) -> None:
        self.changes[query_id].append((self.seq, kind, result))

    def delivered(self, receivers: int, kind: str, result: Result) -> None:
        """A change reaching the queries of the mask ``receivers`` (the shared engine's delivery sink)."""
        lists = self._receivers.get(receivers)
        if lists is None:
            assert self._shared is not None
            lists = self._receivers[receivers] = [self.changes[qid] for qid in self._shared.query_ids(receivers)]
        change = (self.seq, kind, result)
        for changes in lists:
            changes.append(change)

    def value(self, aggregate_id: int, window_end: float, value: Any) -> None:
        self.values[aggregate_id].append((window_end, value))

    def feed(self, lines: Iterable[tuple[int, str]]) -> None:
        """Apply numbered op lines ``(line number, text)``; the seq of each is its position in the stream."""
        started = time.process_time()
        for lineno, line in lines:
            self.seq += 1
            self.ops += 1
            try:
                op = parse_op(line, self.schema)
            except OpRejected as exc:
                self.rejects.append((lineno, str(exc)))
                continue
            if self._shared is not None:
                try:
                    self._shared.apply(op)
                except OpRejected as exc:
                    self.rejects.append((lineno, str(exc)))
            else:
                assert self._alone is not None
                reason = self._alone.apply(op)
                if reason is not None:
                    self.rejects.append((lineno, reason))
            if self.ops % _PEAK_EVERY == 0:
                self.store_peak = max(self.store_peak, self._stored())
        self.cpu_s += time.process_time() - started
        self.store_peak = max(self.store_peak, self._stored())

    def _stored(self) -> int:
        if self._shared is not None:
            return len(self._shared.store)
        assert self._alone is not None
        return self._alone.stored()

    def stats(self) -> dict[str, Any]:
        """What ``stats.json`` holds: the sharing achieved and what it cost."""
        out: dict[str, Any] = {
            "sharing": self.mode,
            "queries": len(self.queries),
            "aggregates": len(self.aggregates),
            "ops": self.ops,
            "rejected": len(self.rejects),
            "cpu_s": round(self.cpu_s, 6),
            "us_per_op": round(self.cpu_s / self.ops * 1e6, 3) if self.ops else 0.0,
            "store_tuples_peak": self.store_peak,
            "store_tuples_peak_sampled_every_ops": _PEAK_EVERY,
            "max_rss_mb": _peak_rss_mb(),
            "changes": sum(len(c) for c in self.changes.values()),
            "values": sum(len(v) for v in self.values.values()),
        }
        if self._shared is not None:
            engine = self._shared.stats()
            classes = engine.pop("class_details")
            out.update({
                "classes": engine["classes"],
                "queries_sharing": len(self.queries) - engine["classes"],
                "lattices": engine["lattices"],
                "network": engine["network"],
                "aggregate_classes": engine["aggregate_classes"],
                "aggregates_sharing": len(self.aggregates) - engine["aggregate_classes"],
                "class_evaluations": engine["class_evaluations"],
                "window_seconds": engine["window_seconds"],
                "class_details": classes,
                "aggregate_details": [c.stats() for c in self._shared.aggregate_classes],
            })
        else:
            assert self._alone is not None
            out.update(self._alone.stats(self.queries, self.aggregates))
        out["registration"] = {
            "match": len(self.queries) - len(registration_classes(self.queries, "match")),
            "widen": len(self.queries) - len(registration_classes(self.queries, "widen")),
            "aggregates_match": len(self.aggregates) - len(registration_aggregate_classes(self.aggregates, "match")),
            "aggregates_widen": len(self.aggregates) - len(registration_aggregate_classes(self.aggregates, "widen")),
        }
        return out


def _peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ``ru_maxrss`` it starts afresh at exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
