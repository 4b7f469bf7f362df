"""The group evaluator: a stream's plan, fed batch by batch, publishing to Redis.

This is the Spark-free core of an evaluator process (README, "How it
runs"); ``streaming.spark`` only feeds it parsed batches. Every query
and aggregate subscription of the stream is evaluated by one
:class:`~streaming.sharing.engine.SharedEngine` (one store, one window, one
keyword classification and one lattice per sharing class). Per batch:

1. re-read the plan (:class:`~streaming.sharing.properties.EvaluatorPlan`); a
   query that joins a running class gets that class's results at once, one
   that needs a new or widened class gets it evaluated with CNEvalStatic over
   the stored tuples; the published live set of each such query is
   reconciled with the engine's; a query that leaves because it was removed
   gets a remove for each of its live results (its change stream keeps the
   history), one that was disabled (the plan's ``frozen``) keeps them as they
   were until it is enabled again; a query that arrives or leaves by a class
   move between the stream's evaluators (the plan's ``handoff``,
   ``streaming.placement``) is neither reconciled nor removed: the two
   evaluators' changes meet in seq order;
2. apply the ops in ``seq`` order, skipping seqs already applied (a batch
   replayed by Spark after a crash); stream-level rejects (late op, a time
   the plan's clock guard refuses, duplicate key, delete of a missing key),
   parse rejects and the stream's poison ops (set aside by the supervisor
   after they stalled or crashed an evaluator repeatedly, ``docs/ops.md``)
   become dead letters; an error while applying an op names that op in
   ``bus.Keys.failed_op`` before it ends the process;
3. persist the stored tuples with the last applied seq (one MULTI), then
   publish each query's changes (live set + change stream, one atomic step per
   query), aggregate values, dead letters and the batch metrics.

The stored tuples give the values shown in results and, after a restart,
the state the engine is rebuilt from. A Redis that lost them while the
evaluator ran (a crash without persistence, an empty Redis put in its place:
the state hash lost the field written when the evaluator loaded it) is found
at the next batch: the evaluator clears what it wrote there since, starts
over from an empty engine and applies the stream's stored ops again from the
first (landing files, archived ones included), publishing every change
again, so the live sets and change streams are rebuilt whole (docs/ops.md,
"Redis"). Because the tuples are persisted before the changes are published,
a crash in between is repaired by the reconcile of
the restart, and a replayed batch is not applied twice. The running windows
of the aggregate subscriptions and the values a batch produced are persisted
in the same step, and values are published idempotently (at most one per
subscription and window end), so they too survive a crash exactly once.

With queries of different windows an op gets one verdict, against the widest
window (``docs/sharing.md``).

An XML stream's item ops (``{"op":"item","xml":...}``, written by the XML
ingest before each item's mapped inserts) go to the stream's WXQuery
subscriptions (:class:`~streaming.wxquery.live.StreamSubscriptions`), not to
the engine, once their time passes the stream clock's judgement (a late item
or one the clock guard refuses is a dead letter, as its inserts will be);
their result items are published per subscription
(``bus.publish_subscription_results``, entry ids by seq, so at most once)
before the batch's state is saved.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import orjson
import redis

from . import bus
from .asc.predicates import PredicateError
from .evaluate.results import Result
from .events import (DEAD_LETTER_LINE_CHARS, AggregateValue, BatchMetrics, DeadLetter, ResultView, SharingReport,
                     SubscriptionResult, TupleView, change_json, result_key)
from .ops import Op, OpRejected
from .parsed import ParsedOp, parse_stored_line
from .schema import Schema
from .sharing.engine import SharedEngine
from .sharing.properties import (AggregateProperties, EvaluatorPlan, QueryProperties, aggregate_properties,
                                 query_properties)
from .sharing.report import sharing_report
from .sources import input_kind
from .wxquery.live import StreamSubscriptions

__all__ = ["ParseSpec", "group_keywords", "GroupEvaluator"]

_PUBLISH_CHUNK = 2_000
_REPLAY_CHUNK = 20_000  # stored ops applied per batch when the evaluator rebuilds from the landing files
_REPORT_SECONDS = 10.0
# A field of the state hash written when the evaluator loads (or rebuilds) its state, never by a batch: a
# batch whose writes a Redis client retried on an empty Redis re-creates the hash, not this field.
_LOADED = bus.LOADED_FIELD


@dataclass(frozen=True, slots=True)
class ParseSpec:
    """What the executors parse a batch with: plan version, schema, vocabulary and selection constructs."""

    version: int
    schema: dict[str, Any]
    keywords: tuple[str, ...]
    selection: dict[str, Any]


def group_keywords(plan: dict[str, Any] | EvaluatorPlan | None) -> frozenset[str]:
    """Every keyword of every query of a plan (what executors classify tuples against)."""
    if plan is None:
        return frozenset()
    if isinstance(plan, dict):
        return frozenset(k.casefold() for q in plan.get("queries", []) for k in q["keywords"])
    return frozenset(k.casefold() for q in plan.queries for k in q.keywords)


def _tuple_key(relation: str, key: Any) -> bytes:
    """The tuple's field in the evaluator's Redis hash of stored tuples."""
    return orjson.dumps((relation, key))


class GroupEvaluator:
    """Evaluates every enabled query of one stream's plan; the Spark driver feeds it batches.

    Thread-safe: the heartbeat thread calls :meth:`refresh_plan` between
    batches (so plan changes apply with no data flowing) under the same lock.
    """

    def __init__(
        self,
        client: redis.Redis,
        evaluator_id: int,
        sharing: str = "widen",
        clock: Callable[[], float] = time.time,
        asc_sequence: str = "hybrid",
        asc_period: int = 10_000,
        asc_mu: float = 0.1,
    ):
        self.client = client
        self.evaluator_id = evaluator_id
        self.sharing = sharing
        self.clock = clock
        self.asc = (asc_sequence, asc_period, asc_mu)
        self.lock = threading.RLock()
        self.plan: EvaluatorPlan | None = None
        self._plan_doc: dict[str, Any] | None = None  # the plan as read, to load again after a rebuild
        self.schema: Schema | None = None
        self.stream_id: int | None = None
        self.engine: SharedEngine | None = None
        self.queries: dict[int, QueryProperties] = {}
        self.aggregates: dict[int, AggregateProperties] = {}
        self.lines: dict[tuple[str, Any], str] = {}  # stored tuple -> its stored line
        self.applied_seq = -1
        # what the heartbeat reports (read without the lock): the seq applied and saved by the last batch, when
        # that batch finished, and the op being applied now (None between batches)
        self.saved_seq = -1
        self.progress_at: float | None = None
        self.applying_seq: int | None = None
        self.query_errors: dict[int, str] = {}
        self.aggregate_errors: dict[int, str] = {}
        self.live_counts: dict[int, int] = {}
        self._seq = -1
        self._pending: dict[int, list[tuple[str, str, str, int]]] = {}  # query -> (kind, result key, payload, seq)
        self.joined: dict[int, int] = {}  # query taken over from another evaluator -> the seq it joined at
        self._values: list[AggregateValue] = []
        self._views: dict[tuple[Result, int], tuple[ResultView, str]] = {}  # (result, class) -> view, its JSON
        self._words: dict[int, str] = {}
        self._dirty: set[tuple[str, Any]] = set()
        self._trust_selection = False
        self._dropped = 0
        self._reported = 0.0
        self._narrow = 0
        self._clock: float | None = None
        self._saved_aggregates: dict[str, Any] | None = None
        self.subscriptions: StreamSubscriptions | None = None  # the WXQuery subscriptions of an XML stream
        self._subscription_results: list[SubscriptionResult] = []
        # replaced whole (never mutated), so the Spark driver thread reads it without the lock
        self.parse_spec: ParseSpec | None = None

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

    def start(self) -> None:
        """Load the persisted tuples and the plan, evaluate every class at once, reconcile live sets."""
        with self.lock:
            state = self.client.hgetall(bus.Keys.evaluator_state(self.evaluator_id))
            self.applied_seq = self.saved_seq = int(state.get("seq", -1))
            self._clock = float(state["clock"]) if state.get("clock") else None
            self._saved_aggregates = orjson.loads(state["aggregates"]) if state.get("aggregates") else {}
            self.joined = {int(q): seq for q, seq in orjson.loads(state["joined"]).items()} if state.get("joined") else {}
            outbox = orjson.loads(state["outbox"]) if state.get("outbox") else []
            stored = self.client.hgetall(bus.Keys.evaluator_tuples(self.evaluator_id))
            self.lines = {tuple(orjson.loads(field)): line for field, line in stored.items()}
            self.client.hset(bus.Keys.evaluator_state(self.evaluator_id), _LOADED, 1)
            if not self.refresh_plan(force=True):
                raise RuntimeError(f"evaluator {self.evaluator_id} has no plan in Redis")
            if outbox and self.stream_id is not None:  # values persisted by a batch that died before publishing
                bus.publish_aggregate_values(self.client, self.stream_id,
                                             [AggregateValue.model_validate(v) for v in outbox])

    def refresh_plan(self, force: bool = False, raw: dict[str, Any] | None = None) -> bool:
        """Re-read the plan (or load ``raw``); start, move and stop queries as it says. True if it changed."""
        with self.lock:
            raw = raw or bus.read_plan(self.client, self.evaluator_id)
            if raw is None or (not force and self.plan is not None and raw["version"] == self.plan.version):
                return False
            plan = EvaluatorPlan.model_validate(raw)
            schema = Schema.from_dict(plan.stream.schema_)
            previous = set(self.queries)
            fresh = self.engine is None or self.schema is None or self.schema.to_dict() != schema.to_dict()
            if fresh:
                self._new_engine(schema)
            assert self.engine is not None
            self.engine.set_guard(plan.stream.clock)
            self.plan, self._plan_doc = plan, raw
            self.stream_id = plan.stream.id
            queries, self.query_errors = [], {}
            for entry in plan.queries:
                try:
                    queries.append(query_properties(entry, schema))
                except (ValueError, PredicateError) as exc:  # a bad query must not stop the others
                    self.query_errors[entry.id] = f"{type(exc).__name__}: {exc}"
            others = []
            for entry in plan.others:
                try:
                    others.append(query_properties(entry, schema))
                except (ValueError, PredicateError):  # reported by the evaluator it is placed on
                    pass
            by_id = {q.id: q for q in queries}
            aggregates, self.aggregate_errors = [], {}
            for agg in plan.aggregates:
                try:
                    aggregates.append(aggregate_properties(agg, schema, by_id))
                except (ValueError, PredicateError) as exc:
                    self.aggregate_errors[agg.id] = f"{type(exc).__name__}: {exc}"
            leaving = previous - set(by_id)
            narrow_now = plan.narrow != self._narrow and not fresh
            self._narrow = plan.narrow
            rebuilt = self.engine.set_plan(queries, aggregates, narrow_now=narrow_now, others=others)
            self.queries = by_id
            self.aggregates = {a.id: a for a in aggregates}
            self._words = {bit: word for word, bit in self.engine.vocabulary.items()}
            self._views.clear()
            if fresh:
                self.engine.restore(self._stored_ops(schema), self._clock)
                self.engine.restore_aggregates(self._saved_aggregates or {})
                self._saved_aggregates = {}
                rebuilt = set(by_id)
            kept = set(plan.handoff.leaving) | set(plan.frozen)
            for qid in sorted(leaving):
                if qid not in kept:
                    bus.reconcile(self.client, qid, max(self.applied_seq, 0), ())
                self.live_counts.pop(qid, None)
                self._pending.pop(qid, None)
            self._take_over(set(plan.handoff.joining), rebuilt, fresh)
            self._reconcile(rebuilt)
            self._refresh_subscriptions(plan)
            self._set_parse_spec()
            self._report_now()
            return True

    def _report_now(self) -> None:
        """Write and announce the sharing report (at once when a plan is adopted: pages tell a query's class by it)."""
        report = self.report(self.clock())
        bus.write_sharing_report(self.client, report)
        bus.publish_stream_event(self.client, report.stream, report)

    def lost_state(self) -> bool:
        """Whether Redis lost the state this evaluator persisted (it came back empty, or another took its place)."""
        return self.applied_seq >= 0 and not self.client.hexists(bus.Keys.evaluator_state(self.evaluator_id), _LOADED)

    def rebuild(self, lines: Sequence[str]) -> int:
        """Start over from an empty engine and apply ``lines`` (stored ops from the stream's first), publishing
        their changes again; returns how many were applied.

        What Redis lost is rebuilt this way: the tuples and applied seq, the
        live sets and change streams (each change again, in seq order, under
        new entry ids), the published seqs. Readers of the feeds resynchronise
        from a snapshot and the history skips what it already holds.
        """
        with self.lock:
            assert self._plan_doc is not None
            # what a batch wrote to the new Redis before the loss was seen goes: its published seqs would
            # hold back every change of the replay
            stale = [bus.Keys.evaluator_tuples(self.evaluator_id), bus.Keys.evaluator_state(self.evaluator_id)]
            stale += [key for qid in self.queries for key in
                      (bus.Keys.live(qid), bus.Keys.changes(qid), bus.Keys.published_seq(qid))]
            with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(*stale)
                pipe.hset(bus.Keys.evaluator_state(self.evaluator_id), _LOADED, 1)
                pipe.execute()
            self.engine = self.schema = None
            self.queries, self.aggregates, self.lines, self._dirty = {}, {}, {}, set()
            self.applied_seq, self._clock, self._saved_aggregates, self.joined = -1, None, {}, {}
            self.live_counts, self._pending, self._values = {}, {}, []
            self.subscriptions, self._subscription_results = None, []
            self._views.clear()
            self.refresh_plan(force=True, raw=self._plan_doc)
            for i in range(0, len(lines), _REPLAY_CHUNK):
                assert self.schema is not None
                self.apply_batch(-1, [parse_stored_line(line, self.schema, self.keywords)
                                      for line in lines[i:i + _REPLAY_CHUNK]])
            return len(lines)

    def _rebuild_from_landing(self) -> None:
        """Redis lost this evaluator's state: rebuild it from every stored op it had applied."""
        assert self.plan is not None
        source = self.plan.stream.source
        lines = input_kind(source).replay(source, self.evaluator_id, self.applied_seq)
        if lines is None:
            raise RuntimeError(f"evaluator {self.evaluator_id}: Redis lost its state and its source "
                               f"({source.get('kind')}) cannot be read again from the first op")
        self.rebuild(lines)

    def _take_over(self, joining: set[int], rebuilt: set[int], fresh: bool) -> None:
        """Record the seq each query handed over to this evaluator joined at (in the state hash, for
        the supervisor, which ends the hand-off once the other evaluator has applied that seq).

        The evaluator handing a query over has published its changes up to
        there, so the query's live set is not reconciled (``rebuilt`` loses
        it) and only the changes of later ops are published. A fresh engine
        (a restart) reconciles as usual: the publish script drops whatever
        the other evaluator already published at a later seq.
        """
        arrived = {qid for qid in joining & rebuilt if qid not in self.joined}
        kept = {qid: seq for qid, seq in self.joined.items() if qid in joining}
        if not arrived and kept == self.joined:
            return
        self.joined = kept | {qid: self.applied_seq for qid in arrived}
        if not fresh:
            assert self.engine is not None
            for qid in arrived:
                self.live_counts[qid] = len(self.engine.results(qid))
            rebuilt -= arrived
        self.client.hset(bus.Keys.evaluator_state(self.evaluator_id), "joined",
                         orjson.dumps(self.joined, option=orjson.OPT_NON_STR_KEYS))

    def _refresh_subscriptions(self, plan: EvaluatorPlan) -> None:
        """Compile the plan's WXQuery subscriptions anew when they or the DTD changed (their windows restart)."""
        entries = tuple((s.id, s.text) for s in plan.subscriptions)
        if not entries or not plan.stream.dtd:
            self.subscriptions = None
            return
        current = self.subscriptions
        if current is None or current.key != (plan.stream.dtd, entries) or current.stream != plan.stream.name:
            self.subscriptions = StreamSubscriptions(plan.stream.name, plan.stream.dtd, entries)

    def _set_parse_spec(self) -> None:
        assert self.plan is not None
        self.parse_spec = ParseSpec(self.plan.version, self.plan.stream.schema_, tuple(sorted(self.keywords)),
                                    self.selection_plan())

    def _stored_ops(self, schema: Schema) -> list[Op]:
        """The stored tuples as inserts in event-time order (lines that no longer parse are dropped)."""
        loaded = []
        for ident, line in list(self.lines.items()):
            row = parse_stored_line(line, schema, frozenset())
            if row.op is None or row.op.kind != "insert" or row.seq is None:
                del self.lines[ident]
                self._dirty.add(ident)
                continue
            loaded.append((row.op.ts, row.seq, row.op))
        loaded.sort(key=lambda item: (item[0], item[1]))
        return [op for _, _, op in loaded]

    def _new_engine(self, schema: Schema) -> None:
        """The first plan, or a new schema: a fresh engine (it takes back the stored tuples that still parse)."""
        kind, period, mu = self.asc
        if self.engine is not None:
            self._clock = self.engine.last_ts
        self.schema = schema
        self.engine = SharedEngine(schema, self.sharing, sink=self._on_change, aggregate_sink=self._on_value,
                                   forget=self._on_forget, selection_kind=kind, selection_period=period,
                                   selection_mu=mu)
        self.queries = {}
        self.aggregates = {}

    def _reconcile(self, query_ids: Iterable[int]) -> None:
        """Make each query's published live set equal the engine's (after a restart or a rebuild)."""
        assert self.engine is not None
        for qid in sorted(query_ids):
            if qid not in self.queries:
                continue
            results = self.engine.results(qid)
            self._pending.pop(qid, None)
            self.live_counts[qid] = len(results)
            bus.reconcile(self.client, qid, max(self.applied_seq, 0), [self._view(qid, r) for r in results])

    def selection_plan(self) -> dict[str, Any]:
        """The selection constructs and sequences the executors use for the next batch."""
        selection = self.engine.admission.selection if self.engine is not None else None
        return selection.executor_plan() if selection is not None else {}

    # ----------------------------------------------------------- engine sinks

    def _on_change(self, qid: int, kind: str, result: Result) -> None:
        view, view_json = self._view_json(qid, result)
        payload = change_json("add" if kind == "add" else "remove", qid, self._seq, view_json)
        self._pending.setdefault(qid, []).append((kind, view.key, payload, self._seq))
        self.live_counts[qid] = self.live_counts.get(qid, 0) + (1 if kind == "add" else -1)

    def _on_value(self, aggregate_id: int, window_end: float, value: Any) -> None:
        assert self.stream_id is not None
        self._values.append(AggregateValue(stream=self.stream_id, aggregate=aggregate_id, seq=self._seq,
                                           window_end=window_end, value=value, ts=self.clock()))

    def _on_forget(self, relation: str, key: Any) -> None:
        self.lines.pop((relation, key), None)
        self._dirty.add((relation, key))

    def _view(self, qid: int, result: Result) -> ResultView:
        return self._view_json(qid, result)[0]

    def _view_json(self, qid: int, result: Result) -> tuple[ResultView, str]:
        """The result as shown for ``qid`` (values and the class's keyword hits) and its JSON, made once
        per class and result for all the class's queries."""
        assert self.engine is not None
        cls = self.engine.class_of[qid]
        cached = self._views.get((result, cls.index))
        if cached is not None:
            return cached
        rows = self.engine.store.rows
        bits = getattr(cls, "keyword_bits", 0)
        tuples = []
        for relation, key in result.tuples:
            row = rows[relation].get(key)
            values = dict(row.values) if row is not None else {}
            mask = row.mask & bits if row is not None else 0
            hits = sorted(self._words[b] for b in range(mask.bit_length()) if mask >> b & 1)
            tuples.append(TupleView(relation=relation, key=key, values=values, hits=hits))
        edges = [((a[0], a[1]), (b[0], b[1]), fk) for a, b, fk in result.edges]
        view = ResultView(key=result_key(result.tuples, result.edges), tuples=tuples, edges=edges)
        made = self._views[(result, cls.index)] = (view, view.model_dump_json())
        return made

    # ----------------------------------------------------------- batches

    def apply_batch(
        self,
        batch_id: int,
        rows: Iterable[ParsedOp],
        parse_ms: float = 0.0,
        selection_stats: Sequence[tuple[str, dict[str, Any]]] = (),
        parsed_with_version: int | None = None,
        guarded: bool = False,
    ) -> BatchMetrics | None:
        """Apply one micro-batch and publish its effects; returns the metrics published.

        ``guarded`` (a restart's replay of what Spark had committed, the batch
        that may have ended the last process): each op is named in
        ``bus.Keys.failed_op`` before it is applied, so the supervisor knows
        the op even if the process is killed in it without a word.

        ``selection_stats`` are the executors' ASC statistics per relation;
        the executors' bitmaps and keyword hits (``ParsedOp.queries``,
        ``ParsedOp.hits``) are trusted only if they were computed with the
        current plan (``parsed_with_version``).
        """
        with self.lock:
            if self.lost_state():
                self._rebuild_from_landing()
            started = time.perf_counter()
            self.refresh_plan()
            if self.plan is None or self.engine is None:
                raise RuntimeError(f"evaluator {self.evaluator_id} has no plan in Redis")
            self._trust_selection = parsed_with_version == self.plan_version
            self._dropped = 0
            evaluations = self.engine.class_evaluations
            rows = list(rows)
            ordered = sorted((r for r in rows if r.seq is not None), key=lambda r: r.seq)
            dead: list[ParsedOp] = [r for r in rows if r.seq is None]
            failed_key = bus.Keys.failed_op(self.evaluator_id)
            poison = {int(seq): reason for seq, reason in
                      self.client.hgetall(bus.Keys.stream_poison(self.plan.stream.id)).items()}
            t_apply = time.perf_counter()
            try:
                for row in ordered:
                    if row.seq <= self.applied_seq:
                        continue
                    self.applying_seq = row.seq
                    if guarded:
                        self.client.set(failed_key, orjson.dumps({"seq": row.seq, "error": "killed while applying it"}))
                    if row.seq in poison:  # it stalled or crashed this stream's evaluators: set aside
                        dead.append(ParsedOp(row.seq, row.line, row.op, poison[row.seq]))
                    elif row.op is not None:  # a reject the pre-processor reported may still move the clock
                        reason = self._apply(row)
                        if reason is not None and not row.reported:
                            dead.append(ParsedOp(row.seq, row.line, row.op, reason))
                    elif not row.reported:
                        dead.append(row)
                    self.applied_seq = row.seq
            except Exception as exc:  # the process ends with it: name the op for the supervisor (docs/ops.md)
                self.client.set(failed_key,
                                orjson.dumps({"seq": self.applying_seq, "error": f"{type(exc).__name__}: {exc}"[:500]}))
                raise
            finally:
                self.applying_seq = None
            if guarded:
                self.client.delete(failed_key)
            t_persist = time.perf_counter()
            selection = self.engine.admission.selection
            if self._trust_selection and selection is not None:
                for relation, stats in selection_stats:
                    selection.observe(relation, stats)
            self.engine.admission.flush()
            self._set_parse_spec()
            # before the state: a batch replayed after a crash publishes none of them twice (ids by seq)
            bus.publish_subscription_results(self.client, self._subscription_results)
            self._subscription_results = []
            self._persist()
            self.saved_seq = self.applied_seq
            t_publish = time.perf_counter()
            try:
                bus.publish_serialized_changes(self.client, self._pending, _PUBLISH_CHUNK,
                                               bus.Keys.evaluator_state(self.evaluator_id))
            except bus.StateLost:  # Redis lost it during this batch: nothing of it was published
                self._pending = {}
                self._rebuild_from_landing()
            self._pending = {}
            self._views.clear()
            now = self.clock()
            events: list[Any] = [  # every evaluator of a stream rejects the same ops: the primary says so
                DeadLetter(stream=self.stream_id, seq=row.seq, line=row.line[:DEAD_LETTER_LINE_CHARS],
                           reason=row.reason or "", ts=now)
                for row in dead
            ] if self.plan.primary else []
            bus.publish_aggregate_values(self.client, self.stream_id, self._values)
            self._values = []
            if selection is not None:
                events += selection.drain_events(self.stream_id, now)
            if now - self._reported >= _REPORT_SECONDS:
                report = self.report(now)
                bus.write_sharing_report(self.client, report)
                events.append(report)
            if events:
                with self.client.pipeline(transaction=False) as pipe:
                    for event in events:
                        bus.publish_stream_event(pipe, self.stream_id, event)
                    pipe.execute()
            done = time.perf_counter()
            duration = (done - started) * 1000 + parse_ms
            metrics = BatchMetrics(
                evaluator=self.evaluator_id,
                stream=self.stream_id,
                batch_id=batch_id,
                input_rows=len(rows),
                rows_per_second=len(rows) / (duration / 1000) if duration > 0 else 0.0,
                duration_ms=duration,
                breakdown_ms={
                    "parse": parse_ms,
                    "plan": (t_apply - started) * 1000,
                    "apply": (t_persist - t_apply) * 1000,
                    "persist": (t_publish - t_persist) * 1000,
                    "publish": (done - t_publish) * 1000,
                },
                dead_letters=len(dead),
                state=self.state(self.engine.class_evaluations - evaluations),
                ts=now,
            )
            bus.publish_stream_event(self.client, self.stream_id, metrics)
            self.progress_at = time.time()
            return metrics

    def _apply(self, row: ParsedOp) -> str | None:
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
            self.lines[ident] = row.line
            self._dirty.add(ident)
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
            self._subscription_results += [SubscriptionResult(subscription=sid, stream=self.stream_id, seq=seq,
                                                              item=row, ts=now) for row in rows]
        return out.reason

    def _persist(self) -> None:
        """Write the changed tuples, the last applied seq and the event time in one MULTI."""
        tuples_key = bus.Keys.evaluator_tuples(self.evaluator_id)
        live: dict[bytes, str] = {}
        gone: list[bytes] = []
        for ident in self._dirty:
            line = self.lines.get(ident)
            if line is None:
                gone.append(_tuple_key(*ident))
            else:
                live[_tuple_key(*ident)] = line
        with self.client.pipeline(transaction=True) as pipe:
            if live:  # one HSET for the batch: a command per tuple cost more than the write itself
                pipe.hset(tuples_key, mapping=live)
            if gone:
                pipe.hdel(tuples_key, *gone)
            state: dict[str, Any] = {"seq": self.applied_seq,
                                     "outbox": orjson.dumps([v.model_dump() for v in self._values]).decode()}
            if self.engine is not None and self.engine.aggregate_classes:
                state["aggregates"] = orjson.dumps(self.engine.aggregate_state()).decode()
            if self.event_time is not None:
                state["clock"] = repr(self.event_time)
            pipe.hset(bus.Keys.evaluator_state(self.evaluator_id), mapping=state)
            pipe.execute()
        self._dirty.clear()

    # ----------------------------------------------------------- inspection

    def report(self, now: float) -> SharingReport:
        """The sharing classes and what they save against per-query evaluation (the Sharing page)."""
        assert self.engine is not None and self.stream_id is not None
        self._reported = now
        return sharing_report(self.engine, self.stream_id, now, self.evaluator_id, self.plan_version)

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
