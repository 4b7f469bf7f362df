"""What is alive now: the Celery worker and beat, each stream's evaluator and input, each query.

Liveness comes from signs of life, never from the last event: an evaluator
is what :func:`kwmonitor.streams.liveness.liveness` makes of its heartbeat
(and, without one, of what the supervisor last did), as everywhere else.
Beat is alive while its heartbeat (:mod:`kwmonitor.beat`) is fresh; a
worker while it answers a ping (cached for ``WORKER_PING_CACHE_SECONDS``).
The input rate of a stream is what ingest recorded over the last
``INPUT_RATE_WINDOW_SECONDS``; with nothing in that window the stream is idle.
``GET /status/`` answers :func:`health_report` and the pages poll it.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from django.conf import settings

from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.liveness import Liveness, liveness, read_liveness
from kwmonitor.streams.models import Stream
from streaming import bus
from streaming.events import ComponentHealth, HealthReport, QueryHealth, StreamHealth

from .access import visible_queries, visible_streams

__all__ = ["worker_health", "beat_health", "stream_health", "query_health", "health_report"]

_WORKER_PING_KEY = "kw:component:worker:ping"


def worker_health(client: redis.Redis) -> ComponentHealth:
    """Whether a Celery worker answers a ping (the answer is reused for a few seconds)."""
    cached = client.get(_WORKER_PING_KEY)
    if cached is not None:
        return ComponentHealth.model_validate_json(cached)
    from kwmonitor.celery import app

    replies = app.control.ping(timeout=settings.WORKER_PING_TIMEOUT_SECONDS)
    names = sorted(name for reply in replies for name in reply)
    health = ComponentHealth(
        name="worker", alive=bool(names),
        detail=", ".join(names) if names else "no Celery worker answers: evaluators are not supervised, history is not saved",
    )
    client.set(_WORKER_PING_KEY, health.model_dump_json(), ex=settings.WORKER_PING_CACHE_SECONDS)
    return health


def beat_health(client: redis.Redis, now: float) -> ComponentHealth:
    """Whether Celery beat wrote its heartbeat lately."""
    heartbeat = bus.read_component_heartbeat(client, "beat")
    if heartbeat is not None and now - heartbeat.ts <= settings.BEAT_UNRESPONSIVE_SECONDS:
        return ComponentHealth(name="beat", alive=True, detail=f"pid {heartbeat.pid} on {heartbeat.host}")
    since = "never seen" if heartbeat is None else f"silent for {now - heartbeat.ts:.0f} s"
    return ComponentHealth(name="beat", alive=False,
                           detail=f"Celery beat is {since}: no supervision or history rounds are scheduled")


def stream_health(client: redis.Redis, stream: Stream, live: Liveness, now: float) -> StreamHealth:
    """The stream's evaluator as it is now (``live``) and its input."""
    window = settings.INPUT_RATE_WINDOW_SECONDS
    rate, last_op_at = bus.read_input(client, stream.pk, window, now)
    return StreamHealth(
        stream=stream.pk, evaluator=live.status, detail=live.detail, pid=live.pid, host=live.host,
        plan_version=live.plan_version, heartbeat_age=live.heartbeat_age, input_rate=rate, rate_window=window,
        idle=last_op_at is None or now - last_op_at > window, last_op_at=last_op_at,
    )


def query_health(query: KeywordQuery, streams: dict[int, StreamHealth], errors: dict[int, dict[str, str]]) -> QueryHealth:
    """Whether a query is evaluated now; ``errors`` are the query errors of each stream's current heartbeat."""
    if not query.enabled:
        return QueryHealth(query=query.pk, state="disabled", detail="disabled: not evaluated, results kept as they were")
    if query.stream_id is None:
        return QueryHealth(query=query.pk, state="no stream", detail="on no stream: nothing to evaluate")
    error = errors.get(query.stream_id, {}).get(str(query.pk))
    if error:
        return QueryHealth(query=query.pk, state="error", detail=error)
    stream = streams.get(query.stream_id)
    if stream is not None and stream.evaluator != "running":
        return QueryHealth(query=query.pk, state="not running", detail=f"the stream's evaluator is {stream.evaluator}")
    return QueryHealth(query=query.pk, state="evaluating")


def health_report(user: Any, stream_ids: list[int] | None = None, query_ids: list[int] | None = None) -> HealthReport:
    """The components, and the streams and queries ``user`` may see (optionally only the given ones)."""
    client = redis_client()
    now = time.time()
    streams_qs = visible_streams(user).prefetch_related("evaluators")
    queries_qs = visible_queries(user)
    if stream_ids is not None:
        streams_qs = streams_qs.filter(pk__in=stream_ids)
    if query_ids is not None:
        queries_qs = queries_qs.filter(pk__in=query_ids)
    listed = [(stream, next((e for e in stream.evaluators.all() if e.role == "primary"), None))
              for stream in streams_qs]
    primaries = [evaluator for _, evaluator in listed if evaluator is not None]
    lives = dict(zip((e.pk for e in primaries), read_liveness(client, primaries, now)))
    streams = {}
    errors: dict[int, dict[str, str]] = {}
    for stream, evaluator in listed:
        live = lives[evaluator.pk] if evaluator is not None else liveness(None, None, now)
        streams[stream.pk] = stream_health(client, stream, live, now)
        errors[stream.pk] = live.query_errors
    queries = [query_health(q, streams, errors) for q in queries_qs]
    return HealthReport(components=[worker_health(client), beat_health(client, now)], streams=list(streams.values()),
                        queries=queries, ts=now)
