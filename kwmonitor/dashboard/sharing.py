"""The Sharing page (staff): each stream's sharing classes and what sharing saves, from the evaluator's report.

The evaluator writes a :class:`~streaming.events.SharingReport` to Redis every
few seconds (``bus.read_sharing_report``); the page renders it with the names
of the member queries, and ``static/kwmonitor/js/fragments.js`` swaps in a fresh
rendering of the same fragment every few seconds.
"""

from __future__ import annotations

import time
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from redis.exceptions import RedisError

from kwmonitor.queries.models import AggregateSubscription, KeywordQuery
from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.models import Stream
from streaming import bus

__all__ = ["sharing", "sharing_fragment", "stream_sharing"]

REFRESH_MS = 5_000


def _ratio(alone: float, shared: float) -> str:
    if not shared:
        return "–"
    return f"{alone / shared:.1f}×"


def stream_sharing(stream: Stream) -> dict[str, Any]:
    """What the page shows of one stream: its report with query names, totals and ratios (or why none)."""
    try:
        report = bus.read_sharing_report(redis_client(), stream.pk)
    except RedisError as exc:
        return {"stream": stream, "error": f"the bus (Redis) does not answer: {exc}"}
    if report is None:
        return {"stream": stream, "error": "no report yet: the evaluator reports its classes every 10 s while it runs"}
    ids = {m for cls in report.classes for m in cls["members"]}
    ids |= {a["source_query"] for a in report.aggregate_classes if a.get("source_query")}
    names = dict(KeywordQuery.objects.filter(pk__in=ids).values_list("pk", "name"))
    subscriptions = {a.pk: a for a in AggregateSubscription.objects.filter(stream=stream)}
    classes = []
    for cls in report.classes:
        props = cls["properties"]
        classes.append({
            **cls,
            "keywords": props.get("keywords", []),
            "filter": props.get("output") == "tuples",
            "selection": props.get("selection", {}),
            "members_named": [{"id": m, "name": names.get(m, f"query {m}")} for m in cls["members"]],
            "shares": len(cls["members"]) > 1,
        })
    totals = report.totals
    aggregates = [{**a, "names": [subscriptions[s].name if s in subscriptions else f"#{s}" for s in a["subscribers"]],
                   "source_name": names.get(a.get("source_query"), f"query {a.get('source_query')}")}
                  for a in report.aggregate_classes]
    return {
        "stream": stream,
        "report": report,
        "age": max(0.0, time.time() - report.ts),
        "classes": classes,
        "aggregates": aggregates,
        "savings": [
            {"label": "stored tuples", "shared": totals.get("stored_tuples", 0), "alone": totals.get("stored_tuples_alone", 0),
             "ratio": _ratio(totals.get("stored_tuples_alone", 0), totals.get("stored_tuples", 0)),
             "note": "one store for the stream vs one per query holding its own window"},
            {"label": "lattice nodes", "shared": totals.get("lattice_nodes", 0), "alone": totals.get("lattice_nodes_alone", 0),
             "ratio": _ratio(totals.get("lattice_nodes_alone", 0), totals.get("lattice_nodes", 0)),
             "note": "one lattice per class vs one per keyword query"},
            {"label": "evaluations per op", "shared": round(totals.get("evaluations_per_op", 0.0), 2),
             "alone": round(totals.get("evaluations_per_op_alone", 0.0), 2),
             "ratio": _ratio(totals.get("evaluations_per_op_alone", 0.0), totals.get("evaluations_per_op", 0.0)),
             "note": "class evaluations the evaluator made per op vs one per query per op"},
        ],
    }


def _streams(request: HttpRequest) -> list[dict[str, Any]]:
    return [stream_sharing(s) for s in Stream.objects.select_related("schema").order_by("name")]


@staff_member_required
def sharing(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/sharing.html", {"streams": _streams(request), "refresh_ms": REFRESH_MS})


@staff_member_required
def sharing_fragment(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/sharing_streams.html", {"streams": _streams(request)})
