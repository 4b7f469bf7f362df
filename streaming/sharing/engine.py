"""The shared evaluation of a stream: every saved query of a plan over one store, one window, one parse.

:class:`SharedEngine` is the state machine an evaluator (or ``run-plan``)
drives with ``apply(op)``. Per stream it keeps one tuple store and one
sliding window whose retention is the widest class window, classifies each
inserted tuple once against the stream's vocabulary (a bitmask: one bit per
keyword of any query) and once against every query's predicates (the query
mask, :mod:`streaming.sharing.admission`). Queries are grouped into sharing
classes (:mod:`streaming.sharing.matching`, mode ``match`` or ``widen``), each
evaluated once (:mod:`streaming.sharing.classes`) and filtered per member
(:mod:`streaming.sharing.delivery`); aggregate subscriptions share relaxed
windows (:mod:`streaming.sharing.windows`).

The engine is built in three parts: what a plan sets up and every op reads
(:class:`~streaming.sharing.plan_state.PlanState`, which :class:`SharedEngine`
extends, so the op path reads it on ``self``; how a plan change regroups the
queries into classes is :mod:`streaming.sharing.regrouping`), the op path and
its output (this module), and the event-time timers
(:mod:`streaming.sharing.timers`).

An op costs work only where it can matter: a tuple goes to the classes whose
keywords it contains and to those where one of its neighbours (a tuple it
references or that references it) sits in a lattice node (``LiveTuple.classes``);
a delete or an expiry goes to the classes the tuple sits in; event-time work
(a class or member window passing a tuple or result, a time window closing)
waits on one timer heap. A keyword-free tuple whose neighbours sit nowhere
costs the store and a few lookups, however many queries and classes there are.

Stream rules are those of :class:`~streaming.engine.StreamRules` (the op
moves the clock, then is judged against the store), so with queries of
different windows an op gets one verdict, against the widest window:
re-inserting a key that left a narrow window but not the widest is rejected
for every query (the one deliberate difference from running each query
alone; see ``docs/sharing.md``).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any, Callable, Iterable, Mapping

from ..clock import ClockGuard
from ..evaluate.results import Result
from ..ops import Op, OpRejected
from ..schema import Schema
from ..tuning import building_long_lived
from .classes import FilterClass
from .matching import NarrowingRule
from .plan_state import PlanState
from .regrouping import SHARING_MODES

__all__ = ["SHARING_MODES", "SharedEngine"]

#: ``sink(receivers, "add" | "remove", result)``: ``receivers`` is the mask of the bits of the queries the
#: change reaches (:meth:`SharedEngine.query_ids` names them)
DeliverySink = Callable[[int, str, Result], None]
#: ``sink(aggregate id, window end, value)``
AggregateSink = Callable[[int, float, Any], None]


def _ignore(*_: Any) -> None:
    return None


class SharedEngine(PlanState):
    """All queries and aggregate subscriptions of one stream, evaluated with sharing.

    Build it, call :meth:`set_plan` (again whenever the plan changes), then
    :meth:`apply` ops in order. Changes go to ``delivery_sink``, once per
    change with the mask of the queries it reaches (a result of a class
    reaches many members at once; :meth:`query_ids` names them), and window
    values to ``aggregate_sink`` as they happen, and ``forget`` hears of
    every tuple that leaves the store (deleted or expired); :meth:`results`
    gives a query's live set.
    """

    def __init__(self, schema: Schema, mode: str = "widen", delivery_sink: DeliverySink = _ignore,
                 aggregate_sink: AggregateSink = _ignore, forget: Callable[[str, Any], None] = _ignore,
                 selection_kind: str = "hybrid",
                 selection_period: int = 10_000, selection_mu: float = 0.1,
                 narrowing: NarrowingRule = NarrowingRule(), guard: ClockGuard | None = None):
        super().__init__(schema, mode, aggregate_sink, (selection_kind, selection_period, selection_mu),
                         narrowing, guard)
        self.delivery_sink = delivery_sink
        self.forget = forget
        self.network_busy = 0.0  # seconds the shared lattice spent evaluating ops
        self.class_evaluations = 0
        self._timer_heap = self.timers.heap  # read on every op (is a timer due?), not through self.timers

    # -- ops ---------------------------------------------------------------------------

    def apply(self, op: Op, qmask: int | None = None,
              hits: Iterable[str] | None = None) -> list:
        """Apply one op (changes go to the sinks).

        ``qmask`` is the global-result bitmap and ``hits`` the keywords of
        the stream's vocabulary the tuple contains, when the executors
        computed them with the current plan (else they are computed here).

        The op moves the stream clock first (docs/ops.md, "The stream
        clock"): what that time expires or closes goes to the sinks whatever
        the op's verdict. A late op or one the guard refuses raises
        :class:`~streaming.ops.OpRejected` and changes nothing; an insert of a
        live key or a delete of a missing key raises it after the clock moved.
        """
        relation, key, ts = op.relation, op.key, op.ts
        first = self.last_ts is None
        self._move_clock(op)
        self._time_passes(ts, first)
        insert = op.kind == "insert"
        if insert == (key in self.store.rows[relation]):
            self.rejected += 1
            raise OpRejected(self._refused_by_key(op))
        if insert:
            values = op.values
            assert values is not None
            q = (self.admission.qmask(relation, values) if qmask is None
                 else self.admission.from_bitmap(relation, qmask))
            if hits is None:
                mask = self._classify(relation, values)
            else:
                mask = 0
                for word in hits:
                    mask |= 1 << self.vocabulary[word]
            row = self.store.add(relation, key, values, mask, ts, q)
            self.window.push(relation, key, row)
            self._route_insert(relation, key, row)
            for agg in self._aggregates_by_relation.get(relation, ()):
                self.timers.arm(agg, agg.offer(ts, values))
        else:
            self._delete(relation, key)
        self.applied += 1
        return []

    def advance(self, ts: float) -> list:
        """Let event time reach ``ts`` with no op (windows expire, timers fire); a late time, or one the
        guard refuses, raises :class:`OpRejected` and changes nothing."""
        reason = self.clock_reason(ts)
        if reason is not None:
            raise OpRejected(reason)
        first = self.last_ts is None
        self.last_ts = ts
        self._time_passes(ts, first)
        return []

    def _time_passes(self, ts: float, first: bool) -> None:
        """The clock moved to ``ts``: aggregate windows start (``first``: the stream's first time),
        tuples leave the window and the timers due fire."""
        self.clock.now = ts
        if first:
            for cls in self.aggregate_classes:
                self.timers.arm(cls, cls.start(ts))
        if self.window.pending(ts):
            self._expire(ts)
        heap = self._timer_heap
        if heap and heap[0][0] <= ts:
            self.timers.fire(ts)

    def _route_insert(self, relation: str, key: Any, row: Any) -> None:
        """Evaluate an inserted tuple: the shared lattice once for every keyword set, and the filter
        classes of its relation that admit it."""
        if self._kids:
            started = perf_counter()
            added = self.network.insert(relation, key, row)
            self.class_evaluations += 1
            if added:
                now = self.clock.now
                classes_of = self._classes_of_kid
                for kid, result in added:
                    for cls in classes_of[kid]:
                        if cls.takes(result):
                            cls.delivery.add(result, now)
            self.network_busy += perf_counter() - started
        route = self._filter_classes.get(relation, 0)
        classes = self.classes
        while route:  # each filter class of the relation, lowest bit first
            low = route & -route
            route ^= low
            cls = classes[low.bit_length() - 1]
            if isinstance(cls, FilterClass) and cls.admits_new(relation, row):
                self.class_evaluations += 1
                cls.insert(relation, key, row)

    def _delete(self, relation: str, key: Any) -> list:
        row = self.store.rows[relation][key]
        if key in self.network.member[relation]:
            started = perf_counter()
            self.class_evaluations += 1
            classes_of = self._classes_of_kid
            for kid, result in self.network.delete(relation, key, row):
                for cls in classes_of[kid]:
                    cls.delivery.remove(result)
            self.network_busy += perf_counter() - started
        classes = self.classes
        member_of = row.classes
        while member_of:
            low = member_of & -member_of
            member_of ^= low
            cls = classes[low.bit_length() - 1]
            if isinstance(cls, FilterClass):
                self.class_evaluations += 1
                cls.delete(relation, key, row)
        self.store.remove(relation, key)
        self.forget(relation, key)
        return []

    def restore(self, ops: Iterable[Op], clock: float | None) -> None:
        """Take back stored tuples (inserts, in event-time order) with no evaluation, then evaluate
        every class at once (CNEvalStatic); ``clock`` is the stream time the evaluator had reached.

        For a restarted evaluator: the plan is set, nothing applied yet.
        """
        if self.applied or len(self.store):
            raise RuntimeError("restore() starts an engine: it must come before any op")
        store, window = self.store, self.window
        with building_long_lived():  # the stored tuples and every class's state
            for op in ops:
                assert op.values is not None
                for relation, key in list(window.due(op.ts, store)):
                    store.remove(relation, key)
                    self.forget(relation, key)
                row = store.add(op.relation, op.key, op.values, self._classify(op.relation, op.values), op.ts,
                                self.admission.qmask(op.relation, op.values, observe=False))
                window.push(op.relation, op.key, row)
                self.last_ts = op.ts
            if clock is not None:
                self.last_ts = clock if self.last_ts is None else max(self.last_ts, clock)
                for relation, key in list(window.due(self.last_ts, store)):
                    store.remove(relation, key)
                    self.forget(relation, key)
            if self.last_ts is not None:
                self.clock.now = self.last_ts
            self._rebuild_classes()

    # -- aggregate windows -------------------------------------------------------------

    def aggregate_state(self) -> dict[str, Any]:
        """The running windows of every aggregate class (JSON), keyed by the class's signature."""
        return {cls.signature: cls.aggregator.state() for cls in self.aggregate_classes}

    def restore_aggregates(self, states: Mapping[str, Any]) -> int:
        """Take back saved windows of the classes whose signature is unchanged; returns how many."""
        restored = 0
        for cls in self.aggregate_classes:
            state = states.get(cls.signature)
            cls.pending = None
            if state is not None:
                cls.aggregator.restore(state)
                self.timers.arm(cls, cls.aggregator.next_close)
                restored += 1
            elif self.last_ts is not None:  # a class without saved windows starts now
                self.timers.arm(cls, cls.start(self.last_ts))
        return restored

    # -- output ------------------------------------------------------------------------

    def _deliver(self, mask: int, kind: str, result: Result) -> None:
        """A class's change reaching the queries of ``mask`` (their bits)."""
        mask &= self._query_bits  # not a query that left, while its class waits to be rebuilt
        if not mask:
            return
        self.delivery_sink(mask, kind, result)
        if kind == "add" and mask & self._aggregate_bits:
            rows, now = self.store.rows, self.clock.now
            for qid in self.query_ids(mask & self._aggregate_bits):
                for agg in self._aggregates_by_query[qid]:
                    self.timers.arm(agg, agg.offer_result(now, result, rows))

    def query_ids(self, mask: int) -> list[int]:
        """The ids of the queries whose bits ``mask`` has, lowest bit first."""
        queries = self.queries
        ids = []
        while mask:
            low = mask & -mask
            mask ^= low
            ids.append(queries[low.bit_length() - 1].id)
        return ids

    def results(self, query_id: int) -> list[Result]:
        """The live results of one query, sorted."""
        cls = self.class_of[query_id]
        return cls.delivery.results_of(self.bit_of[query_id])

    def apportion_busy(self) -> None:
        """Share the shared lattice's measured time among the keyword classes (what placement reads as
        each class's cost): each node's part split evenly among the keyword sets that use it, and a
        keyword set's part evenly among its classes."""
        plan = self.network.plan
        nodes = {kid: plan.nodes_of(kid) for kid in self._kids.values()}
        users: dict[int, int] = {}
        for reached in nodes.values():
            for v in reached:
                users[v] = users.get(v, 0) + 1
        total = len(users) or 1
        for kid, reached in nodes.items():
            share = sum(1 / users[v] for v in reached) / total
            classes = self._classes_of_kid.get(kid, [])
            for cls in classes:
                cls.busy = self.network_busy * share / len(classes)

    def stats(self) -> dict[str, Any]:
        classes = self.live_classes()
        self.apportion_busy()
        return {
            "sharing": self.mode,
            "queries": len(self.queries),
            "classes": len(classes),
            "lattices": len(self._kids),
            "network": self.network.stats(),
            "store_tuples": len(self.store),
            "window_seconds": self.window.seconds,
            "vocabulary": len(self.vocabulary),
            "ops_applied": self.applied,
            "ops_rejected": self.rejected,
            "class_evaluations": self.class_evaluations,
            "pending_timers": len(self._timer_heap),
            "aggregate_classes": len(self.aggregate_classes),
            "class_details": [c.stats() for c in classes],
        }
