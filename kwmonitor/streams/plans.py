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
from django.db.models import F

from streaming import bus
from streaming.sharing.properties import EvaluatorPlan

from .connection import redis_client
from .models import Evaluator, Stream

__all__ = ["build_plan", "publish_plan", "publish_plan_on_commit", "request_narrowing"]

log = logging.getLogger(__name__)


def build_plan(evaluator: Evaluator, version: int) -> dict[str, Any]:
    """The evaluator's plan (checked against :class:`~streaming.sharing.properties.EvaluatorPlan`).

    Queries come in id order (the registration order of sharing); an
    aggregate subscription whose source query is disabled is left out. An XML
    stream's plan carries its DTD and its enabled WXQuery subscriptions.
    """
    stream = evaluator.stream
    queries = list(stream.queries.filter(enabled=True).order_by("id").prefetch_related("predicates"))
    enabled = {q.pk for q in queries}
    aggregates = [a for a in stream.aggregates.filter(enabled=True).order_by("id")
                  if a.source_query_id is None or a.source_query_id in enabled]
    subscriptions = list(stream.wxquery_subscriptions.filter(enabled=True).order_by("id")) if stream.is_xml else []
    plan = EvaluatorPlan.model_validate({
        "version": version,
        "evaluator": evaluator.pk,
        "stream": {
            "id": stream.pk,
            "name": stream.name,
            "schema": stream.schema.to_document(),
            "source": stream.source_spec(),
            "dtd": stream.dtd if stream.is_xml else None,
        },
        "queries": [q.plan_entry() for q in queries],
        "aggregates": [a.plan_entry() for a in aggregates],
        "subscriptions": [s.plan_entry() for s in subscriptions],
        "narrow": stream.narrow_requests,
    })
    return plan.model_dump(mode="json", by_alias=True)


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


def request_narrowing(stream: Stream) -> Stream:
    """Ask the stream's evaluator to narrow every sharing class now: bump the counter its plan carries."""
    with transaction.atomic():
        Stream.objects.filter(pk=stream.pk).update(narrow_requests=F("narrow_requests") + 1)
        publish_plan_on_commit(stream.pk)
    stream.refresh_from_db(fields=["narrow_requests"])
    return stream
