"""Celery beat's scheduler with a heartbeat: the dashboards can tell whether beat runs.

``CELERY_BEAT_SCHEDULER`` names :class:`HeartbeatScheduler`: at every tick it
writes a :class:`~streaming.events.ComponentHeartbeat` to Redis (at most every
:data:`BEAT_HEARTBEAT_SECONDS`), then schedules as Celery's persistent
scheduler does. ``CELERY_BEAT_MAX_LOOP_INTERVAL`` keeps ticks that frequent.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

from celery.beat import PersistentScheduler

from streaming import bus
from streaming.events import ComponentHeartbeat

__all__ = ["BEAT_HEARTBEAT_SECONDS", "HeartbeatScheduler"]

log = logging.getLogger(__name__)

BEAT_HEARTBEAT_SECONDS = 2.0


class HeartbeatScheduler(PersistentScheduler):
    """Celery's persistent scheduler, writing beat's heartbeat at its ticks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last_beat = 0.0
        self._client = None

    def tick(self, *args: Any, **kwargs: Any) -> float:
        now = time.time()
        if now - self._last_beat >= BEAT_HEARTBEAT_SECONDS:
            self._beat(now)
        return super().tick(*args, **kwargs)

    def _beat(self, now: float) -> None:
        from django.conf import settings

        try:
            if self._client is None:
                self._client = bus.connect(settings.REDIS_URL)
            bus.write_component_heartbeat(
                self._client, ComponentHeartbeat(component="beat", pid=os.getpid(), host=socket.gethostname(), ts=now)
            )
            self._last_beat = now
        except Exception as exc:  # Redis away: the schedule's own sends fail and are retried by Celery
            log.warning("beat heartbeat not written: %r", exc)
