"""Evaluator plans: the JSON each evaluator re-reads at every batch boundary.

A plan lists the stream (schema and source) and the enabled queries the
evaluator runs. They are rebuilt and written with new versions after every
committed change to the stream, its schema or its queries; versions are
bumped while the stream's evaluator rows are locked, so plans reach Redis in
version order. A stream with several evaluators has its queries placed by
:mod:`streaming.placement` (the placement is kept on the stream, each move
ended by :func:`advance_placement`, which the supervision round calls).
"""

from __future__ import annotations

import logging

from django.db import connection, transaction
from django.db.models import F

from streaming import bus
from streaming.evaluator_state import StateField, decode_joined
from streaming.placement import Move, Placement, evaluator_plans, handoff_complete, place, unit_costs, units_of
from streaming.schema import Schema
from streaming.seqs import published_seq_of
from streaming.sharing.properties import EvaluatorPlan, QuerySource

from .connection import redis_client
from .models import Evaluator, Stream

__all__ = ["build_plan", "publish_plan", "publish_plan_on_commit", "request_narrowing", "advance_placement"]

log = logging.getLogger(__name__)


def build_plan(evaluator: Evaluator, version: int) -> EvaluatorPlan:
    """The evaluator's plan.

    Queries come in id order (the registration order of sharing); an
    aggregate subscription whose source query is disabled is left out. The
    stream's clock guard goes with it (the evaluator judges every op's time
    by it, as ingest does). An XML stream's plan carries its DTD and its
    enabled WXQuery subscriptions. The disabled queries are listed as
    ``frozen``: their results stay published as they were.
    """
    stream = evaluator.stream
    queries = list(stream.queries.filter(enabled=True).order_by("id").prefetch_related("predicates"))
    enabled = {q.pk for q in queries}
    aggregates = [a for a in stream.aggregates.filter(enabled=True).order_by("id")
                  if a.source_query_id is None or a.source_query_id in enabled]
    subscriptions = list(stream.wxquery_subscriptions.filter(enabled=True).order_by("id")) if stream.is_xml else []
    return EvaluatorPlan.model_validate({
        "version": version,
        "evaluator": evaluator.pk,
        "stream": {
            "id": stream.pk,
            "name": stream.name,
            "schema": stream.schema.to_document(),
            "source": stream.source_spec(),
            "dtd": stream.dtd if stream.is_xml else None,
            "clock": stream.clock_guard(),
        },
        "queries": [q.plan_entry() for q in queries],
        "aggregates": [a.plan_entry() for a in aggregates],
        "subscriptions": [s.plan_entry() for s in subscriptions],
        "narrow": stream.narrow_requests,
        "frozen": list(stream.queries.filter(enabled=False).order_by("id").values_list("pk", flat=True)),
    })


def _evaluators(stream_id: int) -> list[Evaluator]:
    """The stream's evaluator rows (not the pre-processor nor the capture), locked, primary first."""
    rows = Evaluator.objects.select_for_update().select_related("stream__schema").filter(stream_id=stream_id)
    return sorted(rows.exclude(role__in=("preprocessor", "capture")).order_by("pk"), key=Evaluator.process_order)


def publish_plan(stream_id: int, placement: Placement | None = None) -> int | None:
    """Write new plan versions for the stream's evaluators; returns the primary's version (None: none).

    The queries are placed again (``streaming.placement.place``, costs from
    the evaluators' sharing reports) unless ``placement`` is given.
    """
    with transaction.atomic():
        rows = _evaluators(stream_id)
        if not rows or rows[0].role != "primary":
            return None
        primary, stream = rows[0], rows[0].stream
        wanted = [e for e in rows if e.wanted]
        preprocessor = Evaluator.objects.filter(stream=stream, role="preprocessor").values_list("pk", flat=True).first()
        built = build_plan(primary, 0)
        source = stream.evaluator_source([e.pk for e in wanted], preprocessor)
        full = built.model_copy(update={"stream": built.stream.model_copy(update={"source": source})})
        client = redis_client()
        if placement is None:
            placement = _place(stream, full, [e.pk for e in wanted], client)
        stream.placement = placement.to_json()
        Stream.objects.filter(pk=stream.pk).update(placement=stream.placement)
        for evaluator in wanted:
            evaluator.plan_version += 1
            evaluator.save(update_fields=["plan_version"])
        plans = evaluator_plans(full, [e.pk for e in wanted], placement, {e.pk: e.plan_version for e in wanted})
        with client.pipeline(transaction=True) as pipe:
            # the readers' consumers first: a running reader holds files back for a consumer it was not started with
            for directory, ids in stream.landing_consumers([e.pk for e in wanted], preprocessor).items():
                bus.write_landing_consumers(pipe, stream.pk, directory, ids)
            for evaluator_id, plan in plans.items():
                bus.write_plan(pipe, evaluator_id, plan)
            pipe.execute()
    return primary.plan_version


def _place(stream: Stream, full: EvaluatorPlan, evaluator_ids: list[int], client) -> Placement:
    """The stream's placement by the rule of ``streaming.placement``, from the measured costs."""
    if len(evaluator_ids) == 1:
        return Placement({q.id: evaluator_ids[0] for q in full.queries})
    schema = Schema.from_dict(full.stream.schema_)
    units = units_of(full.queries, schema)
    reports = [r.model_dump() for r in bus.read_sharing_reports(client, stream.pk)]
    pinned = [a.source.query for a in full.aggregates if isinstance(a.source, QuerySource)]
    return place(units, unit_costs(units, reports), evaluator_ids, Placement.from_json(stream.placement), pinned)


def advance_placement(stream_id: int) -> str:
    """One step of the stream's placement (the supervision round): end a move whose target has
    joined and whose source has published through the join seq, or start one the rule asks for.
    Returns what was done ("" = nothing)."""
    stream = Stream.objects.filter(pk=stream_id).first()
    if stream is None or stream.evaluator_processes < 2:  # a single evaluator's plan has no move (``_place``)
        return ""
    current = Placement.from_json(stream.placement)
    client = redis_client()
    move = current.move
    if current.moving and move is not None:
        joined = decode_joined(client.hget(bus.Keys.evaluator_state(move.target), StateField.JOINED))
        source_published = published_seq_of(client, bus.Keys.evaluator_state(move.source))
        if not handoff_complete(move, joined, source_published):
            return ""
        done = Placement(current.assignment | {q: move.target for q in move.queries},
                         Move(move.queries, move.source, move.target, done=True))
        publish_plan(stream_id, done)
        log.info("stream %s: queries %s moved from evaluator %s to %s", stream_id, list(move.queries), move.source,
                 move.target)
        return f"moved queries {list(move.queries)} from evaluator {move.source} to {move.target}"
    with transaction.atomic():
        rows = [e for e in _evaluators(stream_id) if e.wanted]
        full = build_plan(rows[0], 0)
        proposed = _place(rows[0].stream, full, [e.pk for e in rows], client)
    if proposed.to_json() == current.to_json():
        return ""
    publish_plan(stream_id, proposed)
    if proposed.moving and proposed.move is not None:
        return f"moving queries {list(proposed.move.queries)} from evaluator {proposed.move.source} to {proposed.move.target}"
    return "placed"


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
