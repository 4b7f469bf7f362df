"""``manage.py reset_stream STREAM``: stop a stream's evaluator and erase the stream's data."""

from __future__ import annotations

import shutil

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from kwmonitor.queries.models import KeywordQuery, WXQuerySubscription
from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.models import (
    AggregateValueRecord,
    DeadLetterRecord,
    DroppingSample,
    Evaluator,
    HistoryCursor,
    MetricSample,
    RearrangementRecord,
    ResultEvent,
    SubscriptionResultRecord,
)
from kwmonitor.streams.postgres import drop_slot
from kwmonitor.streams.supervisor import Supervisor
from streaming.bus import Keys
from streaming.sources import landing_archive, landing_receipts

from ._evaluators import evaluator_of


class Command(BaseCommand):
    help = (
        "Stop a stream's evaluator (name or id) and erase the stream's data: landing files, Spark checkpoint, "
        "ops, seqs, ingest clock, poison ops and evaluator state in Redis, its queries' live sets and change "
        "streams, and its history; its processes' restart counts and last errors; a PostgreSQL source's slot and "
        "capture state too. The configuration (schema, queries, "
        "ingest token) is kept; the next op ingested gets seq 0."
    )
    slot_note = ""

    def add_arguments(self, parser) -> None:
        parser.add_argument("stream", help="stream name or id")
        parser.add_argument("--no-input", action="store_true", help="do not ask for confirmation")

    def handle(self, *args, **options) -> None:
        evaluator = evaluator_of(options["stream"])
        if not options["no_input"]:
            answer = input(f"Erase every op, result and history record of stream {evaluator.stream.name!r}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                raise CommandError("reset cancelled")
        erased = self.reset(evaluator)
        self.stdout.write(self.style.SUCCESS(f"stream {evaluator.stream.name!r} reset: {erased} Redis keys erased"))
        if evaluator.stream.is_captured:
            self.stdout.write(f"{self.slot_note}: the capture copies the tables again from a new slot's snapshot")

    def reset(self, evaluator: Evaluator) -> int:
        """Erase the stream's data; returns how many Redis keys were deleted.

        Every process of the stream stops first (its secondary evaluators,
        pre-processor and capture too), and the placement of its queries
        starts over. A PostgreSQL source's slot is dropped (``slot_note`` says
        how that went) and its capture's state erased with its checkpoint.
        """
        supervisor = Supervisor()
        evaluator = supervisor.stop(evaluator.pk)
        stream = evaluator.stream
        processes = list(Evaluator.objects.filter(stream=stream).exclude(pk=evaluator.pk))
        for process in processes:
            supervisor.stop(process.pk)
        processes.append(evaluator)
        query_ids = list(KeywordQuery.objects.filter(stream=stream).values_list("pk", flat=True))
        subscription_ids = list(WXQuerySubscription.objects.filter(stream=stream).values_list("pk", flat=True))
        keys = [
            Keys.stream_ops(stream.pk), Keys.stream_seq(stream.pk), Keys.stream_lock(stream.pk),
            Keys.stream_clock(stream.pk),  # the ingest clock: a replayed stream starts from its first op again
            Keys.stream_events(stream.pk), Keys.stream_ingested(stream.pk),
            # the aggregate values' publish cursor would otherwise hold back every window of a replayed stream
            Keys.aggregate_cursor(stream.pk), Keys.sharing_report(stream.pk), Keys.stream_vocabularies(stream.pk),
            Keys.landing_consumers(stream.pk, "raw"), Keys.landing_consumers(stream.pk, "derived"),
            Keys.capture_slot(stream.pk), Keys.stream_poison(stream.pk),
        ]
        keys += [key for p in processes for key in (Keys.evaluator_tuples(p.pk), Keys.evaluator_state(p.pk),
                                                    Keys.heartbeat(p.pk), Keys.last_heartbeat(p.pk),
                                                    Keys.failed_op(p.pk), Keys.poison_watch(p.pk),
                                                    Keys.persisted_seq(p.pk))]
        keys += [key for qid in query_ids for key in (Keys.live(qid), Keys.changes(qid), Keys.published_seq(qid))]
        keys += [Keys.subscription_results(sid) for sid in subscription_ids]
        keys += list(redis_client().scan_iter(match=Keys.ingest_receipts(stream.pk), count=1000))
        erased = int(redis_client().delete(*keys))
        landing, derived = stream.landing_path(), stream.derived_path()
        for path in (landing, landing_archive(landing), landing_receipts(landing), derived, landing_archive(derived),
                     *(p.checkpoint_dir() for p in processes)):
            shutil.rmtree(path, ignore_errors=True)
        type(stream).objects.filter(pk=stream.pk).update(placement={})
        # a new run of the stream: its processes' restart counts and errors start over
        Evaluator.objects.filter(stream=stream).update(restarts=0, failures=0, last_error="", next_restart_at=None)
        self.slot_note = drop_slot(stream) if stream.is_captured else ""
        with transaction.atomic():
            HistoryCursor.objects.filter(key__in=keys).delete()
            ResultEvent.objects.filter(query_id__in=query_ids).delete()
            SubscriptionResultRecord.objects.filter(subscription_id__in=subscription_ids).delete()
            for model in (MetricSample, DeadLetterRecord, DroppingSample, RearrangementRecord, AggregateValueRecord):
                model.objects.filter(stream=stream).delete()
        return erased
