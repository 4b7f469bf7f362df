"""The one place the web tier sends stream events (evaluator status) to dashboards.

Events go to the stream's Redis event stream (``bus.publish_stream_event``),
where dashboards and feed clients read them; they are sent only after the
database transaction that recorded the change commits, so a browser never
sees a status the database then rolls back.
"""

from __future__ import annotations

import logging
import time

from django.db import transaction

from streaming import bus
from streaming.events import EvaluatorStatus

from .connection import redis_client
from .models import Evaluator

__all__ = ["send_status"]

log = logging.getLogger(__name__)


def send_status(evaluator: Evaluator, status: str, detail: str = "") -> EvaluatorStatus:
    """Publish the evaluator's status (as recorded now) once the transaction commits."""
    event = EvaluatorStatus(
        evaluator=evaluator.pk,
        stream=evaluator.stream_id,
        status=status,
        pid=evaluator.pid,
        host=evaluator.host,
        plan_version=evaluator.plan_version,
        detail=detail,
        ts=time.time(),
    )

    def publish() -> None:
        try:
            bus.publish_stream_event(redis_client(), event.stream, event)
        except Exception:  # a dashboard missing one status must not undo the supervisor's work
            log.exception("could not publish %s", event.model_dump_json())

    transaction.on_commit(publish)
    return event
