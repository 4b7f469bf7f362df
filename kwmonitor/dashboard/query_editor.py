"""The dashboard's query editor: signed-in users create, edit, disable and delete their own saved queries.

A user writes queries on the streams open to user queries (staff on any) and
edits only those they may see (their own; staff everyone's), with the forms
of :mod:`kwmonitor.queries.forms`, so the models validate a query saved here
as they validate one saved in the admin. ``static/kwmonitor/js/query_editor.js``
turns the keywords into chips and the predicates into pickers built from the
stream's schema, with typed value inputs, and asks for a preview as the query
changes: its NT and CN counts (as the admin previews them), the sharing
class it would join and its estimated cost (:mod:`kwmonitor.queries.forecast`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from kwmonitor.queries.forecast import forecast, new_query_id
from kwmonitor.queries.forms import QueryForm, predicate_forms
from kwmonitor.queries.models import OPS, KeywordQuery
from kwmonitor.queries.preview import preview_counts
from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.models import Stream
from streaming.schema import SchemaError
from streaming.sharing.properties import QueryEntry

from .access import queryable_streams, visible_queries

__all__ = ["query_new", "query_edit", "query_preview", "query_enabled", "query_delete"]

# Operators offered per attribute type (the model refuses the others: bool has no order).
TYPE_OPS = {"bool": ["=", "!="]}


def _schemas(streams: QuerySet[Stream]) -> dict[str, Any]:
    """What the editor's pickers need of each stream: its relations, their attributes and types, the operators."""
    out = {}
    for stream in streams:
        try:
            doc = stream.schema.graph().to_dict()
        except SchemaError:
            continue
        out[str(stream.pk)] = {"name": stream.name, "relations": [
            {"name": r["name"], "key": r["key"], "attributes": r["attributes"]} for r in doc["relations"]]}
    return {"streams": out, "ops": list(OPS), "type_ops": TYPE_OPS}


def _editable(request: HttpRequest, pk: int) -> KeywordQuery:
    return get_object_or_404(visible_queries(request.user), pk=pk)


def _streams_for(request: HttpRequest, query: KeywordQuery) -> QuerySet[Stream]:
    streams = queryable_streams(request.user)
    if query.stream_id is not None:  # a query keeps its stream even if it was closed to user queries since
        streams = (streams | Stream.objects.filter(pk=query.stream_id)).distinct()
    return streams


def _edit(request: HttpRequest, query: KeywordQuery) -> HttpResponse:
    streams = _streams_for(request, query)
    data = request.POST if request.method == "POST" else None
    form = QueryForm(data, instance=query, streams=streams)
    predicates = predicate_forms(query, data)
    if data is not None:
        valid = form.is_valid()  # first: it gives the query its stream's schema, which the predicates check against
        if predicates.is_valid() and valid:
            with transaction.atomic():
                query = form.save()
                predicates.instance = query
                predicates.save()
            messages.success(request, f"Saved {query.name!r}: its stream's evaluator takes it at its next batch.")
            return redirect("dashboard:query", query.pk)
    return render(request, "dashboard/query_form.html", {
        "query": query, "form": form, "predicates": predicates, "has_streams": streams.exists(),
        "editor": {**_schemas(streams), "preview": reverse("dashboard:query-preview"),
                   "query": query.pk},
    })


@login_required
def query_new(request: HttpRequest) -> HttpResponse:
    return _edit(request, KeywordQuery(owner=request.user, enabled=True))


@login_required
def query_edit(request: HttpRequest, pk: int) -> HttpResponse:
    return _edit(request, _editable(request, pk))


@login_required
@require_POST
def query_preview(request: HttpRequest) -> HttpResponse:
    """The preview of the editor's current content (nothing is saved): errors, or counts, class and cost."""
    pk = request.POST.get("query", "")
    query = _editable(request, int(pk)) if pk.isdigit() else KeywordQuery(owner=request.user)
    form = QueryForm(request.POST, instance=query, streams=_streams_for(request, query))
    predicates = predicate_forms(query, request.POST)
    valid = form.is_valid()
    if not (predicates.is_valid() and valid):
        errors = [f"{form.fields[f].label if f in form.fields else ''}: {e}".lstrip(": ")
                  for f, es in form.errors.items() for e in es]
        errors += [e for f in predicates.forms for es in f.errors.values() for e in es]
        errors += list(predicates.non_form_errors())
        return render(request, "dashboard/query_preview.html", {"errors": errors})
    kept = [f.cleaned_data for f in predicates.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")]
    entry = QueryEntry(id=query.pk or new_query_id(), keywords=query.keyword_list(), tmax=query.tmax,
                       window_seconds=query.window_seconds,
                       predicates=[{k: p[k] for k in ("relation", "attribute", "op", "value")} for p in kept])
    stream = form.cleaned_data["stream"]
    counts = None if query.is_filter else preview_counts(stream.schema.graph().to_dict(), entry.keywords, entry.tmax)
    outlook = forecast(stream, entry, redis_client())
    names = dict(visible_queries(request.user).filter(pk__in=outlook.members).values_list("pk", "name"))
    return render(request, "dashboard/query_preview.html", {
        "query": query, "counts": counts, "forecast": outlook, "stream": stream,
        "members_named": [{"pk": m, "name": names[m]} for m in outlook.members if m in names],
        "members_hidden": sum(1 for m in outlook.members if m not in names),
        "cost_before_us": None if outlook.cost_before is None else outlook.cost_before * 1e6,
        "cost_after_us": None if outlook.cost_after is None else outlook.cost_after * 1e6,
        "cn_limit": settings.QUERY_CN_WARNING,
    })


@login_required
@require_POST
def query_enabled(request: HttpRequest, pk: int) -> HttpResponse:
    """Enable or disable (``enabled`` = ``on`` or ``off``) a query the user may edit."""
    query = _editable(request, pk)
    query.enabled = request.POST.get("enabled") == "on"
    query.save(update_fields=["enabled", "updated"])
    messages.success(request, f"{query.name!r} {'enabled' if query.enabled else 'disabled'}.")
    return redirect("dashboard:query", query.pk)


@login_required
def query_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: ask; POST: delete the query (its results and history go with it)."""
    query = _editable(request, pk)
    if request.method == "POST":
        name = query.name
        query.delete()
        messages.success(request, f"Deleted {name!r}.")
        return redirect("dashboard:overview")
    return render(request, "dashboard/query_delete.html", {"query": query})
