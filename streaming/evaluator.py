"""The group evaluator: the queries of one stream, fed batch by batch, publishing to Redis.

This is the Spark-free core of an evaluator process (README, "How it runs");
``streaming.spark`` only feeds it parsed batches. Per batch:

1. re-read the plan (``bus.read_plan``); a query that joins starts with static
   evaluation over the tuples already in its window (``KeywordEngine.load``), an
   edited one restarts the same way, and the published live set is reconciled
   with the new engine's; a query that leaves (removed or disabled) gets a
   remove for each of its live results, so browsers see them end (its change
   stream keeps the history);
2. apply the ops in ``seq`` order, skipping seqs already applied (a batch
   replayed by Spark after a crash); stream-level rejects (late op, duplicate
   key, delete of a missing key) and parse rejects become dead letters;
3. persist the tuple store with the last applied seq (one MULTI), then publish
   each query's changes (live set + change stream, one atomic step per query),
   dead letters and the batch metrics.

Tuples are kept once per stream (the *store*) for as long as the widest window
of the plan (forever if a query has no window); they give the values and
keyword hits shown in results, the seed of joining queries, and after a restart
the state every engine is rebuilt from. Because the store is persisted before
the changes are published, a crash in between is repaired by the reconcile of
the restart, and a replayed batch is not applied twice.

Stream-level checks use the store, so when queries have different windows an
insert of a key that left a narrow window but not the widest one is rejected
for every query (a deliberate simplification: one verdict per op).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import orjson
import redis

from . import bus
from .asc.predicates import Predicate, holds, parse_predicate
from .engine import KeywordEngine, StreamEngine
from .evaluate.filtering import FilterEngine
from .events import (
    DEAD_LETTER_LINE_CHARS,
    BatchMetrics,
    DeadLetter,
    ResultAdded,
    ResultRemoved,
    ResultView,
    TupleView,
    result_key,
)
from .keywords import tuple_tokens
from .ops import Op, OpRejected, parse_op
from .schema import Schema
from .selection import GroupSelection
from .sources import SourceError, split_seq

__all__ = ["ParsedOp", "StoredTuple", "QuerySpec", "parse_stored_line", "group_keywords", "GroupEvaluator"]

_PUBLISH_CHUNK = 2_000


@dataclass(frozen=True, slots=True)
class ParsedOp:
    """One stored line after parsing: an op, or the reason it was rejected.

    ``hits`` are the group's keywords the inserted tuple contains (keyword
    classification, done where the line was parsed); ``queries`` the ids of
    the queries whose selection predicates it satisfies, when the executors
    evaluated them (None: not evaluated, the driver checks predicates itself).
    """

    seq: int | None
    line: str
    op: Op | None
    reason: str | None = None
    hits: tuple[str, ...] = ()
    queries: tuple[int, ...] | None = None


def parse_stored_line(line: str, schema: Schema, keywords: frozenset[str]) -> ParsedOp:
    """Parse and validate one stored line and classify its tuple against ``keywords``."""
    try:
        seq, obj = split_seq(line)
    except SourceError as exc:
        return ParsedOp(None, line, None, str(exc))
    try:
        op = parse_op(obj, schema)
    except OpRejected as exc:
        return ParsedOp(seq, line, None, str(exc))
    hits: tuple[str, ...] = ()
    if op.values is not None and keywords:
        hits = tuple(sorted(keywords.intersection(tuple_tokens(schema.relations[op.relation], op.values))))
    return ParsedOp(seq, line, op, None, hits)


def group_keywords(plan: dict[str, Any] | None) -> frozenset[str]:
    """Every keyword of every query of a plan (what executors classify tuples against)."""
    if not plan:
        return frozenset()
    return frozenset(k.casefold() for q in plan.get("queries", []) for k in q["keywords"])


@dataclass(slots=True)
class StoredTuple:
    """A live tuple of the stream: values, insertion time, seq, keyword hits and its stored line.

    The line (the insert as stored at ingest, with its seq) is what gets
    persisted: a restart parses it again, so nothing is serialised twice.
    """

    values: dict[str, Any]
    ts: float
    seq: int
    hits: tuple[str, ...]
    line: str


@dataclass(frozen=True)
class QuerySpec:
    """A query of the plan; two specs are equal iff the query needs no restart."""

    id: int
    keywords: tuple[str, ...]
    tmax: int
    window_seconds: float | None
    predicates: tuple[str, ...] = ()

    @classmethod
    def from_plan(cls, doc: dict[str, Any]) -> "QuerySpec":
        window = doc.get("window_seconds")
        return cls(
            int(doc["id"]),
            tuple(k.casefold() for k in doc["keywords"]),
            int(doc["tmax"]),
            None if window is None else float(window),
            tuple(sorted(json.dumps(p, sort_keys=True) for p in doc.get("predicates", []))),
        )


@dataclass
class _Query:
    spec: QuerySpec
    engine: StreamEngine
    keywords: tuple[str, ...]
    predicates: dict[str, list[Predicate]]
    live: dict[str, ResultView] = field(default_factory=dict)
    pending: list[ResultAdded | ResultRemoved] = field(default_factory=list)
    rejected: int = 0

    def takes(self, relation: str) -> bool:
        """Whether tuples of ``relation`` may reach the engine: a filter subscription
        (no keywords) takes only those of the relations it has predicates on."""
        return bool(self.spec.keywords) or relation in self.predicates

    def admits(self, relation: str, values: dict[str, Any]) -> bool:
        """Whether a tuple takes part in the query: it satisfies the predicates on its relation."""
        preds = self.predicates.get(relation)
        if not preds:
            return self.takes(relation)
        return all(holds(p, values.get(p.attribute)) for p in preds)


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
        engine: str = "static-dynamic",
        clock: Callable[[], float] = time.time,
        asc_sequence: str = "hybrid",
        asc_period: int = 10_000,
        asc_mu: float = 0.1,
    ):
        self.client = client
        self.evaluator_id = evaluator_id
        self.engine_kind = engine
        self.clock = clock
        self.asc = {"kind": asc_sequence, "period": asc_period, "mu": asc_mu}
        self.selection: GroupSelection | None = None
        self.lock = threading.RLock()
        self.plan: dict[str, Any] | None = None
        self.schema: Schema | None = None
        self.stream_id: int | None = None
        self.queries: dict[int, _Query] = {}
        self.store: OrderedDict[tuple[str, Any], StoredTuple] = OrderedDict()
        self.applied_seq = -1
        self.event_time: float | None = None
        self.retention: float | None = None
        self._trust_selection = False
        self._dropped = 0
        self._dirty: set[tuple[str, Any]] = set()
        self.query_errors: dict[int, str] = {}

    # ----------------------------------------------------------- plan and state

    @property
    def plan_version(self) -> int:
        return int(self.plan["version"]) if self.plan else 0

    @property
    def keywords(self) -> frozenset[str]:
        return group_keywords(self.plan)

    def _retention(self) -> float | None:
        """How long the store keeps a tuple: the widest window (None: forever)."""
        windows = [q.spec.window_seconds for q in self.queries.values()]
        if not windows or any(w is None for w in windows):
            return None
        return max(windows)

    def start(self) -> None:
        """Load the persisted store and the plan, rebuild every engine, reconcile live sets."""
        with self.lock:
            state = self.client.hgetall(bus.Keys.evaluator_state(self.evaluator_id))
            self.applied_seq = int(state.get("seq", -1))
            self.event_time = float(state["clock"]) if state.get("clock") else None
            plan = bus.read_plan(self.client, self.evaluator_id)
            if plan is None:
                raise RuntimeError(f"evaluator {self.evaluator_id} has no plan in Redis")
            schema = Schema.from_dict(plan["stream"]["schema"])
            keywords = group_keywords(plan)
            loaded = []
            for line in self.client.hvals(bus.Keys.evaluator_tuples(self.evaluator_id)):
                row = parse_stored_line(line, schema, keywords)
                op = row.op
                if op is None or op.kind != "insert" or row.seq is None:
                    raise RuntimeError(f"evaluator {self.evaluator_id}: unreadable stored tuple {line[:200]!r}")
                loaded.append(((op.relation, op.key), StoredTuple(op.values, op.ts, row.seq, row.hits, line)))
            loaded.sort(key=lambda item: (item[1].ts, item[1].seq))
            self.store = OrderedDict(loaded)
            self.refresh_plan(force=True)

    def refresh_plan(self, force: bool = False) -> bool:
        """Re-read the plan; start, restart and stop queries as it says. True if it changed."""
        with self.lock:
            plan = bus.read_plan(self.client, self.evaluator_id)
            if plan is None or (not force and self.plan is not None and plan["version"] == self.plan["version"]):
                return False
            schema = Schema.from_dict(plan["stream"]["schema"])
            if self.schema is None or self.schema.to_dict() != schema.to_dict():
                self.schema = schema
                force = True
            old_keywords = self.keywords
            self.plan = plan
            self.stream_id = int(plan["stream"]["id"])
            wanted = {spec.id: spec for spec in map(QuerySpec.from_plan, plan.get("queries", []))}
            for qid in sorted(set(self.queries) - set(wanted)):
                self._stop_query(qid)
            if self.keywords != old_keywords:
                self._reclassify_store()
            self.query_errors = {}
            for qid, spec in sorted(wanted.items()):
                current = self.queries.get(qid)
                if force or current is None or current.spec != spec:
                    try:
                        self._start_query(spec)
                    except ValueError as exc:  # a bad query must not stop the others of the group
                        self.query_errors[qid] = f"{type(exc).__name__}: {exc}"
                        if current is not None:
                            self._stop_query(qid)
            self.retention = self._retention()
            predicates = {q.spec.id: [json.loads(p) for p in q.spec.predicates] for q in self.queries.values()}
            self.selection = GroupSelection(self.schema, predicates, **self.asc) if any(predicates.values()) else None
            return True

    def selection_plan(self) -> dict[str, Any]:
        """The selection constructs and sequences the executors use for the next batch."""
        return self.selection.executor_plan() if self.selection is not None else {}

    def _reclassify_store(self) -> None:
        assert self.schema is not None
        keywords = self.keywords
        for (relation, _), row in self.store.items():
            row.hits = tuple(sorted(keywords.intersection(tuple_tokens(self.schema.relations[relation], row.values))))

    def _start_query(self, spec: QuerySpec) -> None:
        """Build the query's engine over the stored tuples in its window; reconcile its live set."""
        assert self.schema is not None
        predicates: dict[str, list[Predicate]] = {}
        for doc in map(json.loads, spec.predicates):
            relation = self.schema.relation(doc["relation"])
            predicates.setdefault(relation.name, []).append(
                parse_predicate(doc, relation.attributes, relation.name, f"query {spec.id}")
            )
        engine: StreamEngine
        if spec.keywords:
            engine = KeywordEngine(self.schema, list(spec.keywords), spec.tmax, spec.window_seconds,
                                   engine=self.engine_kind)
            keywords = engine.keywords.keywords
        else:  # a pure filter subscription: its results are the admitted tuples
            engine, keywords = FilterEngine(self.schema, predicates, spec.window_seconds), ()
        query = _Query(spec, engine, keywords, predicates)
        now = self.event_time
        seed = [
            Op("insert", relation, key, row.values, row.ts)
            for (relation, key), row in self.store.items()
            if (spec.window_seconds is None or now is None or row.ts + spec.window_seconds > now)
            and query.admits(relation, row.values)
        ]
        query.engine.load(seed)
        query.live = {view.key: view for view in (self._view(query, r) for r in query.engine.snapshot())}
        self.queries[spec.id] = query
        bus.reconcile(self.client, spec.id, max(self.applied_seq, 0), query.live.values())

    def _stop_query(self, qid: int) -> None:
        query = self.queries.pop(qid)
        seq = max(self.applied_seq, 0)
        bus.reconcile(self.client, qid, seq, ())
        query.live.clear()

    # ----------------------------------------------------------- batches

    def apply_batch(
        self,
        batch_id: int,
        rows: Iterable[ParsedOp],
        parse_ms: float = 0.0,
        selection_stats: Sequence[tuple[str, dict[str, Any]]] = (),
        parsed_with_version: int | None = None,
    ) -> BatchMetrics | None:
        """Apply one micro-batch and publish its effects; returns the metrics published.

        ``selection_stats`` are the executors' ASC statistics per relation;
        the executors' query sets (``ParsedOp.queries``) are trusted only if
        they were computed with the current plan (``parsed_with_version``).
        """
        with self.lock:
            started = time.perf_counter()
            self.refresh_plan()
            if self.plan is None:
                raise RuntimeError(f"evaluator {self.evaluator_id} has no plan in Redis")
            self._trust_selection = parsed_with_version == self.plan_version
            self._dropped = 0
            rows = list(rows)
            ordered = sorted((r for r in rows if r.seq is not None), key=lambda r: r.seq)
            dead: list[ParsedOp] = [r for r in rows if r.seq is None]
            t_apply = time.perf_counter()
            for row in ordered:
                if row.seq <= self.applied_seq:
                    continue
                if row.op is None:
                    dead.append(row)
                else:
                    reason = self._apply(row)
                    if reason is not None:
                        dead.append(ParsedOp(row.seq, row.line, row.op, reason))
                self.applied_seq = row.seq
            t_persist = time.perf_counter()
            if self._trust_selection and self.selection is not None:
                for relation, stats in selection_stats:
                    self.selection.observe(relation, stats)
            self._persist()
            t_publish = time.perf_counter()
            for qid, query in self.queries.items():
                for i in range(0, len(query.pending), _PUBLISH_CHUNK):
                    bus.publish_changes(self.client, qid, query.pending[i : i + _PUBLISH_CHUNK])
                query.pending.clear()
            now = self.clock()
            events: list[Any] = [
                DeadLetter(stream=self.stream_id, seq=row.seq, line=row.line[:DEAD_LETTER_LINE_CHARS], reason=row.reason or "", ts=now)
                for row in dead
            ]
            if self.selection is not None:
                events += self.selection.drain_events(self.stream_id, now)
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
                state=self.state(),
                ts=now,
            )
            bus.publish_stream_event(self.client, self.stream_id, metrics)
            return metrics

    def _apply(self, row: ParsedOp) -> str | None:
        """Apply one op to the store and every query; the reject reason, or None."""
        op = row.op
        assert op is not None and row.seq is not None
        if self.event_time is not None and op.ts < self.event_time:
            return f"late op: ts {op.ts} is before {self.event_time}"
        self._expire(op.ts)
        ident = (op.relation, op.key)
        if op.kind == "insert":
            if ident in self.store:
                return f"insert of live key {op.key!r} of {op.relation}"
            stored = StoredTuple(op.values, op.ts, row.seq, row.hits, row.line)
            self.store[ident] = stored
        else:
            stored = self.store.pop(ident, None)
            if stored is None:
                return f"delete of missing key {op.key!r} of {op.relation}"
        self._dirty.add(ident)
        self.event_time = op.ts
        admitted = row.queries if op.kind == "insert" and self._trust_selection else None
        if admitted is not None and not admitted:
            self._dropped += 1
        for qid, query in self.queries.items():
            if admitted is None:
                takes = query.admits(op.relation, stored.values)
            else:
                takes = qid in admitted and query.takes(op.relation)
            if not takes:  # the op's time still ends the query's windows
                changes = query.engine.advance(op.ts)
                if changes:
                    self._collect(query, row.seq, changes, removed=None)
                continue
            try:
                changes = query.engine.apply(op)
            except OpRejected:
                query.rejected += 1
                continue
            self._collect(query, row.seq, changes, removed=(ident, stored) if op.kind == "delete" else None)
        return None

    def _expire(self, now: float) -> None:
        retention = self.retention
        if retention is None:
            return
        store = self.store
        while store:
            ident, row = next(iter(store.items()))
            if row.ts + retention > now:
                break
            store.popitem(last=False)
            self._dirty.add(ident)

    def _collect(self, query: _Query, seq: int, changes: Sequence[Any], removed: tuple | None) -> None:
        for change in changes:
            if change.type == "add":
                view = self._view(query, change.result)
                query.live[view.key] = view
                query.pending.append(ResultAdded(query=query.spec.id, seq=seq, result=view))
            else:
                key = result_key(change.result.tuples, change.result.edges)
                view = query.live.pop(key, None) or self._view(query, change.result, removed)
                query.pending.append(ResultRemoved(query=query.spec.id, seq=seq, result=view))

    def _view(self, query: _Query, result: Any, removed: tuple | None = None) -> ResultView:
        tuples = []
        for relation, key in result.tuples:
            row = self.store.get((relation, key))
            if row is None and removed is not None and removed[0] == (relation, key):
                row = removed[1]
            values = row.values if row is not None else {}
            hits = [k for k in query.keywords if row is not None and k in row.hits]
            tuples.append(TupleView(relation=relation, key=key, values=values, hits=hits))
        edges = [((a[0], a[1]), (b[0], b[1]), fk) for a, b, fk in result.edges]
        return ResultView(key=result_key(result.tuples, result.edges), tuples=tuples, edges=edges)

    def _persist(self) -> None:
        """Write the changed tuples, the last applied seq and the event time in one MULTI."""
        tuples_key = bus.Keys.evaluator_tuples(self.evaluator_id)
        live: dict[bytes, str] = {}
        gone: list[bytes] = []
        for ident in self._dirty:
            row = self.store.get(ident)
            if row is None:
                gone.append(_tuple_key(*ident))
            else:
                live[_tuple_key(*ident)] = row.line
        with self.client.pipeline(transaction=True) as pipe:
            if live:  # one HSET for the batch: a command per tuple cost more than the write itself
                pipe.hset(tuples_key, mapping=live)
            if gone:
                pipe.hdel(tuples_key, *gone)
            state = {"seq": self.applied_seq}
            if self.event_time is not None:
                state["clock"] = repr(self.event_time)
            pipe.hset(bus.Keys.evaluator_state(self.evaluator_id), mapping=state)
            pipe.execute()
        self._dirty.clear()

    def state(self) -> dict[str, dict[str, Any]]:
        """Per query: live results, rejects and the engine's own statistics (lattice, tuples)."""
        out: dict[str, dict[str, Any]] = {"stream": {
            "stored_tuples": len(self.store), "applied_seq": self.applied_seq,
            "dropped_by_selection": self._dropped,
            "query_errors": {str(q): e for q, e in self.query_errors.items()},
        }}
        for qid, query in self.queries.items():
            out[str(qid)] = {"live_results": len(query.live), "rejected": query.rejected, **query.engine.stats()}
        return out
