"""A PostgreSQL-sourced stream's source panel: its capture's liveness and lag, and what its slot holds.

The capture reports its progress in its state hash (``streaming.capture.process``):
the LSN it has stored, how many bytes of WAL the server has written past it,
how long after its commit the newest change was stored. Beat reports the
slot (``kwmonitor.streams.postgres.watch_slots``), whether the capture runs or
not: a stopped stream's slot keeps every byte of WAL written since, and the
panel says how much. The stream page renders the panel and
``static/kwmonitor/js/fragments.js`` swaps in a fresh one every few seconds.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import orjson
import redis
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.liveness import liveness, read_liveness
from kwmonitor.streams.models import Stream
from kwmonitor.streams.postgres import read_slot_report
from streaming import bus
from streaming.evaluator_state import StateField

from .access import visible_streams

__all__ = ["REFRESH_MS", "source_panel", "source_fragment"]

REFRESH_MS = 3_000
# A slot holding more WAL than this is shown as a warning.
SLOT_WARNING_BYTES = 1 << 30


def source_panel(stream: Stream) -> dict[str, Any] | None:
    """What the panel shows (None: the stream is not PostgreSQL-sourced)."""
    if not stream.is_captured:
        return None
    capture = next((e for e in stream.evaluators.all() if e.role == "capture"), None)
    panel: dict[str, Any] = {"stream": stream, "refresh_ms": REFRESH_MS, "capture": capture}
    try:
        client = redis_client()
        live = read_liveness(client, [capture])[0] if capture else liveness(None, None, time.time())
        raw_progress = client.hget(bus.Keys.evaluator_state(capture.pk), StateField.CAPTURE) if capture else None
        slot = read_slot_report(client, stream.pk)
    except redis.RedisError as exc:
        return {**panel, "error": f"the bus (Redis) does not answer: {exc}"}
    progress = orjson.loads(raw_progress) if raw_progress else None
    running = live.status == "running"
    return {
        **panel,
        "status": live.status,
        "detail": live.detail,
        "progress": progress,
        "running": running,
        "slot": slot,
        "slot_warning": bool(slot and (slot.get("held_bytes") or 0) > SLOT_WARNING_BYTES),
        "slot_checked_at": _moment(slot.get("checked_at") if slot else None),
        "last_commit_at": _moment(progress.get("last_commit_ts") if progress else None),
    }


def _moment(ts: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc) if ts is not None else None


@login_required
def source_fragment(request: HttpRequest, pk: int) -> HttpResponse:
    stream = get_object_or_404(visible_streams(request.user).prefetch_related("evaluators"), pk=pk)
    panel = source_panel(stream)
    if panel is None:
        raise Http404("not a PostgreSQL-sourced stream")
    return render(request, "dashboard/source_panel.html", {"source": panel})
