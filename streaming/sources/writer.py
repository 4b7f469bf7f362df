"""Writers of a stream's source take turns under the stream's lock.

In its turn (:class:`WriteTurn`) a writer also reads and advances the
stream's *ingest clock* (``Keys.stream_clock``, the largest ``ts`` stored),
so the clock guard that ingest judges a body by (docs/ops.md, "The stream
clock") sees every body stored before it. Each source kind's module
subclasses :class:`SourceWriter` with how it stores a batch.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import redis

from streaming.bus import Keys

__all__ = ["LANDING_LOCK_SECONDS", "WriteTurn", "SourceWriter", "ingest_clock"]

#: How long a writer holds the stream's lock at most (:class:`SourceWriter`); writing the largest body
#: (``INGEST_MAX_BYTES``, fsynced) takes well under it.
LANDING_LOCK_SECONDS = 10.0


class WriteTurn:
    """One writer's turn at a stream's source, under the stream's lock: the ingest clock it found, one store.

    ``clock`` is the largest ``ts`` stored so far (None: nothing yet), read
    once the lock is held, so what a writer judges against it (the clock
    guard, at ingest) cannot be overtaken by another writer before
    :meth:`store` advances it.
    """

    def __init__(self, writer: "SourceWriter", clock: float | None):
        self.writer = writer
        self.clock = clock
        self.stored = False

    def store(self, ops: Sequence[str], clock: float | None = None) -> list[int]:
        """Store ``ops`` (compact JSON objects) in order with their seqs and advance the ingest clock to
        ``clock`` (None: leave it); return the seqs."""
        if self.stored:
            raise RuntimeError("a write turn stores once")
        self.stored = True
        if not ops:
            return []
        first = self.writer.append(ops, clock if clock is not None and clock != self.clock else None)
        return list(range(first, first + len(ops)))


class SourceWriter:
    """Writes ops to one stream's source in turns under the stream's lock (``Keys.stream_lock``).

    The lock expires after ``lock_seconds``: a writer that lost Redis
    before releasing it (the key outlives a Redis restart that persists)
    holds the next writers no longer than that, and they wait a little
    longer, so such a lock never fails a write.
    """

    def __init__(self, client: redis.Redis, stream_id: int, lock_seconds: float | None = None):
        self.client = client
        self.stream_id = stream_id
        self.lock_seconds = lock_seconds or LANDING_LOCK_SECONDS

    @contextmanager
    def turn(self) -> Iterator[WriteTurn]:
        """Hold the stream's lock for one :class:`WriteTurn`.

        Raises ``redis.exceptions.LockError`` (nothing stored) when the lock
        could not be taken within its expiry and 2 s more (other writers kept
        taking it).
        """
        wait = self.lock_seconds + 2.0
        lock = self.client.lock(Keys.stream_lock(self.stream_id), timeout=self.lock_seconds, blocking_timeout=wait)
        if not lock.acquire():
            raise redis.exceptions.LockError(f"stream {self.stream_id}: the landing lock is still held after {wait:g} s")
        try:
            yield WriteTurn(self, ingest_clock(self.client, self.stream_id))
        finally:
            try:
                lock.release()
            except redis.RedisError:  # Redis went away: the lock expires by itself; the ops are stored
                pass

    def write(self, ops: Sequence[str]) -> list[int]:
        """Store ``ops`` (compact JSON objects) in order in one turn, the ingest clock left as it is;
        return their seqs."""
        if not ops:
            return []
        with self.turn() as turn:
            return turn.store(ops)

    def append(self, ops: Sequence[str], clock: float | None) -> int:
        """Assign seqs to ``ops`` and store them (the lock is held), setting the ingest clock to ``clock``
        unless None; return the first seq."""
        raise NotImplementedError


def ingest_clock(client: redis.Redis, stream_id: int) -> float | None:
    """The stream's ingest clock: the largest ``ts`` stored so far (None: nothing stored since its reset)."""
    value = client.get(Keys.stream_clock(stream_id))
    return float(value) if value is not None else None
