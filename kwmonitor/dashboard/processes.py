"""The processes of a stream as its page shows them: each evaluator, the pre-processor and the capture, with
the sharing classes placed on each evaluator, its rate and its lag behind ingest."""

from __future__ import annotations

from typing import Any, Mapping

import redis

from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.liveness import read_liveness
from kwmonitor.streams.models import Evaluator, Stream
from streaming import bus
from streaming.evaluator_state import StateField
from streaming.events import BatchMetrics
from streaming.placement import Placement, units_of
from streaming.schema import Schema
from streaming.sharing.properties import QueryEntry

__all__ = ["stream_processes"]


def _classes(stream: Stream, placement: Placement, primary: int,
             visible: frozenset[int] | None) -> dict[int, list[dict[str, Any]]]:
    """Per evaluator id, its placement units: label, query names, whether the unit is moving there or away.

    Only the units holding a query in ``visible`` (None: all) are listed, naming only those queries
    (``others``: how many more the unit holds)."""
    queries = list(KeywordQuery.objects.filter(stream=stream, enabled=True).order_by("id").prefetch_related("predicates"))
    if not queries:
        return {}
    names = {q.pk: q.name for q in queries}
    schema = Schema.from_dict(stream.schema.to_document())
    units = units_of([QueryEntry.model_validate(q.plan_entry()) for q in queries], schema)
    move = placement.move if placement.moving else None
    out: dict[int, list[dict[str, Any]]] = {}
    for unit in units:
        shown = [q for q in unit.queries if visible is None or q in visible]
        if not shown:
            continue
        home = placement.assignment.get(unit.queries[0], primary)
        moving = move is not None and bool(set(move.queries) & set(unit.queries))
        entry = {"label": unit.label, "queries": [names[q] for q in shown], "others": len(unit.queries) - len(shown),
                 "moving": f"moving to evaluator {move.target}" if moving and move else ""}
        out.setdefault(home, []).append(entry)
        if moving and move is not None:
            out.setdefault(move.target, []).append(dict(entry, moving=f"joining from evaluator {home}"))
    return out


def stream_processes(client: redis.Redis, stream: Stream, metrics: Mapping[int, BatchMetrics],
                     visible: frozenset[int] | None = None) -> list[dict[str, Any]]:
    """One row per process the stream wants (primary, secondaries, pre-processor); ``metrics``: the last
    batch metrics of each evaluator; ``visible``: the queries the viewer may see (None: all)."""
    rows = sorted((e for e in stream.evaluators.all() if e.wanted), key=Evaluator.process_order)
    if not rows:
        return []
    lives = read_liveness(client, rows)
    with client.pipeline(transaction=False) as pipe:
        for e in rows:
            pipe.hmget(bus.Keys.evaluator_state(e.pk), StateField.SEQ, StateField.BATCH_MS, StateField.ROWS_PER_SECOND)
        pipe.get(bus.Keys.stream_seq(stream.pk))
        replies = pipe.execute()
    ingested = int(replies[-1]) - 1 if replies[-1] else -1
    classes = _classes(stream, Placement.from_json(stream.placement), stream.evaluator.pk, visible)
    out = []
    for e, live, (applied, batch_ms, rows_per_second) in zip(rows, lives, replies):
        applied_seq = int(applied) if applied is not None and e.role != "capture" else None
        batch = metrics.get(e.pk)
        if batch is not None:  # an evaluator: its last batch metrics event; the pre-processor: its state hash
            batch_ms, rows_per_second = batch.duration_ms, batch.rows_per_second
        out.append({
            "id": e.pk, "name": str(e), "role": e.get_role_display(), "status": live.status, "detail": live.detail,
            "pid": live.pid, "host": live.host, "applied_seq": applied_seq,
            "lag": max(0, ingested - applied_seq) if applied_seq is not None else None,
            "rows_per_second": (float(rows_per_second) if rows_per_second is not None and live.status == "running"
                                else None),
            "batch_ms": float(batch_ms) if batch_ms is not None else None,
            "classes": classes.get(e.pk, []) if e.role in ("primary", "secondary") else [],
        })
    return out
