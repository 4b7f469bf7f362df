"""Copy the Redis event streams into the history tables.

Evaluators never touch the database; they append to Redis streams. A Celery
beat task runs :meth:`HistoryPersister.run`, which reads each query's change
stream, each WXQuery subscription's result stream and each stream's event
stream after the last id it persisted and
bulk-inserts the rows together with the new cursor, in one transaction: a
crash between the two never loses nor duplicates history (unique
``entry_id`` per query or stream also makes a replay harmless).

After Redis lost its data the evaluator publishes each query's changes again
from the stream's first op, under new entry ids (docs/ops.md, "Redis"): a
change history already holds (same seq, type and result, as many times as
held) is skipped, so the history goes on where it was, nothing twice; so is
a dead letter of a seq already recorded and an aggregate value of a window
already recorded.

A run that drained every change stream and stream event stream to its end
marks, per evaluator, the seq it had published through when the run began
(``Keys.persisted_seq``): the history then holds every change and dead
letter it published up to that seq, and an evaluator that outlives a Redis
loss publishes again only what came after (``streaming.unpersisted``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections import Counter
from typing import Any, Callable, Iterable

import psycopg
import redis
from django.db import connection, transaction
from django.db.models import OuterRef, Subquery
from pydantic import ValidationError

from kwmonitor.queries.models import AggregateSubscription, KeywordQuery, WXQuerySubscription
from streaming.bus import Keys
from streaming.evaluator_state import StateField
from streaming.events import (
    AggregateValue,
    BatchMetrics,
    DeadLetter,
    DroppingRatio,
    Rearrangement,
    ResultAdded,
    ResultRemoved,
    SubscriptionResult,
    parse_event,
)

from .models import (
    AggregateValueRecord,
    DeadLetterRecord,
    DroppingSample,
    Evaluator,
    HistoryCursor,
    MetricSample,
    RearrangementRecord,
    ResultEvent,
    Stream,
    SubscriptionResultRecord,
)

__all__ = ["HistoryPersister", "entry_time"]

log = logging.getLogger(__name__)


def entry_time(entry_id: str) -> dt.datetime:
    """The time a Redis stream entry was added (its id is ``<ms>-<n>``)."""
    return dt.datetime.fromtimestamp(int(entry_id.split("-")[0]) / 1000, tz=dt.timezone.utc)


def _ts(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc)


class HistoryPersister:
    """Moves new Redis stream entries into the history tables, ``batch`` entries at a time."""

    def __init__(self, client: redis.Redis, batch: int = 1000, max_batches: int = 50):
        self.client = client
        self.batch = batch
        self.max_batches = max_batches
        self._drained = True  # whether every key of this run was read to its end

    def run(self) -> dict[str, int]:
        """Persist what is new for every query and stream; returns rows written per kind."""
        server, published = self._server(), self._published_seqs()
        written = {"results": 0, "subscription_results": 0, "stream_events": 0}
        self._drained = True
        written["results"] = self.persist_changes(KeywordQuery.objects.order_by("pk").values_list("pk", flat=True))
        written["subscription_results"] = self.persist_subscriptions(
            WXQuerySubscription.objects.order_by("pk").values_list("pk", flat=True))
        written["stream_events"] = self.persist_streams(Stream.objects.order_by("pk").values_list("pk", flat=True))
        if self._drained and published and self._server() == server:  # not a new Redis since those seqs were read
            with self.client.pipeline(transaction=False) as pipe:
                for evaluator_id, seq in published.items():
                    pipe.set(Keys.persisted_seq(evaluator_id), seq)
                pipe.execute()
        return written

    def _server(self) -> str:
        """The Redis server's run id (a restarted or replaced server has a new one)."""
        return str(self.client.info("server")["run_id"])

    def _published_seqs(self) -> dict[int, int]:
        """Each evaluator's published seq (read before any stream is drained: what it had published by then)."""
        ids = list(Evaluator.objects.exclude(role__in=("preprocessor", "capture")).order_by("pk")
                   .values_list("pk", flat=True))
        with self.client.pipeline(transaction=False) as pipe:
            for evaluator_id in ids:
                pipe.hget(Keys.evaluator_state(evaluator_id), StateField.PUBLISHED)
            seqs = pipe.execute()
        return {evaluator_id: int(seq) for evaluator_id, seq in zip(ids, seqs) if seq is not None}

    def persist_changes(self, query_ids: Iterable[int]) -> int:
        """Copy the queries' new adds and removes into :class:`ResultEvent` rows, in one insert per batch (issue
        20: with a transaction per query and Django's ``bulk_create`` a change cost 240-365 µs, and the history
        fell minutes behind a soak's 1,500 changes/s; ``benchmarks/history_write.py``)."""
        return self._copy({Keys.changes(query_id): query_id for query_id in query_ids},
                          lambda read: self._insert_changes(self._change_rows(read)))

    def _copy(self, keys: dict[str, int], write: Callable[[dict[int, list[tuple[str, Any]]]], int]) -> int:
        """Copy the new entries of ``keys`` (Redis key -> the id of its query, subscription or stream): per batch,
        in one transaction, their cursors locked, the entries after each read, ``write`` given them per id (it
        returns the rows it wrote) and the cursors moved on, together, so a crash never loses nor duplicates."""
        written = 0
        for _ in range(self.max_batches):
            with transaction.atomic():
                cursors = self._lock_cursors(list(keys))
                read = self._read_many(cursors)
                written += write({keys[key]: [(i, e) for i, e in entries if e is not None]
                                  for key, entries in read.items()})
                for key, entries in read.items():
                    cursors[key].last_id = entries[-1][0]
                HistoryCursor.objects.bulk_update([cursors[key] for key in read], ["last_id"])
            keys = {key: owner for key, owner in keys.items() if len(read.get(key, ())) == self.batch}
            if not keys:
                return written
        self._drained = False  # more next run
        return written

    @staticmethod
    def _lock_cursors(keys: list[str]) -> dict[str, HistoryCursor]:
        """Each key's cursor, its row locked (made if new), in key order: concurrent runs take turns."""
        locked = HistoryCursor.objects.select_for_update().order_by("key")
        cursors = {cursor.key: cursor for cursor in locked.filter(key__in=keys)}
        missing = [key for key in keys if key not in cursors]
        if missing:
            HistoryCursor.objects.bulk_create([HistoryCursor(key=key) for key in missing], ignore_conflicts=True)
            cursors.update((cursor.key, cursor) for cursor in locked.filter(key__in=missing))
        return cursors

    def _read_many(self, cursors: dict[str, HistoryCursor]) -> dict[str, list[tuple[str, Any]]]:
        """The entries after each key's cursor (the keys with some), each parsed (None: a malformed payload)."""
        with self.client.pipeline(transaction=False) as pipe:
            for key, cursor in cursors.items():
                pipe.xrange(key, min=f"({cursor.last_id}" if cursor.last_id != "0-0" else "-", count=self.batch)
            replies = pipe.execute()
        return {key: self._parsed(key, entries) for key, entries in zip(cursors, replies) if entries}

    def _change_rows(self, read: dict[int, list[tuple[str, Any]]]) -> list[tuple[int, str, int, str, str, dt.datetime]]:
        """The rows of the changes read, per query in stream order, without those history already holds."""
        changes = {query_id: [(entry_id, event) for entry_id, event in entries
                              if isinstance(event, (ResultAdded, ResultRemoved))]
                   for query_id, entries in read.items()}
        last = self._last_seqs([query_id for query_id, events in changes.items() if events])
        rows = []
        for query_id, events in changes.items():
            held = self._held_changes(query_id, last.get(query_id), [event for _, event in events])
            for entry_id, event in events:
                change = (event.seq, event.type, event.result.key)
                if held[change] > 0:  # published again after Redis lost the stream
                    held[change] -= 1
                    continue
                rows.append((query_id, entry_id, event.seq, event.type, event.result.model_dump_json(),
                             entry_time(entry_id)))
        return rows

    @staticmethod
    def _last_seqs(query_ids: list[int]) -> dict[int, int]:
        """The newest seq history holds per query (those with some), each read off the (query, seq) index."""
        newest = ResultEvent.objects.filter(query_id=OuterRef("pk")).order_by("-seq").values("seq")[:1]
        return {query_id: seq for query_id, seq in KeywordQuery.objects.filter(pk__in=query_ids)
                .annotate(last=Subquery(newest)).values_list("pk", "last") if seq is not None}

    @staticmethod
    def _held_changes(query_id: int, last: int | None, changes: list[ResultAdded | ResultRemoved]) -> Counter:
        """How many times history holds each (seq, type, result key) of ``changes`` at or before ``last``."""
        seqs = {c.seq for c in changes if last is not None and c.seq <= last}
        if not seqs:
            return Counter()
        return Counter(ResultEvent.objects.filter(query_id=query_id, seq__in=seqs)
                       .values_list("seq", "type", "result__key"))

    @staticmethod
    def _insert_changes(rows: list[tuple[int, str, int, str, str, dt.datetime]]) -> int:
        """Insert the rows (one already held under its entry id is skipped); returns how many were inserted.

        On PostgreSQL the columns go as binary arrays bound on the server: Django binds in the client, as
        quoted text, and for arrays of JSON that quoting cost more than the insert.
        """
        if not rows:
            return 0
        if connection.vendor != "postgresql":
            ResultEvent.objects.bulk_create([
                ResultEvent(query_id=query_id, entry_id=entry_id, seq=seq, type=kind, result=json.loads(result),
                            created=created) for query_id, entry_id, seq, kind, result, created in rows],
                ignore_conflicts=True)
            return len(rows)
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(
                f"INSERT INTO {ResultEvent._meta.db_table} (query_id, entry_id, seq, type, result, created)"
                " SELECT query_id, entry_id, seq, type, result::jsonb, created FROM unnest("
                "%b::bigint[], %b::text[], %b::bigint[], %b::text[], %b::text[], %b::timestamptz[])"
                " AS n(query_id, entry_id, seq, type, result, created)"
                " ON CONFLICT (query_id, entry_id) DO NOTHING",
                tuple(list(column) for column in zip(*rows)))
            return cursor.rowcount

    def persist_subscriptions(self, subscription_ids: Iterable[int]) -> int:
        """Copy WXQuery subscriptions' new result items into :class:`SubscriptionResultRecord` rows."""
        return self._copy({Keys.subscription_results(sid): sid for sid in subscription_ids},
                          lambda read: self._create(self._subscription_rows(sid, entries) for sid, entries in read.items()))

    @staticmethod
    def _subscription_rows(subscription_id: int, entries: list[tuple[str, Any]]) -> dict[type, list]:
        """The rows of a subscription's result items."""
        return {SubscriptionResultRecord: [
            SubscriptionResultRecord(subscription_id=subscription_id, entry_id=entry_id, seq=event.seq,
                                     item=event.item, created=_ts(event.ts))
            for entry_id, event in entries if isinstance(event, SubscriptionResult)]}

    def persist_streams(self, stream_ids: Iterable[int]) -> int:
        """Copy streams' metrics, dead letters, dropping ratios, rearrangements and aggregate values."""
        return self._copy({Keys.stream_events(stream_id): stream_id for stream_id in stream_ids},
                          lambda read: self._create(self._stream_rows(sid, entries) for sid, entries in read.items()))

    @staticmethod
    def _stream_rows(stream_id: int, entries: list[tuple[str, Any]]) -> dict[type, list]:
        """The rows of a stream's events, without the dead letters and aggregate values history holds."""
        out: dict[type, list] = {MetricSample: [], DeadLetterRecord: [], DroppingSample: [], RearrangementRecord: [],
                                 AggregateValueRecord: []}
        values = [e.aggregate for _, e in entries if isinstance(e, AggregateValue)]
        subscribed = set(AggregateSubscription.objects.filter(pk__in=values).values_list("pk", flat=True))
        # what a rebuild after a Redis loss publishes again: a dead letter per seq, a value per window
        dead_seqs = [e.seq for _, e in entries if isinstance(e, DeadLetter) and e.seq is not None]
        held_dead = set(DeadLetterRecord.objects.filter(stream_id=stream_id, seq__in=dead_seqs)
                        .values_list("seq", flat=True)) if dead_seqs else set()
        ends = [e.window_end for _, e in entries if isinstance(e, AggregateValue)]
        held_values = set(AggregateValueRecord.objects.filter(aggregate_id__in=subscribed, window_end__in=ends)
                          .values_list("aggregate_id", "window_end")) if ends else set()
        for entry_id, event in entries:
            common = {"stream_id": stream_id, "entry_id": entry_id, "ts": _ts(event.ts) if hasattr(event, "ts") else entry_time(entry_id)}
            if isinstance(event, BatchMetrics):
                out[MetricSample].append(MetricSample(
                    **common, batch_id=event.batch_id, input_rows=event.input_rows,
                    rows_per_second=event.rows_per_second, duration_ms=event.duration_ms,
                    dead_letters=event.dead_letters, breakdown_ms=event.breakdown_ms, state=event.state,
                ))
            elif isinstance(event, DeadLetter) and event.seq not in held_dead:
                if event.seq is not None:
                    held_dead.add(event.seq)
                out[DeadLetterRecord].append(DeadLetterRecord(**common, seq=event.seq, line=event.line, reason=event.reason))
            elif isinstance(event, DroppingRatio):
                out[DroppingSample].append(DroppingSample(
                    **common, relation=event.relation, period=event.period, tuples=event.tuples,
                    dropped=event.dropped, ratio=event.ratio,
                ))
            elif isinstance(event, Rearrangement):
                if event.new_sequence == event.old_sequence:  # the monitor's check kept the order: no change
                    continue
                out[RearrangementRecord].append(RearrangementRecord(
                    **common, relation=event.relation, old_sequence=event.old_sequence,
                    new_sequence=event.new_sequence, d_init=event.d_init, d_cur=event.d_cur, mu=event.mu,
                ))
            elif isinstance(event, AggregateValue) and event.aggregate in subscribed \
                    and (event.aggregate, event.window_end) not in held_values:
                held_values.add((event.aggregate, event.window_end))
                out[AggregateValueRecord].append(AggregateValueRecord(
                    **common, aggregate_id=event.aggregate, seq=event.seq, window_end=event.window_end,
                    value=event.value,
                ))
            # Evaluator status and sharing reports are live-only: the heartbeat (with the supervisor's
            # lifecycle in the Evaluator row) and Redis hold the current ones.
        return out

    @staticmethod
    def _create(groups: Iterable[dict[type, list]]) -> int:
        """Insert each group's rows per model (one already held under its entry id is skipped); how many."""
        written = 0
        for group in groups:
            for model, objs in group.items():
                if objs:
                    model.objects.bulk_create(objs, ignore_conflicts=True)
                    written += len(objs)
        return written

    @staticmethod
    def _parsed(key: str, entries: list[tuple[str, dict]]) -> list[tuple[str, Any]]:
        """Each entry's event (None: a malformed payload, logged)."""
        parsed = []
        for entry_id, fields in entries:
            try:
                parsed.append((entry_id, parse_event(fields.get("data", ""))))
            except ValidationError as exc:
                log.warning("%s %s: skipping a malformed payload: %s", key, entry_id, exc.errors()[0]["msg"])
                parsed.append((entry_id, None))
        return parsed
