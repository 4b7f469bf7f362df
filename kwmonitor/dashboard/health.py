"""What is alive now: the Celery worker and beat, each stream's evaluator and input, each query.

Liveness comes from signs of life, never from the last event: an evaluator
is what its heartbeat says while the heartbeat is fresh
(``EVALUATOR_UNRESPONSIVE_SECONDS``) and shows progress, ``stalled`` when
its heartbeat says no batch was applied for ``EVALUATOR_STALL_SECONDS``
while input waited, and ``unresponsive`` when one that should be running
has no heartbeat, whatever its last status event or database row said; the
time it was last seen is its own last heartbeat's. Beat is alive while its heartbeat (:mod:`kwmonitor.beat`) is fresh; a
worker while it answers a ping (cached for ``WORKER_PING_CACHE_SECONDS``).
The input rate of a stream is what ingest recorded over the last
``INPUT_RATE_WINDOW_SECONDS``; with nothing in that window the stream is idle.
``GET /status/`` answers :func:`health_report` and the pages poll it.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import redis
from django.conf import settings

from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.models import Evaluator, Stream
from streaming import bus
from streaming.events import ComponentHealth, EvaluatorStatus, HealthReport, QueryHealth, StreamHealth

from .access import visible_queries, visible_streams

__all__ = ["evaluator_liveness", "worker_health", "beat_health", "stream_health", "query_health", "health_report"]

_WORKER_PING_KEY = "kw:component:worker:ping"


def _clock(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.timezone.utc).strftime("%H:%M:%S UTC")


def evaluator_liveness(evaluator: Evaluator | None, heartbeat: EvaluatorStatus | None, now: float,
                       last_seen: float | None = None) -> tuple[str, str, float | None]:
    """(status, detail, heartbeat age in seconds) of a stream's evaluator, from its heartbeat first;
    ``last_seen``: the time of its last heartbeat once the heartbeat itself expired (None: never seen)."""
    age = None if heartbeat is None else max(0.0, now - heartbeat.ts)
    if heartbeat is not None and age <= settings.EVALUATOR_UNRESPONSIVE_SECONDS:
        if heartbeat.stalled_for(now) > settings.EVALUATOR_STALL_SECONDS:
            return "stalled", heartbeat.stall_detail(now), age
        return heartbeat.status, heartbeat.detail, age
    if evaluator is None:
        return "stopped", "", age
    seen = heartbeat.ts if heartbeat is not None else last_seen
    silent = (f"no heartbeat for {now - seen:.0f} s (last seen {_clock(seen)})" if seen is not None
              else "no heartbeat yet")
    if evaluator.status == "running":
        return "unresponsive", f"{silent}; pid {evaluator.pid} on {evaluator.host or '?'}", age
    if evaluator.status in ("starting", "restarting"):
        started = evaluator.started_at.timestamp() if evaluator.started_at else now
        seen = evaluator.heartbeat_at is not None and evaluator.heartbeat_at.timestamp() >= started
        if heartbeat is not None or seen or now - started > settings.EVALUATOR_FIRST_HEARTBEAT_SECONDS:
            return "unresponsive", silent, age
        return evaluator.status, "waiting for its first heartbeat", age
    if evaluator.status == "failed":
        return "failed", evaluator.last_error, age
    return evaluator.status, "", age


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


def _fresh(heartbeat: EvaluatorStatus | None, now: float) -> bool:
    return heartbeat is not None and now - heartbeat.ts <= settings.EVALUATOR_UNRESPONSIVE_SECONDS


def stream_health(client: redis.Redis, stream: Stream, evaluator: Evaluator | None,
                  heartbeat: EvaluatorStatus | None, now: float) -> StreamHealth:
    """The stream's evaluator liveness (given its heartbeat, None: none in Redis) and its input."""
    last_seen = None if evaluator is None or heartbeat is not None else bus.read_last_heartbeat_at(client, evaluator.pk)
    status, detail, age = evaluator_liveness(evaluator, heartbeat, now, last_seen)
    fresh = _fresh(heartbeat, now)
    window = settings.INPUT_RATE_WINDOW_SECONDS
    rate, last_op_at = bus.read_input(client, stream.pk, window, now)
    return StreamHealth(
        stream=stream.pk, evaluator=status, detail=detail,
        pid=heartbeat.pid if fresh else None, host=heartbeat.host if fresh else "",
        plan_version=heartbeat.plan_version if fresh else (evaluator.plan_version if evaluator else 0),
        heartbeat_age=age, input_rate=rate, rate_window=window,
        idle=last_op_at is None or now - last_op_at > window, last_op_at=last_op_at,
    )


def query_health(query: KeywordQuery, streams: dict[int, StreamHealth], errors: dict[int, dict[str, str]]) -> QueryHealth:
    """Whether a query is evaluated now; ``errors`` are the query errors of each stream's fresh heartbeat."""
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
    streams = {}
    errors: dict[int, dict[str, str]] = {}
    for stream in streams_qs:
        evaluator = next((e for e in stream.evaluators.all() if e.role == "primary"), None)
        heartbeat = bus.read_heartbeat(client, evaluator.pk) if evaluator is not None else None
        streams[stream.pk] = stream_health(client, stream, evaluator, heartbeat, now)
        if heartbeat is not None and _fresh(heartbeat, now):
            errors[stream.pk] = heartbeat.query_errors
    queries = [query_health(q, streams, errors) for q in queries_qs]
    return HealthReport(components=[worker_health(client), beat_health(client, now)], streams=list(streams.values()),
                        queries=queries, ts=now)
