"""What an evaluator process is doing now: its heartbeat's word, the only live status.

Each process (evaluator, pre-processor, capture) writes a heartbeat to Redis
every 2 s (``bus.write_heartbeat``: status, detail, pid, host, the plan
version it runs, its query errors and progress), which expires after 15 s,
and the time of its last one, which is kept ("last seen"). The database holds
only the supervisor's side (:class:`~kwmonitor.streams.models.Evaluator`):
what the operator wants and what the supervisor last did (``lifecycle``:
launched, stopping, stopped, failed, and when), never what a heartbeat said.
:func:`liveness` is the one reading of the two that every reader uses (the
pages, ``GET /status/``, the admin, the management commands):

* a current heartbeat says what the process does, whatever the database
  says: its status and detail, or ``stalled`` when it shows no progress for
  ``EVALUATOR_STALL_SECONDS`` while input waits. Current is younger than
  ``EVALUATOR_UNRESPONSIVE_SECONDS`` and written after the supervisor's last
  launch, stop or failure: one written before is the previous process's, or
  that of the process the supervisor has since seen end (while it is
  stopping, the process beats on and its heartbeats stay current);
* without one, a launched process is ``starting`` (``restarting``) until its
  first heartbeat is due (``EVALUATOR_FIRST_HEARTBEAT_SECONDS``) and
  ``unresponsive`` after that, or once it beat since its launch and went
  silent; any other is as the supervisor left it: ``failed`` (with its error
  and restart time), ``stopping``, ``stopped``.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import redis
from django.conf import settings

from streaming.bus import Keys
from streaming.events import EvaluatorStatus

from .models import Evaluator

__all__ = ["Liveness", "liveness", "read_liveness", "seen_since_launch"]


@dataclass(frozen=True)
class Liveness:
    """An evaluator as it is now.

    ``beating``: a current heartbeat says so, and ``pid``, ``host`` and
    ``query_errors`` are that heartbeat's (none without one); ``plan_version``
    is the plan it runs, else the version last written for it;
    ``heartbeat_age`` the age of the heartbeat in Redis, current or not (None: none).
    """

    status: str
    detail: str = ""
    beating: bool = False
    pid: int | None = None
    host: str = ""
    plan_version: int = 0
    query_errors: dict[str, str] = field(default_factory=dict)
    heartbeat_age: float | None = None


def _clock(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.timezone.utc).strftime("%H:%M:%S UTC")


def seen_since_launch(evaluator: Evaluator, seen: float | None) -> bool:
    """Whether a heartbeat written at ``seen`` (unix time; None: never) came after the supervisor's last launch."""
    return seen is not None and evaluator.started_at is not None and seen >= evaluator.started_at.timestamp()


def _current(evaluator: Evaluator | None, heartbeat: EvaluatorStatus | None, now: float) -> bool:
    """Whether the heartbeat says what the process does now (see the module's docstring)."""
    if heartbeat is None or now - heartbeat.ts > settings.EVALUATOR_UNRESPONSIVE_SECONDS:
        return False
    if evaluator is None or evaluator.lifecycle_at is None or evaluator.lifecycle == "stopping":
        return True
    return heartbeat.ts >= evaluator.lifecycle_at.timestamp()


def liveness(evaluator: Evaluator | None, heartbeat: EvaluatorStatus | None, now: float,
             last_seen: float | None = None) -> Liveness:
    """What ``evaluator`` (None: a stream without one) does at ``now``, given the heartbeat in Redis (None: none)
    and the time of its last heartbeat, however old (None: never)."""
    age = None if heartbeat is None else max(0.0, now - heartbeat.ts)
    if _current(evaluator, heartbeat, now):
        stalled = heartbeat.stalled_for(now) > settings.EVALUATOR_STALL_SECONDS
        return Liveness(
            status="stalled" if stalled else heartbeat.status,
            detail=heartbeat.stall_detail(now) if stalled else heartbeat.detail,
            beating=True, pid=heartbeat.pid, host=heartbeat.host, plan_version=heartbeat.plan_version,
            query_errors=dict(heartbeat.query_errors), heartbeat_age=age,
        )
    if evaluator is None:
        return Liveness(status="stopped", heartbeat_age=age)
    seen = max((t for t in (last_seen, heartbeat.ts if heartbeat else None) if t is not None), default=None)
    quiet = Liveness(status=evaluator.lifecycle, plan_version=evaluator.plan_version, heartbeat_age=age)
    if evaluator.lifecycle == "launched":
        process = f"pid {evaluator.pid} on {evaluator.host or '?'}"
        if seen_since_launch(evaluator, seen):
            return replace(quiet, status="unresponsive",
                           detail=f"no heartbeat for {now - seen:.0f} s (last seen {_clock(seen)}); {process}")
        started = evaluator.started_at.timestamp() if evaluator.started_at else now
        if now - started > settings.EVALUATOR_FIRST_HEARTBEAT_SECONDS:
            return replace(quiet, status="unresponsive",
                           detail=f"no heartbeat since its launch {now - started:.0f} s ago; {process}")
        return replace(quiet, status="restarting" if evaluator.restarts else "starting",
                       detail="waiting for its first heartbeat")
    if evaluator.lifecycle == "failed":
        restart = (f"; restart due at {_clock(evaluator.next_restart_at.timestamp())}"
                   if evaluator.desired == "running" and evaluator.next_restart_at is not None else "")
        return replace(quiet, detail=evaluator.last_error + restart)
    return quiet


def read_liveness(client: redis.Redis, evaluators: Sequence[Evaluator], now: float | None = None) -> list[Liveness]:
    """The :func:`liveness` of each evaluator, its heartbeat and last-seen time read in one round trip."""
    if not evaluators:
        return []
    now = time.time() if now is None else now
    with client.pipeline(transaction=False) as pipe:
        for evaluator in evaluators:
            pipe.get(Keys.heartbeat(evaluator.pk))
            pipe.get(Keys.last_heartbeat(evaluator.pk))
        replies = pipe.execute()
    return [liveness(evaluator, EvaluatorStatus.model_validate_json(beat) if beat else None, now,
                     float(last) if last else None)
            for evaluator, beat, last in zip(evaluators, replies[::2], replies[1::2])]
