"""Celery tasks: evaluator start/stop/supervision, history persistence, landing archive retention.

Arguments and results are plain JSON (primary keys, never objects). Beat
runs :func:`supervise` and :func:`persist_history` every few seconds,
:func:`watch_capture_slots` every 15 s and :func:`prune_landing_archives` every ten minutes (see ``CELERY_BEAT_SCHEDULE``
in the settings, where each gets an expiry of one period).
"""

from __future__ import annotations

import time

from celery import shared_task
from django.conf import settings

from streaming.sources import prune_archives

from .connection import redis_client
from .history import HistoryPersister
from .models import Evaluator, Stream
from .postgres import watch_slots
from .supervisor import Supervisor

__all__ = ["start_evaluator", "stop_evaluator", "supervise", "persist_history", "prune_landing_archives",
           "watch_capture_slots"]


def _describe(evaluator: Evaluator) -> dict:
    """What the supervisor did (the lifecycle it recorded and the launched pid): the task's result."""
    return {"evaluator": evaluator.pk, "desired": evaluator.desired, "lifecycle": evaluator.lifecycle,
            "pid": evaluator.pid}


@shared_task(name="kwmonitor.streams.tasks.start_evaluator")
def start_evaluator(evaluator_id: int) -> dict:
    return _describe(Supervisor().start(evaluator_id))


@shared_task(name="kwmonitor.streams.tasks.stop_evaluator")
def stop_evaluator(evaluator_id: int) -> dict:
    return _describe(Supervisor().stop(evaluator_id))


@shared_task(name="kwmonitor.streams.tasks.supervise")
def supervise() -> list:
    return [list(action) for action in Supervisor().supervise()]


@shared_task(name="kwmonitor.streams.tasks.persist_history")
def persist_history() -> dict:
    return HistoryPersister(redis_client()).run()


@shared_task(name="kwmonitor.streams.tasks.prune_landing_archives")
def prune_landing_archives() -> dict:
    """Delete archived landing files, raw and derived, older than ``LANDING_ARCHIVE_HOURS`` (0: keep them all)."""
    hours = settings.LANDING_ARCHIVE_HOURS
    if hours <= 0:
        return {}
    now = time.time()
    pruned = {str(stream.pk): prune_archives(stream.source_kind, stream.pk, settings.LANDING_DIR, hours * 3600, now)
              for stream in Stream.objects.all()}
    return {pk: deleted for pk, deleted in pruned.items() if deleted is not None}


@shared_task(name="kwmonitor.streams.tasks.watch_capture_slots")
def watch_capture_slots() -> dict:
    """How much WAL each PostgreSQL-sourced stream's slot holds back, whether its capture runs or not."""
    return watch_slots(redis_client())
