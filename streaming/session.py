"""The stream session: one evaluator's plan and state, fed batch by batch, with no I/O.

:class:`StreamSession` is what an evaluator process computes; what it reads
and writes goes through the runner (:class:`~streaming.evaluator.EvaluatorRunner`)
and its ports (``streaming.ports``). Every query and aggregate subscription
of the stream is evaluated by one
:class:`~streaming.sharing.engine.SharedEngine` (one store, one window, one
keyword classification and one lattice per sharing class).

* :meth:`StreamSession.restore` takes the state a store saved (stored tuples,
  applied seq, stream clock, aggregate windows, hand-off seqs and held changes);
* :meth:`StreamSession.adopt` takes a plan and says what changed
  (:class:`PlanChange`): a query that joins a running class gets that class's
  results at once, one that needs a new or widened class gets it evaluated
  with CNEvalStatic over the stored tuples, and the published live set of
  each such query is to be reconciled with the engine's; a query that leaves
  because it was removed is to lose each of its live results (its change
  stream keeps the history), one that was disabled (the plan's ``frozen``)
  keeps them as they were until it is enabled again; a query that arrives or
  leaves by a class move between the stream's evaluators (the plan's
  ``handoff``, ``streaming.placement``) is neither reconciled nor removed: the
  two evaluators' changes meet in seq order, an arriving query's held back
  (and saved with the state) until the evaluator handing it over has
  published through the seq it joined at;
* :meth:`StreamSession.apply` applies a batch in ``seq`` order, skipping seqs
  already applied (a batch replayed after a crash), and returns one
  :class:`BatchOutput`: the changes per query, aggregate values, WXQuery
  result items, dead letters and events, what to persist, the metrics' parts.
  Stream-level rejects (late op, a time the plan's clock guard refuses,
  duplicate key, delete of a missing key), parse rejects and the stream's
  poison ops become dead letters.

With queries of different windows an op gets one verdict, against the widest
window (``docs/sharing.md``).

An XML stream's item ops (``{"op":"item","xml":...}``, written by the XML
ingest before each item's mapped inserts) go to the stream's WXQuery
subscriptions (:class:`~streaming.wxquery.live.StreamSubscriptions`), not to
the engine, once their time passes the stream clock's judgement (a late item
or one the clock guard refuses is a dead letter, as its inserts will be).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from .asc.predicates import PredicateError
from .evaluate.results import Result
from .events import (DEAD_LETTER_LINE_CHARS, AggregateValue, BatchMetrics, DeadLetter, ResultView, SharingReport,
                     SubscriptionResult, TupleView, change_json, result_key)
from .handoff import ArrivingQueries
from .ops import Op, OpRejected
from .parsed import ParsedOp
from .schema import Schema
from .sharing.engine import SharedEngine
from .sharing.properties import (AggregateProperties, EvaluatorPlan, QueryProperties, aggregate_properties,
                                 query_properties)
from .sharing.report import sharing_report
from .stored_tuples import StoredTuple, StoredTuples, TupleId
from .wxquery.live import StreamSubscriptions

__all__ = ["ParseSpec", "SavedState", "StateWrite", "PlanChange", "BatchOutput", "Change",
           "group_keywords", "plan_properties", "plan_subscriptions", "ResultViews", "StreamSession"]

#: A serialized change of one query: (kind, result key, payload JSON, seq).
Change = tuple[str, str, str, int]


@dataclass(frozen=True, slots=True)
class ParseSpec:
    """What the executors parse a batch with: plan version, schema, vocabulary and selection constructs."""

    version: int
    schema: dict[str, Any]
    keywords: tuple[str, ...]
    selection: dict[str, Any]


@dataclass(slots=True)
class SavedState:
    """What a state store holds for one evaluator: its stored tuples (:data:`StoredTuple`), the last
    applied seq, the stream clock, the aggregate windows, the seq each query handed over to it joined at,
    the changes of those it holds until their source has published through that seq, and the aggregate
    values of a batch that died before publishing them (its outbox)."""

    seq: int = -1
    clock: float | None = None
    aggregates: dict[str, Any] = field(default_factory=dict)
    joined: dict[int, int] = field(default_factory=dict)
    held: dict[int, list[Change]] = field(default_factory=dict)
    outbox: list[AggregateValue] = field(default_factory=list)
    tuples: dict[TupleId, StoredTuple] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StateWrite:
    """What a batch changed in the saved state: tuples written or deleted (None), the applied
    seq, the values it produced (the outbox), the aggregate windows (None: no aggregate class), the
    stream clock (None: no op yet) and the held changes (None: unchanged)."""

    tuples: Mapping[TupleId, StoredTuple | None]
    seq: int
    outbox: Sequence[AggregateValue]
    aggregates: dict[str, Any] | None
    clock: float | None
    held: dict[int, list[Change]] | None


@dataclass(frozen=True, slots=True)
class PlanChange:
    """What adopting a plan asks the publisher and the store to do, in this order: queries whose live set
    empties (removed), the new hand-off seqs (None: unchanged), the held changes released (per query, in
    seq order), the queries whose live set is made equal to the engine's, at ``seq``."""

    seq: int
    cleared: tuple[int, ...]
    joined: dict[int, int] | None
    released: dict[int, list[Change]]
    reconciled: dict[int, list[ResultView]]


@dataclass(slots=True)
class BatchOutput:
    """One applied batch: the changes per query (in seq order), the queries whose live set is then made
    equal to the engine's at the applied seq (released after being rebuilt while held), aggregate values,
    WXQuery result items, the stream events to send (dead letters, selection events), what to persist,
    and the metrics' parts."""

    changes: dict[int, list[Change]]
    reconciled: dict[int, list[ResultView]]
    values: list[AggregateValue]
    items: list[SubscriptionResult]
    events: list[Any]
    dead_letters: int
    input_rows: int
    class_evaluations: int
    apply_ms: float

    def metrics(self, session: "StreamSession", evaluator_id: int, batch_id: int, breakdown_ms: dict[str, float],
                duration_ms: float, ts: float) -> BatchMetrics:
        """The batch's metrics, with the session's state as it is now."""
        return BatchMetrics(
            evaluator=evaluator_id,
            stream=session.stream_id,
            batch_id=batch_id,
            input_rows=self.input_rows,
            rows_per_second=self.input_rows / (duration_ms / 1000) if duration_ms > 0 else 0.0,
            duration_ms=duration_ms,
            breakdown_ms=breakdown_ms,
            dead_letters=self.dead_letters,
            state=session.state(self.class_evaluations),
            ts=ts,
        )


def plan_properties(plan: EvaluatorPlan, schema: Schema) -> tuple[
        list[QueryProperties], list[QueryProperties], list[AggregateProperties], dict[int, str], dict[int, str]]:
    """The plan's queries, the stream's queries placed elsewhere and the aggregates as properties, with
    the errors of those that cannot be evaluated (a bad query must not stop the others)."""
    queries, query_errors = [], {}
    for entry in plan.queries:
        try:
            queries.append(query_properties(entry, schema))
        except (ValueError, PredicateError) as exc:
            query_errors[entry.id] = f"{type(exc).__name__}: {exc}"
    others = []
    for entry in plan.others:
        try:
            others.append(query_properties(entry, schema))
        except (ValueError, PredicateError):  # reported by the evaluator it is placed on
            pass
    by_id = {q.id: q for q in queries}
    aggregates, aggregate_errors = [], {}
    for agg in plan.aggregates:
        try:
            aggregates.append(aggregate_properties(agg, schema, by_id))
        except (ValueError, PredicateError) as exc:
            aggregate_errors[agg.id] = f"{type(exc).__name__}: {exc}"
    return queries, others, aggregates, query_errors, aggregate_errors


class ResultViews:
    """Results as shown (values and the class's keyword hits) with their JSON, made once per class and
    result for all the class's queries; cleared when the batch is out or the plan changes."""

    def __init__(self, engine: SharedEngine) -> None:
        self.engine = engine
        self.words = {bit: word for word, bit in engine.vocabulary.items()}  # vocabulary bit -> keyword
        self._made: dict[tuple[Result, int], tuple[ResultView, str]] = {}  # (result, class) -> view, its JSON

    def clear(self) -> None:
        self._made.clear()

    def live_adds(self, qids: Iterable[int], stored: StoredTuples, at_most: int) -> dict[int, dict[str, str]]:
        """Each query's live results as its live set holds them (result key -> add payload), each added at
        the seq its newest tuple was stored at (``at_most`` if that is later); clears the views made."""
        out = {}
        for qid in qids:
            adds = {}
            for result in self.engine.results(qid):
                view, view_json = self.of(qid, result)
                born = max((stored[t][0] for t in result.tuples if t in stored), default=at_most)
                adds[view.key] = change_json("add", qid, min(born, at_most), view_json)
            out[qid] = adds
        self.clear()
        return out

    def of(self, qid: int, result: Result) -> tuple[ResultView, str]:
        """The result as shown for ``qid``, and its JSON."""
        engine = self.engine
        cls = engine.class_of[qid]
        cached = self._made.get((result, cls.index))
        if cached is not None:
            return cached
        rows = engine.store.rows
        bits = getattr(cls, "keyword_bits", 0)
        tuples = []
        for relation, key in result.tuples:
            row = rows[relation].get(key)
            values = dict(row.values) if row is not None else {}
            mask = row.mask & bits if row is not None else 0
            hits = sorted(self.words[b] for b in range(mask.bit_length()) if mask >> b & 1)
            tuples.append(TupleView(relation=relation, key=key, values=values, hits=hits))
        edges = [((a[0], a[1]), (b[0], b[1]), fk) for a, b, fk in result.edges]
        view = ResultView(key=result_key(result.tuples, result.edges), tuples=tuples, edges=edges)
        made = self._made[(result, cls.index)] = (view, view.model_dump_json())
        return made


def plan_subscriptions(plan: EvaluatorPlan, current: StreamSubscriptions | None) -> StreamSubscriptions | None:
    """The plan's WXQuery subscriptions (None: the plan has none, or no DTD): ``current`` while they and the DTD
    are unchanged, else compiled anew (their windows restart)."""
    entries = tuple((s.id, s.text) for s in plan.subscriptions)
    if not entries or not plan.stream.dtd:
        return None
    if current is None or current.key != (plan.stream.dtd, entries) or current.stream != plan.stream.name:
        return StreamSubscriptions(plan.stream.name, plan.stream.dtd, entries)
    return current


def group_keywords(plan: EvaluatorPlan | None) -> frozenset[str]:
    """Every keyword of every query of a plan (what executors classify tuples against)."""
    if plan is None:
        return frozenset()
    return frozenset(k.casefold() for q in plan.queries for k in q.keywords)


class StreamSession:
    """Every enabled query, aggregate and WXQuery subscription of one evaluator's plan, as a state machine.

    Not thread-safe: its runner holds a lock around each call.
    """

    _views: ResultViews  # made with the engine's vocabulary at each plan adopted (the sinks fire after)

    def __init__(self, sharing: str = "widen", clock: Callable[[], float] = time.time,
                 asc_sequence: str = "hybrid", asc_period: int = 10_000, asc_mu: float = 0.1):
        self.sharing = sharing
        self.clock = clock
        self.asc = (asc_sequence, asc_period, asc_mu)
        self.plan: EvaluatorPlan | None = None
        # replaced whole (never mutated), so the Spark driver thread reads it without the runner's lock
        self.parse_spec: ParseSpec | None = None
        self.applying_seq: int | None = None  # the op being applied (or the one that raised), else None
        self.reset()

    def reset(self) -> None:
        """Forget everything but the plan: an empty engine, no tuples, nothing applied."""
        self.schema: Schema | None = None
        self.stream_id: int | None = None
        self.engine: SharedEngine | None = None
        self.queries: dict[int, QueryProperties] = {}
        self.aggregates: dict[int, AggregateProperties] = {}
        self.stored = StoredTuples()
        self.applied_seq = -1
        self.query_errors: dict[int, str] = {}
        self.aggregate_errors: dict[int, str] = {}
        self.live_counts: dict[int, int] = {}
        self.arriving = ArrivingQueries()  # the queries a move hands over to this evaluator
        self.subscriptions: StreamSubscriptions | None = None  # the WXQuery subscriptions of an XML stream
        self._seq = -1
        self._pending: dict[int, list[Change]] = {}
        self._values: list[AggregateValue] = []
        self._items: list[SubscriptionResult] = []
        self._trust_selection = False
        self._dropped = 0
        self._narrow = 0
        self._clock: float | None = None
        self._saved_aggregates: dict[str, Any] = {}

    # ----------------------------------------------------------- plan and state

    @property
    def plan_version(self) -> int:
        return self.plan.version if self.plan else 0

    @property
    def keywords(self) -> frozenset[str]:
        return group_keywords(self.plan)

    @property
    def event_time(self) -> float | None:
        return self.engine.last_ts if self.engine is not None else None

    @property
    def held(self) -> dict[int, list[Change]]:
        """The changes held of each query handed over to this evaluator (:class:`ArrivingQueries`)."""
        return self.arriving.held

    def restore(self, saved: SavedState) -> None:
        """Take the state a store saved (before the first plan is adopted)."""
        self.applied_seq = saved.seq
        self._clock = saved.clock
        self._saved_aggregates = dict(saved.aggregates)
        self.arriving.restore(saved.joined, saved.held)
        self.stored.restore(saved.tuples)

    def adopt(self, plan: EvaluatorPlan, force: bool = False, source_published: int = -1) -> PlanChange | None:
        """Adopt a plan; start, move and stop queries as it says. None if it is the one adopted.

        ``source_published``: the last seq whose changes the plan's
        ``handoff.source`` has published (its joining queries are held until
        it reaches the seq they joined at).
        """
        if not force and self.plan is not None and plan.version == self.plan.version:
            return None
        schema = Schema.from_dict(plan.stream.schema_)
        previous = set(self.queries)
        fresh = self.engine is None or self.schema is None or self.schema.to_dict() != schema.to_dict()
        if fresh:
            self._new_engine(schema)
        assert self.engine is not None
        self.engine.set_guard(plan.stream.clock)
        self.plan = plan
        self.stream_id = plan.stream.id
        queries, others, aggregates, self.query_errors, self.aggregate_errors = plan_properties(plan, schema)
        by_id = {q.id: q for q in queries}
        leaving = previous - set(by_id)
        for qid, query in by_id.items():
            if self.queries.get(qid, query) != query:  # edited: what it holds was made by its old definition
                self.arriving.drop_held(qid)
        narrow_now = plan.narrow != self._narrow and not fresh
        self._narrow = plan.narrow
        rebuilt = self.engine.set_plan(queries, aggregates, narrow_now=narrow_now, others=others)
        self.queries = by_id
        self.aggregates = {a.id: a for a in aggregates}
        self._views = ResultViews(self.engine)  # the vocabulary may have changed
        if fresh:
            self.engine.restore(self.stored.inserts(schema), self._clock)
            self.engine.restore_aggregates(self._saved_aggregates)
            self._saved_aggregates = {}
            rebuilt = set(by_id)
        kept = set(plan.handoff.leaving) | set(plan.frozen)
        cleared = []
        for qid in sorted(leaving):
            if qid not in kept:
                cleared.append(qid)
            self.live_counts.pop(qid, None)
            self._pending.pop(qid, None)
            self.arriving.leave(qid)
        joined, not_reconciled = self.arriving.take_over(set(plan.handoff.joining), rebuilt, fresh, self.applied_seq,
                                                         source_published)
        for qid in not_reconciled:
            self.live_counts[qid] = len(self.engine.results(qid))
        rebuilt -= not_reconciled
        released, rebuilt_while_held = self.arriving.release(source_published)
        reconciled = self._reconcile(rebuilt | rebuilt_while_held)
        self.subscriptions = plan_subscriptions(plan, self.subscriptions)
        self._set_parse_spec()
        return PlanChange(max(self.applied_seq, 0), tuple(cleared), joined, released, reconciled)

    def _reconcile(self, query_ids: Iterable[int]) -> dict[int, list[ResultView]]:
        """Each query's live set as the engine holds it (what its published one is made equal to)."""
        assert self.engine is not None
        out = {}
        for qid in sorted(query_ids):
            if qid not in self.queries:
                continue
            results = self.engine.results(qid)
            self._pending.pop(qid, None)
            self.live_counts[qid] = len(results)
            out[qid] = [self._view(qid, r) for r in results]
        return out

    def selection_plan(self) -> dict[str, Any]:
        """The selection constructs and sequences the executors use for the next batch."""
        selection = self.engine.admission.selection if self.engine is not None else None
        return selection.executor_plan() if selection is not None else {}

    def _set_parse_spec(self) -> None:
        assert self.plan is not None
        self.parse_spec = ParseSpec(self.plan.version, self.plan.stream.schema_, tuple(sorted(self.keywords)),
                                    self.selection_plan())

    def _new_engine(self, schema: Schema) -> None:
        """The first plan, or a new schema: a fresh engine (it takes back the stored tuples that still parse)."""
        kind, period, mu = self.asc
        if self.engine is not None:
            self._clock = self.engine.last_ts
        self.schema = schema
        self.engine = SharedEngine(schema, self.sharing, delivery_sink=self._on_delivery, aggregate_sink=self._on_value,
                                   forget=self.stored.forget, selection_kind=kind, selection_period=period,
                                   selection_mu=mu)
        self.queries = {}
        self.aggregates = {}

    # ----------------------------------------------------------- engine sinks

    def _on_delivery(self, receivers: int, kind: str, result: Result) -> None:
        """A class's result added or removed for the queries of the mask ``receivers`` (members of that
        class): its view made once, a change line per query."""
        assert self.engine is not None
        qids = self.engine.query_ids(receivers)
        view, view_json = self._views.of(qids[0], result)
        change = "add" if kind == "add" else "remove"
        step = 1 if kind == "add" else -1
        seq, key, pending, counts = self._seq, view.key, self._pending, self.live_counts
        for qid in qids:
            pending.setdefault(qid, []).append((kind, key, change_json(change, qid, seq, view_json), seq))
            counts[qid] = counts.get(qid, 0) + step

    def _on_value(self, aggregate_id: int, window_end: float, value: Any) -> None:
        assert self.stream_id is not None
        self._values.append(AggregateValue(stream=self.stream_id, aggregate=aggregate_id, seq=self._seq,
                                           window_end=window_end, value=value, ts=self.clock()))

    def _view(self, qid: int, result: Result) -> ResultView:
        return self._views.of(qid, result)[0]

    # ----------------------------------------------------------- batches

    def apply(
        self,
        rows: Iterable[ParsedOp],
        poison: Mapping[int, str] | None = None,
        selection_stats: Sequence[tuple[str, dict[str, Any]]] = (),
        parsed_with_version: int | None = None,
        before_op: Callable[[int], None] | None = None,
        source_published: int = -1,
    ) -> BatchOutput:
        """Apply one batch in seq order; its changes, values, items, events and metrics' parts.

        ``poison``: the stream's poison ops (seq -> reason), set aside as
        dead letters. ``before_op(seq)`` is called before each op is applied
        (the runner of a guarded batch names the op it is in).
        ``selection_stats`` are the executors' ASC statistics per relation;
        the executors' bitmaps and keyword hits (``ParsedOp.queries``,
        ``ParsedOp.hits``) are trusted only if they were computed with the
        current plan (``parsed_with_version``). An exception while applying
        an op leaves :attr:`applying_seq` on that op. ``source_published``
        is as in :meth:`adopt`: the changes of a query handed over to this
        evaluator are held until it reaches the query's join seq, then
        released in front of the batch's.
        """
        if self.plan is None or self.engine is None:
            raise RuntimeError("the session has no plan")
        poison = poison or {}
        self._trust_selection = parsed_with_version == self.plan_version
        self._dropped = 0
        evaluations = self.engine.class_evaluations
        rows = list(rows)
        started = time.perf_counter()
        ordered = sorted((r for r in rows if r.seq is not None), key=lambda r: r.seq)
        dead: list[ParsedOp] = [r for r in rows if r.seq is None]
        for row in ordered:
            if row.seq <= self.applied_seq:
                continue
            self.applying_seq = row.seq
            if before_op is not None:
                before_op(row.seq)
            if row.seq in poison:  # it stalled or crashed this stream's evaluators: set aside
                dead.append(ParsedOp(row.seq, row.line, row.op, poison[row.seq]))
            elif row.op is not None:  # a reject the pre-processor reported may still move the clock
                reason = self.apply_op(row)
                if reason is not None and not row.reported:
                    dead.append(ParsedOp(row.seq, row.line, row.op, reason))
            elif not row.reported:
                dead.append(row)
            self.applied_seq = row.seq
        self.applying_seq = None
        apply_ms = (time.perf_counter() - started) * 1000
        selection = self.engine.admission.selection
        if self._trust_selection and selection is not None:
            for relation, stats in selection_stats:
                selection.observe(relation, stats)
        self.engine.admission.flush()
        self._set_parse_spec()
        items, self._items = self._items, []
        now = self.clock()
        events: list[Any] = [  # every evaluator of a stream rejects the same ops: the primary says so
            DeadLetter(stream=self.stream_id, seq=row.seq, line=row.text()[:DEAD_LETTER_LINE_CHARS],
                       reason=row.reason or "", ts=now)
            for row in dead
        ] if self.plan.primary else []
        if selection is not None:
            events += selection.drain_events(self.stream_id, now)
        changes, self._pending = self._pending, {}
        reconciled = self._reconcile(self.arriving.hold(changes, source_published))
        values, self._values = self._values, []
        self._views.clear()
        return BatchOutput(changes=changes, reconciled=reconciled, values=values, items=items, events=events,
                           dead_letters=len(dead), input_rows=len(rows),
                           class_evaluations=self.engine.class_evaluations - evaluations, apply_ms=apply_ms)

    def apply_op(self, row: ParsedOp) -> str | None:
        """Apply one op to the engine; the reject reason, or None."""
        op = row.op
        assert op is not None and row.seq is not None and self.engine is not None
        if op.kind == "item":
            return self._apply_item(row.seq, op)
        if op.kind == "tick":  # an op the stream's pre-processor dropped: only its time is left
            self._seq = row.seq
            try:
                self.engine.advance(op.ts)
            except OpRejected as exc:
                return str(exc)
            return None
        trusted = self._trust_selection and op.kind == "insert"
        qmask = row.queries if trusted else None
        self._seq = row.seq
        try:
            self.engine.apply(op, qmask=qmask, hits=row.hits if trusted else None)
        except OpRejected as exc:
            return str(exc)
        ident = (op.relation, op.key)
        if op.kind == "insert":
            assert op.values is not None
            self.stored.put(ident, row.seq, op.ts, op.values)
            if not self.engine.store.rows[op.relation][op.key].qmask:
                self._dropped += 1
        return None

    def _apply_item(self, seq: int, op: Op) -> str | None:
        """Evaluate the WXQuery subscriptions on one XML item; the reason it was refused, or None.

        The item's time is judged first, against the stream clock as its
        mapped inserts (the next ops, at the same ``ts``) will be: a late
        item, or one the clock guard refuses, reaches no subscription. The
        item op itself does not move the clock; its inserts do.
        """
        assert self.engine is not None
        reason = self.engine.clock_reason(op.ts)
        if reason is not None:
            return f"item: {reason}"
        if self.subscriptions is None or self.stream_id is None:
            return None
        assert op.values is not None
        out = self.subscriptions.push(seq, op.values["xml"])
        now = self.clock()
        for sid, rows in out.results.items():
            self._items += [SubscriptionResult(subscription=sid, stream=self.stream_id, seq=seq, item=row, ts=now)
                            for row in rows]
        return out.reason

    def state_write(self, outbox: Sequence[AggregateValue] | None = None, whole: bool = False) -> StateWrite:
        """What changed in the saved state since the last call (``whole``: all of it, for a store that lost
        it): the tuples, the applied seq, the values not yet published (``outbox``; None: those made since
        the last batch), the aggregate windows, the stream clock and the held changes."""
        tuples = self.stored.take_changed()
        held = self.arriving.held_to_save()
        engine = self.engine
        return StateWrite(tuples=dict(self.stored) if whole else tuples, seq=self.applied_seq,
                          outbox=list(self._values if outbox is None else outbox),
                          aggregates=engine.aggregate_state() if engine is not None and engine.aggregate_classes
                          else None,
                          clock=self.event_time, held=held)

    def live_adds(self, at_most: int) -> dict[int, dict[str, str]]:
        """Each query's live set as it holds its results (:meth:`ResultViews.live_adds`)."""
        return self._views.live_adds(sorted(self.queries), self.stored, at_most)

    # ----------------------------------------------------------- inspection

    def report(self, now: float, evaluator_id: int) -> SharingReport:
        """The sharing classes and what they save against per-query evaluation (the Sharing page)."""
        assert self.engine is not None and self.stream_id is not None
        return sharing_report(self.engine, self.stream_id, now, evaluator_id, self.plan_version)

    def state(self, class_evaluations: int = 0) -> dict[str, dict[str, Any]]:
        """The stream (store, seq, selection, errors, sharing) and per query its live results and class."""
        assert self.engine is not None
        out: dict[str, dict[str, Any]] = {"stream": {
            "stored_tuples": len(self.engine.store), "applied_seq": self.applied_seq,
            "dropped_by_selection": self._dropped,
            "query_errors": {str(q): e for q, e in self.query_errors.items()},
            "aggregate_errors": {str(a): e for a, e in self.aggregate_errors.items()},
            "sharing": self.sharing, "classes": len(self.engine.live_classes()),
            "class_evaluations": class_evaluations,
        }}
        if self.subscriptions is not None:
            out["stream"]["wxquery"] = self.subscriptions.stats()
        for qid, query in self.queries.items():
            cls = self.engine.class_of[qid]
            out[str(qid)] = {"live_results": self.live_counts.get(qid, 0), "class": cls.index,
                             "class_members": len(cls.members), "keywords": sorted(query.keywords),
                             "engine": "filter" if query.is_filter else "shared"}
        return out

