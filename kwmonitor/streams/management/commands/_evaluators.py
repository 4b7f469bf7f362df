"""Shared argument handling of the start_evaluator / stop_evaluator commands."""

from __future__ import annotations

from django.core.management.base import CommandError

from kwmonitor.streams.models import Evaluator


def evaluator_of(stream: str) -> Evaluator:
    """The evaluator of a stream given by name or id."""
    lookup = {"stream_id": int(stream)} if stream.isdigit() else {"stream__name": stream}
    evaluator = Evaluator.objects.select_related("stream").filter(role="primary", **lookup).first()
    if evaluator is None:
        raise CommandError(f"no stream {stream!r}")
    return evaluator
