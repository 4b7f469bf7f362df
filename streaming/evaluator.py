"""The evaluator runner: a stream session fed batch by batch, its state and results through ports.

This is the Spark-free core of an evaluator process (README, "How it
runs"); ``streaming.spark`` only feeds it parsed batches. What is computed is
the :class:`~streaming.session.StreamSession`'s (plan changes, ops, changes,
values, items); the runner reads and writes through its ports
(``streaming.ports``): :class:`GroupEvaluator` is the runner on Redis
(``streaming.redis_ports``), ``streaming.testing`` has in-memory ports. Per
batch:

1. re-read the plan and adopt it if it changed, publishing what the session
   says: removed queries' live sets empty, the hand-off seqs saved, the
   changes held for a moving class released, (re)started queries' live sets
   reconciled with the engine's;
2. apply the ops in ``seq`` order (the session skips seqs already applied,
   a batch replayed by Spark after a crash; the stream's poison ops, set
   aside by the supervisor after they stalled or crashed an evaluator
   repeatedly, ``docs/ops.md``, become dead letters); an error while applying
   an op names that op in the state store (``bus.Keys.failed_op``) before it
   ends the process;
3. publish the batch's WXQuery result items (entry ids by seq, so at most
   once), persist the stored tuples with the last applied seq (one MULTI),
   then publish each query's changes (live set + change stream, one atomic
   step per query; a class moving here is held back until the evaluator
   handing it over has published through the seq it joined at), aggregate
   values and dead letters, then record the seq published through (what
   such a target waits on, and what the history's mark is made of), then
   the batch metrics.

The stored tuples give the values shown in results and, after a restart,
the state the session is rebuilt from. A Redis that lost them while the
evaluator ran (a crash without persistence, an empty Redis put in its place:
the state hash lost the field written when the evaluator loaded it) is found
at the next batch: the evaluator clears what it wrote there since and, when
it keeps every change the history may lack (``streaming.unpersisted``),
gives its state back from the session (no op applied again); otherwise it
starts over from an empty session and applies the stream's stored ops again
from the first (landing files, archived ones included), publishing every
change again, so the live sets and change streams are rebuilt whole
(docs/ops.md, "Redis"). Because the tuples are persisted before the changes are published,
a crash in between is repaired by the reconcile of the restart, and a
replayed batch is not applied twice. The running windows of the aggregate
subscriptions and the values a batch produced are persisted in the same
step, and values are published idempotently (at most one per subscription
and window end), so they too survive a crash exactly once.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any, Callable, Iterable, Sequence

import redis

from .events import AggregateValue, BatchMetrics, SharingReport
from .parsed import ParsedOp, parse_stored_line
from .ports import Ports, StateLost
from .redis_ports import redis_ports
from .session import ParseSpec, PlanChange, StreamSession, group_keywords
from .sharing.properties import EvaluatorPlan
from .sources import input_kind
from .unpersisted import Unpersisted

__all__ = ["ParseSpec", "group_keywords", "EvaluatorRunner", "GroupEvaluator"]

log = logging.getLogger(__name__)

_REPLAY_CHUNK = 20_000  # stored ops applied per batch when the evaluator rebuilds from the landing files
_REPORT_SECONDS = 10.0


class EvaluatorRunner:
    """Runs one evaluator's :class:`StreamSession` over its ports; the Spark driver feeds it batches.

    Thread-safe: the heartbeat thread calls :meth:`refresh_plan` between
    batches (so plan changes apply with no data flowing) under the same lock.
    """

    def __init__(
        self,
        ports: Ports,
        evaluator_id: int,
        sharing: str = "widen",
        clock: Callable[[], float] = time.time,
        asc_sequence: str = "hybrid",
        asc_period: int = 10_000,
        asc_mu: float = 0.1,
    ):
        self.ports = ports
        self.evaluator_id = evaluator_id
        self.clock = clock
        self.session = StreamSession(sharing, clock, asc_sequence, asc_period, asc_mu)
        self.lock = threading.RLock()
        # what the heartbeat reports (read without the lock): the seq applied and saved by the last batch, when
        # that batch finished
        self.saved_seq = -1
        self.progress_at: float | None = None
        self._reported = 0.0
        self.unpersisted = Unpersisted()  # what the history may lack, to publish again if the store loses it

    # ----------------------------------------------------------- plan and state

    def start(self) -> None:
        """Load the saved state and the plan, evaluate every class at once, reconcile live sets."""
        with self.lock:
            saved = self.ports.state.load()
            self.saved_seq = saved.seq
            self.session.restore(saved)
            self.unpersisted.restart(max(saved.seq, 0))  # the start reconciles at that seq
            if not self.refresh_plan(force=True):
                raise RuntimeError(f"evaluator {self.evaluator_id} has no plan in Redis")
            # a fresh engine reconciled every live set it does not hold at the applied seq
            self.ports.state.save_published(self.session.applied_seq)
            stream_id = self.session.stream_id
            if saved.outbox and stream_id is not None:  # values saved by a batch that died before publishing
                self.ports.publisher.publish_values(stream_id, saved.outbox)

    def refresh_plan(self, force: bool = False, plan: EvaluatorPlan | None = None) -> bool:
        """Re-read the plan (or adopt ``plan``); start, move and stop queries as it says. True if it changed."""
        with self.lock:
            plan = plan or self.ports.plans.read()
            if plan is None:
                return False
            change = self.session.adopt(plan, force, self._source_published(plan))
            if change is None:
                return False
            try:
                self._publish_plan_change(change)
            except StateLost:  # the store was lost before: what the plan change published cannot be told
                self.unpersisted.restart(self.session.applied_seq + 1)
                self._recover()
            self._report_now()
            return True

    def _publish_plan_change(self, change: PlanChange) -> None:
        publisher, keep = self.ports.publisher, self.unpersisted.keep
        applied = self.session.applied_seq
        for qid in change.cleared:
            keep({qid: publisher.reconcile(qid, change.seq, ())}, applied)
        if change.joined is not None:
            self.ports.state.save_joined(change.joined)
        if change.released:
            keep(change.released, applied)
            publisher.publish_changes(change.released)
        for qid, views in change.reconciled.items():
            keep({qid: publisher.reconcile(qid, change.seq, views)}, applied)

    def _source_published(self, plan: EvaluatorPlan) -> int:
        """The last seq whose changes the evaluator handing the plan's joining queries over has published
        (-1 when there are none, or the plan names no such evaluator: they are then held until the move ends)."""
        source = plan.handoff.source
        return self.ports.plans.published_seq(source) if plan.handoff.joining and source is not None else -1

    def _report_now(self) -> None:
        """Write and announce the sharing report (at once when a plan is adopted: pages tell a query's class by it)."""
        report = self.report(self.clock())
        self.ports.publisher.write_report(report)
        self.ports.publisher.publish_events(report.stream, [report])

    def report(self, now: float) -> SharingReport:
        """The sharing classes and what they save against per-query evaluation (the Sharing page)."""
        self._reported = now
        return self.session.report(now, self.evaluator_id)

    def lost_state(self) -> bool:
        """Whether the store lost the state this evaluator saved (it came back empty, or another took its place)."""
        return self.session.applied_seq >= 0 and self.ports.state.lost()

    def rebuild(self, lines: Iterable[str]) -> int:
        """Start over from an empty session and apply ``lines`` (stored ops from the stream's first, read as
        they are applied), publishing their changes again; returns how many were applied.

        Progress is marked at the start and after each chunk, so that a long
        rebuild (millions of stored ops) is not taken for a stalled evaluator
        before its first chunk is read and applied.

        What the store lost is rebuilt this way: the tuples and applied seq,
        the live sets and change streams (each change again, in seq order,
        under new entry ids), the published seqs. Readers of the feeds
        resynchronise from a snapshot and the history skips what it already
        holds.
        """
        with self.lock:
            plan = self.session.plan
            assert plan is not None
            # what a batch wrote to the new Redis before the loss was seen goes: its published seqs would
            # hold back every change of the replay
            self.ports.publisher.forget(self.session.queries)
            self.ports.state.clear()
            self.session.reset()
            self.refresh_plan(force=True, plan=plan)
            self.progress_at = time.time()
            applied, stored = 0, iter(lines)
            while chunk := list(itertools.islice(stored, _REPLAY_CHUNK)):
                schema = self.session.schema
                assert schema is not None
                self.apply_batch(-1, [parse_stored_line(line, schema, self.session.keywords) for line in chunk])
                applied += len(chunk)
            return applied

    def _recover(self) -> None:
        """The store lost this evaluator's state while it ran: give it back from the session when the changes
        the history may lack are kept (:mod:`streaming.unpersisted`), else rebuild it from the landing files."""
        kept = self.unpersisted
        if kept.complete and self._republishable():
            changes = sum(map(len, kept.changes.values()))
            self._give_back()
            log.warning("evaluator %s: Redis lost its state; given back at seq %s from the session, %s changes and "
                        "%s dead letters published again from the history's mark %s", self.evaluator_id,
                        self.session.applied_seq, changes, len(kept.dead), kept.persisted)
        else:
            started = time.perf_counter()
            self._rebuild_from_landing()
            log.warning("evaluator %s: Redis lost its state; rebuilt from the landing files through seq %s in %.1f s",
                        self.evaluator_id, self.session.applied_seq, time.perf_counter() - started)

    def _republishable(self) -> bool:
        """Whether all the session publishes is changes and dead letters (no aggregate values, no WXQuery items,
        no query arriving from another evaluator): what a lost store can be given back from it."""
        session = self.session
        return (session.engine is not None and not session.engine.aggregate_classes and session.subscriptions is None
                and not session.arriving.joined and not session.arriving.held)

    def _give_back(self) -> None:
        """Write the session's whole state to the store, each query's live set as it was before the history's
        mark, then publish again the changes and dead letters kept from the mark on."""
        session, state, publisher, kept = self.session, self.ports.state, self.ports.publisher, self.unpersisted
        queries = sorted(set(session.queries) | set(kept.changes))
        publisher.forget(queries)
        state.clear()
        self._persist([], whole=True)
        at = kept.restored_seq
        live = session.live_adds(at)
        for qid in queries:
            publisher.restore_live(qid, at, kept.live_at_mark(qid, live.get(qid, {})))
        publisher.publish_changes(kept.changes)
        stream_id = session.stream_id
        if kept.dead and stream_id is not None:
            publisher.publish_events(stream_id, kept.dead)
        state.save_published(session.applied_seq)

    def _rebuild_from_landing(self) -> None:
        """The store lost this evaluator's state: rebuild it from every stored op it had applied."""
        plan = self.session.plan
        assert plan is not None
        source = plan.stream.source
        lines = input_kind(source).replay(source, self.evaluator_id, self.session.applied_seq)
        if lines is None:
            raise RuntimeError(f"evaluator {self.evaluator_id}: Redis lost its state and its source "
                               f"({source.get('kind')}) cannot be read again from the first op")
        self.rebuild(lines)

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
        that may have ended the last process): each op is named in the state
        store before it is applied, so the supervisor knows the op even if the
        process is killed in it without a word. See
        :meth:`StreamSession.apply` for the other arguments.
        """
        with self.lock:
            session, state, publisher = self.session, self.ports.state, self.ports.publisher
            if self.lost_state():
                self._recover()
            self.unpersisted.persisted_through(state.persisted_seq())
            started = time.perf_counter()
            self.refresh_plan()
            if session.plan is None or session.engine is None:
                raise RuntimeError(f"evaluator {self.evaluator_id} has no plan in Redis")
            poison = self.ports.plans.poison(session.plan.stream.id)
            before_op = (lambda seq: state.note_failed(seq, "killed while applying it")) if guarded else None
            source_published = self._source_published(session.plan)
            t_apply = time.perf_counter()
            try:
                out = session.apply(rows, poison, selection_stats, parsed_with_version, before_op, source_published)
            except Exception as exc:  # the process ends with it: name the op for the supervisor (docs/ops.md)
                state.note_failed(session.applying_seq, f"{type(exc).__name__}: {exc}"[:500])
                raise
            finally:
                session.applying_seq = None
            if guarded:
                state.clear_failed()
            t_persist = time.perf_counter()
            # before the state: a batch replayed after a crash publishes none of them twice (ids by seq)
            publisher.publish_items(out.items)
            self._persist(out.values)
            self.saved_seq = session.applied_seq
            t_publish = time.perf_counter()
            self.unpersisted.keep(out.changes, session.applied_seq)
            try:
                publisher.publish_changes(out.changes)
                for qid, views in out.reconciled.items():
                    self.unpersisted.keep({qid: publisher.reconcile(qid, session.applied_seq, views)},
                                          session.applied_seq)
            except StateLost:  # the store lost it during this batch: nothing of it was published
                self._recover()
                out.values = []
            stream_id = session.stream_id
            assert stream_id is not None
            now = self.clock()
            events = out.events
            publisher.publish_values(stream_id, out.values)
            if now - self._reported >= _REPORT_SECONDS:
                report = self.report(now)
                publisher.write_report(report)
                events.append(report)
            self.unpersisted.keep_dead(events)
            publisher.publish_events(stream_id, events)
            # after the dead letters: the history persister's mark says it holds them up to this seq
            state.save_published(session.applied_seq)
            done = time.perf_counter()
            breakdown = {"parse": parse_ms, "plan": (t_apply - started) * 1000, "apply": (t_persist - t_apply) * 1000,
                         "persist": (t_publish - t_persist) * 1000, "publish": (done - t_publish) * 1000}
            metrics = out.metrics(session, self.evaluator_id, batch_id, breakdown,
                                  (done - started) * 1000 + parse_ms, now)
            publisher.publish_events(stream_id, [metrics])
            self.progress_at = time.time()
            return metrics

    def _persist(self, outbox: Sequence[AggregateValue] | None = None, whole: bool = False) -> None:
        """Save the changed tuples (``whole``: every tuple, to a store that lost them), the last applied seq, the
        outbox, the aggregate windows and the clock."""
        self.ports.state.save(self.session.state_write(outbox, whole))


class GroupEvaluator(EvaluatorRunner):
    """The evaluator runner on Redis (``streaming.redis_ports``): what an evaluator process runs."""

    def __init__(self, client: redis.Redis, evaluator_id: int, **options: Any):
        super().__init__(redis_ports(client, evaluator_id), evaluator_id, **options)
        self.client = client
