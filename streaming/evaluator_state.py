"""The fields of a process's state hash (``bus.Keys.evaluator_state``), spelled once.

An evaluator writes its state there (``redis_ports.RedisStateStore``); a
pre-processor its last derived seq and batch figures, a capture its
progress. The supervisor, the placement, the sources and the stream page read
them by these names.
"""

from __future__ import annotations

from enum import StrEnum

import orjson

__all__ = ["StateField", "decode_joined"]


class StateField(StrEnum):
    """One field of the state hash."""

    #: the last seq applied and saved (a pre-processor: the last seq derived)
    SEQ = "seq"
    #: the stream clock when the batch was saved (``repr`` of a float)
    CLOCK = "clock"
    #: the running windows of the aggregate subscriptions (JSON)
    AGGREGATES = "aggregates"
    #: the seq each query handed over to this evaluator joined at (JSON: query -> seq)
    JOINED = "joined"
    #: the last seq whose changes the evaluator has published (written after each batch's changes are published;
    #: a move's target holds the moving queries' changes until its source's reaches their join seq)
    PUBLISHED = "published"
    #: the changes of queries handed over to this evaluator, held until their source has published through the
    #: join seq (JSON: query -> [kind, result key, payload, seq] lists), saved with the batch that made them
    HELD = "held"
    #: aggregate values saved by a batch, published after it (JSON list)
    OUTBOX = "outbox"
    #: written only when the evaluator loads or rebuilds its state: a hash without it was re-created by writes
    #: that reached a Redis which had lost the state (``EvaluatorRunner.lost_state``)
    LOADED = "loaded"
    #: the last batch's duration and rate (pre-processor and capture: the stream page's figures)
    BATCH_MS = "batch_ms"
    ROWS_PER_SECOND = "rows_per_second"
    #: a capture's progress (JSON)
    CAPTURE = "capture"


def decode_joined(raw: str | bytes | None) -> dict[int, int]:
    """The :attr:`StateField.JOINED` value as query -> seq (empty if none)."""
    return {int(q): seq for q, seq in orjson.loads(raw).items()} if raw else {}
