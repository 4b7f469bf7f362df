"""Poison ops: an op that keeps failing a stream's evaluator is set aside for the stream as a dead letter.

An evaluator names the op it fails on (``bus.Keys.failed_op``: an error, or a
guarded replay it did not finish); the supervisor takes that name when the
process dies, stalls or goes silent (:meth:`PoisonWatch.failed_op`) and
counts the failures at one op in a row (``bus.Keys.poison_watch``). At
``failures`` the op is set aside (``bus.Keys.stream_poison``), so the
restarted evaluator goes past it (docs/ops.md, "Stalls and poison ops").
"""

from __future__ import annotations

import json
import logging

from streaming import bus

from .connection import redis_client
from .models import Evaluator

__all__ = ["PoisonWatch"]

log = logging.getLogger(__name__)


class PoisonWatch:
    """Counts the consecutive failures of each evaluator at one op; sets the op aside at ``failures``."""

    def __init__(self, failures: int):
        self.failures = failures

    @staticmethod
    def failed_op(evaluator: Evaluator) -> dict | None:
        """The op the evaluator named before it failed (an error, or a guarded replay it did not finish), taken."""
        raw = redis_client().getdel(bus.Keys.failed_op(evaluator.pk))
        return None if raw is None else json.loads(raw)

    def record_failure(self, evaluator: Evaluator, seq: int, what: str, detail: str) -> str:
        """Count a failure (``what``: "crashed", "stalled", "silenced") at op ``seq``, consecutive failures at the same op;
        at ``failures`` set the op aside for the stream as a dead letter. Returns what to add to the
        failure's reason."""
        client = redis_client()
        key = bus.Keys.poison_watch(evaluator.pk)
        watch = client.hgetall(key)
        failures = int(watch.get("failures", 0)) + 1 if watch.get("seq") == str(seq) else 1
        if failures < self.failures:
            client.hset(key, mapping={"seq": seq, "failures": failures})
            return ""
        reason = f"poison op, set aside: it {what} the evaluator {failures} times in a row (the last time: {detail})"
        with client.pipeline(transaction=True) as pipe:
            pipe.hset(bus.Keys.stream_poison(evaluator.stream_id), str(seq), reason[:2000])
            pipe.delete(key)
            pipe.execute()
        log.warning("stream %s: op seq %s set aside as a dead letter (%s)", evaluator.stream_id, seq, reason)
        return f"; op seq {seq} set aside as a dead letter"
