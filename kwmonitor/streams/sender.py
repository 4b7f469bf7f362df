"""The one place the web tier sends events to dashboards: the supervisor's transitions and query edits.

The supervisor's transitions of an evaluator (a launch, announced as
``starting`` or ``restarting``; ``stopping``, ``stopped``, ``failed``) go to
the stream's Redis event stream (``bus.publish_stream_event``) as
``evaluator.status`` events, next to those the process publishes about
itself with its heartbeat (``running`` and the others); query edits go to the
query's change stream (``bus.publish_query_config``), where dashboards and
feed clients read them. They are sent only after the database transaction
that recorded the change commits, so a browser never sees a state the
database then rolls back, and a query edited several times in one
transaction (the admin saves the query, then each predicate) is announced
once, with its committed state.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from django.db import connection, transaction

from kwmonitor.queries.models import KeywordQuery
from streaming import bus
from streaming.events import EvaluatorStatus, QueryConfig, QueryUpdated

from .connection import redis_client
from .models import Evaluator

__all__ = ["Transition", "send_status", "query_config", "send_query_update"]

log = logging.getLogger(__name__)

#: What the supervisor announces: a launch ("starting", "restarting" after a failure), a stop, a failure.
Transition = Literal["starting", "restarting", "stopping", "stopped", "failed"]


def send_status(evaluator: Evaluator, status: Transition, detail: str = "") -> EvaluatorStatus:
    """Announce a transition the supervisor made once the transaction recording it commits (with the launched
    pid and host, and the plan version last written)."""
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


def query_config(query: KeywordQuery) -> QueryConfig:
    """The configuration a query's dashboard shows (also what its page is rendered with)."""
    return QueryConfig(
        name=query.name,
        keywords=query.keyword_list(),
        tmax=query.tmax,
        window_seconds=query.window_seconds,
        predicates=[str(p) for p in query.predicates.all()],
        enabled=query.enabled,
        stream=query.stream_id,
    )


def _publish_query_update(query_id: int, announce: bool) -> None:
    query = KeywordQuery.objects.filter(pk=query_id).first()
    if query is None:  # deleted in the same transaction
        return
    event = QueryUpdated(query=query_id, config=query_config(query), ts=time.time())
    try:
        bus.publish_query_config(redis_client(), event, announce=announce)
    except Exception:  # a dashboard missing one edit must not undo the edit
        log.exception("could not publish %s", event.model_dump_json())


def send_query_update(query_id: int, created: bool = False) -> None:
    """Announce the query's configuration on its change stream once the transaction commits.

    ``created``: the query is new in this transaction; its configuration is
    stored but not announced (no dashboard can follow a query that did not exist).
    """
    for entry in connection.run_on_commit:
        callback: Any = entry[1]
        if getattr(callback, "query_update_id", None) == query_id:
            callback.created = callback.created or created
            return

    def callback() -> None:
        _publish_query_update(query_id, announce=not callback.created)

    callback.query_update_id = query_id  # type: ignore[attr-defined]
    callback.created = created  # type: ignore[attr-defined]
    transaction.on_commit(callback)
