"""Shared argument handling and output of the start_evaluator / stop_evaluator commands."""

from __future__ import annotations

from django.core.management.base import CommandError

from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.liveness import read_liveness
from kwmonitor.streams.models import Evaluator


def evaluator_of(stream: str) -> Evaluator:
    """The evaluator of a stream given by name or id."""
    lookup = {"stream_id": int(stream)} if stream.isdigit() else {"stream__name": stream}
    evaluator = Evaluator.objects.select_related("stream").filter(role="primary", **lookup).first()
    if evaluator is None:
        raise CommandError(f"no stream {stream!r}")
    return evaluator


def describe(evaluator: Evaluator, launched: bool = False) -> str:
    """What the evaluator does now (its heartbeat's word, as the pages show it), after a start or stop;
    ``launched``: name the process the supervisor launched."""
    live = read_liveness(redis_client(), [evaluator])[0]
    pid = f", pid {evaluator.pid}" if launched else ""
    detail = f" ({live.detail})" if live.detail else ""
    return f"evaluator {evaluator.pk} of stream {evaluator.stream.name!r}: {live.status}{pid}{detail}"
