"""Evaluator plans: the JSON each evaluator re-reads at every batch boundary.

A plan lists the stream (schema and source) and its enabled queries. It is
rebuilt and written with a new version after every committed change to the
stream, its schema or its queries; the version is bumped while the
evaluator row is locked, so plans reach Redis in version order.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import connection, transaction

from streaming import bus

from .connection import redis_client
from .models import Evaluator

__all__ = ["build_plan", "publish_plan", "publish_plan_on_commit"]

log = logging.getLogger(__name__)


def build_plan(evaluator: Evaluator, version: int) -> dict[str, Any]:
    stream = evaluator.stream
    queries = stream.queries.filter(enabled=True).order_by("id").prefetch_related("predicates")
    return {
        "version": version,
        "evaluator": evaluator.pk,
        "stream": {
            "id": stream.pk,
            "name": stream.name,
            "schema": stream.schema.to_document(),
            "source": stream.source_spec(),
        },
        "queries": [q.plan_entry() for q in queries],
    }


def publish_plan(stream_id: int) -> int | None:
    """Write a new plan version for the stream's evaluator; returns the version (None: no evaluator)."""
    with transaction.atomic():
        evaluator = Evaluator.objects.select_for_update().select_related("stream__schema").filter(stream_id=stream_id).first()
        if evaluator is None:
            return None
        evaluator.plan_version += 1
        evaluator.save(update_fields=["plan_version"])
        bus.write_plan(redis_client(), evaluator.pk, build_plan(evaluator, evaluator.plan_version))
    return evaluator.plan_version


def _publish_quietly(stream_id: int) -> None:
    try:
        publish_plan(stream_id)
    except Exception:  # Redis down: the supervisor rewrites a missing or stale plan.
        log.exception("could not publish the plan of stream %s", stream_id)


def publish_plan_on_commit(stream_id: int | None) -> None:
    """Publish the stream's plan once the current transaction commits (once per transaction)."""
    if stream_id is None:
        return
    for entry in connection.run_on_commit:
        if getattr(entry[1], "plan_stream_id", None) == stream_id:
            return
    def callback() -> None:
        _publish_quietly(stream_id)
    callback.plan_stream_id = stream_id  # type: ignore[attr-defined]
    transaction.on_commit(callback)
