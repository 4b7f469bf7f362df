"""The seqs of a stream's ops, in Redis: assigned, applied, published.

Every op line carries a ``seq`` assigned once, at ingest, from the Redis
counter ``Keys.stream_seq`` (0, 1, 2, ...), so the position of an op in the
stream survives restarts of the ingest, the evaluator and Redis clients.
The stored line that carries it is ``streaming.stored_lines``.
"""

from __future__ import annotations

import redis

from .bus import Keys
from .evaluator_state import StateField

__all__ = ["applied_seq_of", "published_seq_of", "assigned_seq"]


def applied_seq_of(client: redis.Redis, state_key: str) -> int:
    """The last seq an evaluator applied and persisted (-1: none)."""
    value = client.hget(state_key, StateField.SEQ)
    return int(value) if value is not None else -1


def published_seq_of(client: redis.Redis, state_key: str) -> int:
    """The last seq whose changes an evaluator has published (-1: none)."""
    value = client.hget(state_key, StateField.PUBLISHED)
    return int(value) if value is not None else -1


def assigned_seq(client: redis.Redis, stream_id: int) -> int:
    """The last seq assigned to an op of the stream, whatever its source (-1: none yet)."""
    value = client.get(Keys.stream_seq(stream_id))
    return int(value) - 1 if value is not None else -1
