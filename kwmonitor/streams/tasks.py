"""Celery tasks: evaluator start/stop/supervision and history persistence.

Arguments and results are plain JSON (primary keys, never objects). Beat
runs :func:`supervise` and :func:`persist_history` every few seconds (see
``CELERY_BEAT_SCHEDULE`` in the settings).
"""

from __future__ import annotations

from celery import shared_task

from .connection import redis_client
from .history import HistoryPersister
from .supervisor import Supervisor

__all__ = ["start_evaluator", "stop_evaluator", "supervise", "persist_history"]


def _describe(evaluator) -> dict:
    return {"evaluator": evaluator.pk, "desired": evaluator.desired, "status": evaluator.status, "pid": evaluator.pid}


@shared_task(name="kwmonitor.streams.tasks.start_evaluator")
def start_evaluator(evaluator_id: int) -> dict:
    return _describe(Supervisor().start(evaluator_id))


@shared_task(name="kwmonitor.streams.tasks.stop_evaluator")
def stop_evaluator(evaluator_id: int) -> dict:
    return _describe(Supervisor().stop(evaluator_id))


@shared_task(name="kwmonitor.streams.tasks.supervise", expires=10)
def supervise() -> list:
    return [list(action) for action in Supervisor().supervise()]


@shared_task(name="kwmonitor.streams.tasks.persist_history", expires=30)
def persist_history() -> dict:
    return HistoryPersister(redis_client()).run()
