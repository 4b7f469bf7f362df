"""Dashboard pages: overview, query, stream and schema.

Pages are server-rendered from the database and the current state in Redis;
the live parts are then kept up to date by the websocket feeds (see
``static/kwmonitor/js/``), which the pages join at the ids they were rendered at.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from kwmonitor.catalog.models import Schema
from kwmonitor.streams.connection import redis_client
from streaming import bus
from streaming.events import BatchMetrics, EvaluatorStatus, parse_event
from streaming.schema import SchemaError

from .access import visible_queries, visible_streams
from .schema_graph import draw_schema

__all__ = ["overview", "query_detail", "stream_detail", "schema_detail"]

RATE_WINDOW_SECONDS = 300
RATE_SCAN_LIMIT = 20_000
STATUS_SCAN = 200
STREAM_PAGE_REPLAY = 5_000


def _stream_state(stream_id: int, evaluator: Any) -> dict[str, Any]:
    """The latest status and batch metrics of a stream, from its Redis event stream and heartbeat."""
    client = redis_client()
    entries = client.xrevrange(bus.Keys.stream_events(stream_id), count=STATUS_SCAN)
    state: dict[str, Any] = {"last_id": entries[0][0] if entries else "0-0", "metrics": None, "status": None}
    for _, fields in entries:
        try:
            event = parse_event(fields["data"])
        except ValueError:
            continue
        if state["metrics"] is None and isinstance(event, BatchMetrics):
            state["metrics"] = event
        if state["status"] is None and isinstance(event, EvaluatorStatus):
            state["status"] = event.status
    heartbeat = bus.read_heartbeat(client, evaluator.pk) if evaluator is not None else None
    if heartbeat is not None:
        state["status"] = heartbeat.status
    elif state["status"] is None and evaluator is not None:
        state["status"] = evaluator.status
    state["heartbeat"] = heartbeat
    return state


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    client = redis_client()
    streams = list(visible_streams(request.user).select_related("evaluator").order_by("name"))
    queries = list(visible_queries(request.user).order_by("name", "id"))
    with client.pipeline(transaction=False) as pipe:
        for q in queries:
            pipe.hlen(bus.Keys.live(q.pk))
        live_counts = pipe.execute()
    rows = [{"stream": s, "state": _stream_state(s.pk, getattr(s, "evaluator", None))} for s in streams]
    return render(
        request,
        "dashboard/overview.html",
        {
            "stream_rows": rows,
            "query_rows": [{"query": q, "live": n} for q, n in zip(queries, live_counts)],
            "schemas": Schema.objects.order_by("name"),
            "feeds": [{"stream": r["stream"].pk, "after": r["state"]["last_id"]} for r in rows],
        },
    )


def _rate_history(query_id: int, now_ms: int) -> list[list[int]]:
    """Adds and removes per second over the last RATE_WINDOW_SECONDS: [[second, adds, removes], ...]."""
    start = now_ms - RATE_WINDOW_SECONDS * 1000
    entries = redis_client().xrevrange(bus.Keys.changes(query_id), min=f"{start}-0", count=RATE_SCAN_LIMIT)
    buckets: dict[int, list[int]] = {}
    for entry_id, fields in entries:
        second = int(entry_id.split("-")[0]) // 1000
        bucket = buckets.setdefault(second, [second, 0, 0])
        bucket[1 if json.loads(fields["data"])["type"] == "result.add" else 2] += 1
    return sorted(buckets.values())


@login_required
def query_detail(request: HttpRequest, pk: int) -> HttpResponse:
    query = get_object_or_404(visible_queries(request.user), pk=pk)
    client = redis_client()
    with client.pipeline(transaction=False) as pipe:
        pipe.hlen(bus.Keys.live(query.pk))
        pipe.xlen(bus.Keys.changes(query.pk))
        live, changes = pipe.execute()
    return render(
        request,
        "dashboard/query.html",
        {
            "query": query,
            "keywords": query.keyword_list(),
            "predicates": list(query.predicates.all()),
            "live": live,
            "changes": changes,
            "config": {
                "query": query.pk,
                "keywords": query.keyword_list(),
                "feed": f"/ws/queries/{query.pk}/",
                "rates": _rate_history(query.pk, int(time.time() * 1000)),
                "window": RATE_WINDOW_SECONDS,
            },
        },
    )


@login_required
def stream_detail(request: HttpRequest, pk: int) -> HttpResponse:
    stream = get_object_or_404(visible_streams(request.user).select_related("evaluator"), pk=pk)
    evaluator = getattr(stream, "evaluator", None)
    return render(
        request,
        "dashboard/stream.html",
        {
            "stream": stream,
            "evaluator": evaluator,
            "state": _stream_state(stream.pk, evaluator),
            "queries": visible_queries(request.user).filter(stream=stream).order_by("name"),
            "config": {"stream": stream.pk, "feed": f"/ws/streams/{stream.pk}/?replay={STREAM_PAGE_REPLAY}"},
        },
    )


@login_required
def schema_detail(request: HttpRequest, pk: int) -> HttpResponse:
    schema = get_object_or_404(Schema, pk=pk)
    try:
        drawing, error = draw_schema(schema.graph()), ""
    except SchemaError as exc:
        drawing, error = None, str(exc)
    return render(
        request,
        "dashboard/schema.html",
        {"schema": schema, "drawing": drawing, "error": error, "streams": visible_streams(request.user).filter(schema=schema)},
    )
