"""Dashboard pages (overview, query, stream, schema), the status endpoint and the error pages.

Pages are server-rendered from the database and the current state in Redis;
the live parts are then kept up to date by the websocket feeds (see
``static/kwmonitor/js/``), which the pages join at the ids they were rendered at,
and by polling ``GET /status/`` (:mod:`kwmonitor.dashboard.health`), which says
what is alive: an evaluator that stopped beating, a dead worker or beat, an
idle stream show within seconds although no event announces them.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.urls import reverse
from redis import Redis
from redis.exceptions import RedisError

from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.sender import query_config
from streaming import bus
from streaming.events import BatchMetrics, HealthReport, parse_event
from streaming.schema import SchemaError

from kwmonitor.queries.models import KeywordQuery
from kwmonitor.queries.sharing import sharing_note

from .access import (may_see_dead_letter_lines, queryable_streams, visible_aggregates, visible_queries, visible_schemas,
                     visible_streams, visible_subscriptions)
from .audience import audience_of
from .health import health_report
from .processes import stream_processes
from .schema_graph import draw_schema
from .source import source_panel

__all__ = ["overview", "query_detail", "query_sharing_note", "stream_detail", "schema_detail", "status", "favicon"]

RATE_WINDOW_SECONDS = 300
RATE_SCAN_LIMIT = 20_000
METRICS_SCAN = 200
# Events the stream page searches for the last batch metrics of each of the stream's processes.
PROCESSES_SCAN = 400
STREAM_PAGE_REPLAY = 5_000
# How often the pages poll GET /status/ (milliseconds).
STATUS_POLL_MS = 3_000
# How often a query page fetches its sharing note again (milliseconds).
SHARING_NOTE_REFRESH_MS = 5_000


def batch_metrics(stream_id: int, scan: int = METRICS_SCAN) -> tuple[str, dict[int, BatchMetrics]]:
    """The id of the stream's last event and the last batch metrics of each evaluator among the last ``scan``
    events, newest first."""
    entries = redis_client().xrevrange(bus.Keys.stream_events(stream_id), count=scan)
    found: dict[int, BatchMetrics] = {}
    for _, fields in entries:
        try:
            event = parse_event(fields["data"])
        except ValueError:
            continue
        if isinstance(event, BatchMetrics) and event.evaluator not in found:
            found[event.evaluator] = event
    return (entries[0][0] if entries else "0-0"), found


def last_metrics(stream_id: int) -> tuple[str, BatchMetrics | None]:
    """The id of the stream's last event and its last batch metrics (None if none among the last few)."""
    last_id, found = batch_metrics(stream_id)
    return last_id, next(iter(found.values()), None)


def _aggregate_tiles(subscriptions: Any) -> list[dict[str, Any]]:
    """What an aggregate tile shows before its first value arrives on the stream feed."""
    out = []
    for a in subscriptions.filter(enabled=True).order_by("name", "id"):
        what = f"{a.get_aggregate_display()} of {a.attribute}" if a.attribute else (
            "count of new results" if a.source_query_id else "count of inserts")
        source = f"results of {a.source_query.name}" if a.source_query_id else a.source_relation
        unit = "s" if a.window_kind == "time" else "items"
        out.append({"id": a.pk, "name": a.name, "what": f"{what} ({source})",
                    "window": f"last {a.window} {unit}, every {a.step} {unit}",
                    "having": a.having})
    return out


def _status_config(report: HealthReport) -> dict[str, Any]:
    return {"url": reverse("dashboard:status"), "every_ms": STATUS_POLL_MS, "report": report.model_dump(mode="json")}


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    client = redis_client()
    streams = list(visible_streams(request.user).prefetch_related("evaluators").order_by("name"))
    queries = list(visible_queries(request.user).order_by("name", "id"))
    subscriptions = list(visible_subscriptions(request.user).order_by("name", "id"))
    with client.pipeline(transaction=False) as pipe:
        for q in queries:
            pipe.hlen(bus.Keys.live(q.pk))
        for s in subscriptions:
            pipe.xlen(bus.Keys.subscription_results(s.pk))
        counts = pipe.execute()
    live_counts, kept = counts[:len(queries)], counts[len(queries):]
    report = health_report(request.user)
    health = {s.stream: s for s in report.streams}
    states = {q.query: q for q in report.queries}
    rows = []
    for stream in streams:
        last_id, metrics = last_metrics(stream.pk)
        rows.append({"stream": stream, "health": health.get(stream.pk), "metrics": metrics, "last_id": last_id})
    return render(
        request,
        "dashboard/overview.html",
        {
            "stream_rows": rows,
            "query_rows": [{"query": q, "live": n, "health": states.get(q.pk)} for q, n in zip(queries, live_counts)],
            "subscription_rows": [{"subscription": s, "kept": n} for s, n in zip(subscriptions, kept)],
            "schemas": visible_schemas(request.user).order_by("name"),
            "may_write_queries": queryable_streams(request.user).exists(),
            "report": report,
            "feeds": [{"stream": r["stream"].pk, "after": r["last_id"]} for r in rows],
            "status": _status_config(report),
        },
    )


def _rate_history(query_id: int, now_ms: int) -> list[list[int]]:
    """Adds and removes per second over the last RATE_WINDOW_SECONDS: [[second, adds, removes], ...]."""
    start = now_ms - RATE_WINDOW_SECONDS * 1000
    entries = redis_client().xrevrange(bus.Keys.changes(query_id), min=f"{start}-0", count=RATE_SCAN_LIMIT)
    buckets: dict[int, list[int]] = {}
    for entry_id, fields in entries:
        kind = json.loads(fields["data"])["type"]
        if kind not in ("result.add", "result.remove"):
            continue
        second = int(entry_id.split("-")[0]) // 1000
        bucket = buckets.setdefault(second, [second, 0, 0])
        bucket[1 if kind == "result.add" else 2] += 1
    return sorted(buckets.values())


def _sharing(request: HttpRequest, client: Redis, query: KeywordQuery) -> dict[str, Any]:
    """The query's sharing note: its class and the other members the user may see, or why it has none."""
    sharing_class, reason = sharing_note(client, query)
    others = (list(visible_queries(request.user).filter(pk__in=sharing_class.others).values("pk", "name"))
              if sharing_class else [])
    return {"sharing_class": sharing_class, "sharing_others": others, "sharing_reason": reason}


@login_required
def query_sharing_note(request: HttpRequest, pk: int) -> HttpResponse:
    """The query page's sharing note alone (the page fetches it again every few seconds)."""
    query = get_object_or_404(visible_queries(request.user), pk=pk)
    return render(request, "dashboard/sharing_note.html", _sharing(request, redis_client(), query))


@login_required
def query_detail(request: HttpRequest, pk: int) -> HttpResponse:
    query = get_object_or_404(visible_queries(request.user).prefetch_related("predicates"), pk=pk)
    client = redis_client()
    with client.pipeline(transaction=False) as pipe:
        pipe.hlen(bus.Keys.live(query.pk))
        pipe.xlen(bus.Keys.changes(query.pk))
        live, changes = pipe.execute()
    report = health_report(request.user, stream_ids=[query.stream_id] if query.stream_id else [], query_ids=[query.pk])
    config = query_config(query)
    aggregates = _aggregate_tiles(visible_aggregates(request.user).filter(source_query=query))
    return render(
        request,
        "dashboard/query.html",
        {
            "query": query,
            "config": config,
            "live": live,
            "changes": changes,
            "health": report.queries[0],
            "report": report,
            "aggregates": aggregates,
            **_sharing(request, client, query),
            "sharing_refresh_ms": SHARING_NOTE_REFRESH_MS,
            "page": {
                "query": query.pk,
                "config": config.model_dump(mode="json"),
                "feed": f"/ws/queries/{query.pk}/",
                "aggregates": [a["id"] for a in aggregates],
                "stream_feed": f"/ws/streams/{query.stream_id}/?replay={STREAM_PAGE_REPLAY}" if aggregates else None,
                "rates": _rate_history(query.pk, int(time.time() * 1000)),
                "window": RATE_WINDOW_SECONDS,
            },
            "status": _status_config(report),
        },
    )


@login_required
def stream_detail(request: HttpRequest, pk: int) -> HttpResponse:
    stream = get_object_or_404(visible_streams(request.user).prefetch_related("evaluators"), pk=pk)
    evaluator = stream.evaluator
    _, per_process = batch_metrics(stream.pk, PROCESSES_SCAN)
    processes = stream_processes(redis_client(), stream, per_process, audience_of(request.user, stream.pk).queries)
    report = health_report(request.user, stream_ids=[stream.pk], query_ids=[])
    metrics = next(iter(per_process.values()), None)
    show_lines = may_see_dead_letter_lines(request.user)
    return render(
        request,
        "dashboard/stream.html",
        {
            "stream": stream,
            "evaluator": evaluator,
            "processes": processes if len(processes) > 1 else [],
            "health": report.streams[0],
            "metrics": metrics,
            "report": report,
            "show_lines": show_lines,
            "queries": visible_queries(request.user).filter(stream=stream).order_by("name"),
            "subscriptions": visible_subscriptions(request.user).filter(stream=stream).order_by("name"),
            "aggregates": _aggregate_tiles(visible_aggregates(request.user).filter(stream=stream)),
            "source": source_panel(stream),
            "page": {"stream": stream.pk, "feed": f"/ws/streams/{stream.pk}/?replay={STREAM_PAGE_REPLAY}",
                     "show_lines": show_lines},
            "status": _status_config(report),
        },
    )


@login_required
def schema_detail(request: HttpRequest, pk: int) -> HttpResponse:
    schema = get_object_or_404(visible_schemas(request.user), pk=pk)
    try:
        drawing, error = draw_schema(schema.graph()), ""
    except SchemaError as exc:
        drawing, error = None, str(exc)
    return render(
        request,
        "dashboard/schema.html",
        {"schema": schema, "drawing": drawing, "error": error, "streams": visible_streams(request.user).filter(schema=schema)},
    )


def status(request: HttpRequest) -> JsonResponse:
    """``GET /status/``: the :class:`~streaming.events.HealthReport` of what the user may see (JSON).

    ``?streams=1,2&queries=3`` narrows it to those ids; 401 when not logged in,
    503 when Redis does not answer (then nothing can be said about the rest).
    """
    if not request.user.is_authenticated:
        return JsonResponse({"error": "log in first"}, status=401)

    def ids(name: str) -> list[int] | None:
        raw = request.GET.get(name)
        return None if raw is None else [int(v) for v in raw.split(",") if v.strip().isdigit()]

    try:
        report = health_report(request.user, stream_ids=ids("streams"), query_ids=ids("queries"))
    except RedisError as exc:
        return JsonResponse({"error": f"the bus (Redis) does not answer: {exc}"}, status=503)
    return JsonResponse(report.model_dump(mode="json"))


def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico`` for clients that ask for it without reading the page's icon link."""
    return redirect(static("kwmonitor/favicon.svg"), permanent=True)
