"""Writers of a stream's source take turns under the stream's lock.

In its turn (:class:`WriteTurn`) a writer also reads and advances the
stream's *ingest clock* (``Keys.stream_clock``, the largest ``ts`` stored),
so the clock guard that ingest judges a body by (docs/ops.md, "The stream
clock") sees every body stored before it. Each source kind's module
subclasses :class:`SourceWriter` with how it stores a batch.

A turn taken with an idempotency key (the ``Idempotency-Key`` of an ingest
request) finds the :class:`Receipt` of a body already stored under that key,
and otherwise leaves one: the source records it where it keeps the ops, after
the seqs are assigned and before the ops are visible, so a body whose ops
were stored has a receipt and one whose ops were not is stored again when it
is sent again, whenever the writer was killed. Receipts are kept
:data:`RECEIPT_SECONDS`.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import redis

from streaming.bus import Keys

__all__ = ["LANDING_LOCK_SECONDS", "RECEIPT_SECONDS", "Receipt", "WriteTurn", "SourceWriter", "ingest_clock"]

#: How long a writer holds the stream's lock at most (:class:`SourceWriter`); writing the largest body
#: (``INGEST_MAX_BYTES``, fsynced) takes well under it.
LANDING_LOCK_SECONDS = 10.0

#: How long a source remembers a body stored under an idempotency key (a day: the landing archive's default
#: retention, ``LANDING_ARCHIVE_HOURS``, which prunes landing receipts with the files).
RECEIPT_SECONDS = 24 * 3600.0


@dataclass(frozen=True)
class Receipt:
    """What a source remembers of a body stored under an idempotency key.

    ``digest`` identifies the body (the same key with another body is a
    client's error), ``first`` and ``count`` are its ops' seqs, ``answer``
    the ingest's answer to it (None when the writer was killed between
    storing the ops and recording the answer).
    """

    digest: str
    first: int
    count: int
    answer: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "first": self.first, "count": self.count, "answer": self.answer}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Receipt":
        return cls(data["digest"], int(data["first"]), int(data["count"]), data.get("answer"))


class WriteTurn:
    """One writer's turn at a stream's source, under the stream's lock: the ingest clock it found, one store.

    ``clock`` is the largest ``ts`` stored so far (None: nothing yet), read
    once the lock is held, so what a writer judges against it (the clock
    guard, at ingest) cannot be overtaken by another writer before
    :meth:`store` advances it.
    """

    def __init__(self, writer: "SourceWriter", clock: float | None, key: str | None = None):
        self.writer = writer
        self.clock = clock
        self.key = key
        #: The receipt of a body already stored under ``key`` (None: none, or no key).
        self.previous = writer.receipt(key) if key is not None else None
        self.stored = False

    def store(self, ops: Sequence[str], clock: float | None = None, digest: str = "") -> list[int]:
        """Store ``ops`` (compact JSON objects) in order with their seqs and advance the ingest clock to
        ``clock`` (None: leave it); return the seqs. In a turn with a key, the source records a receipt
        of the body ``digest`` with them."""
        if self.stored:
            raise RuntimeError("a write turn stores once")
        self.stored = True
        if not ops:
            return []
        receipt = (self.key, digest) if self.key is not None else None
        first = self.writer.append(ops, clock if clock is not None and clock != self.clock else None, receipt)
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
    def turn(self, key: str | None = None) -> Iterator[WriteTurn]:
        """Hold the stream's lock for one :class:`WriteTurn` (with an idempotency ``key``: see the module).

        Raises ``redis.exceptions.LockError`` (nothing stored) when the lock
        could not be taken within its expiry and 2 s more (other writers kept
        taking it).
        """
        wait = self.lock_seconds + 2.0
        lock = self.client.lock(Keys.stream_lock(self.stream_id), timeout=self.lock_seconds, blocking_timeout=wait)
        if not lock.acquire():
            raise redis.exceptions.LockError(f"stream {self.stream_id}: the landing lock is still held after {wait:g} s")
        try:
            yield WriteTurn(self, ingest_clock(self.client, self.stream_id), key)
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

    def append(self, ops: Sequence[str], clock: float | None, receipt: tuple[str, str] | None = None) -> int:
        """Assign seqs to ``ops`` and store them (the lock is held), setting the ingest clock to ``clock``
        unless None; with ``receipt`` (a key and the body's digest), record the body's receipt before
        the ops are visible; return the first seq."""
        raise NotImplementedError

    def receipt(self, key: str) -> Receipt | None:
        """The receipt of the body stored under ``key`` (None: none whose ops are stored)."""
        raise NotImplementedError

    def answer(self, key: str, receipt: Receipt, answer: dict[str, Any]) -> None:
        """Add the ingest's ``answer`` to the receipt of the body stored under ``key``."""
        raise NotImplementedError


def ingest_clock(client: redis.Redis, stream_id: int) -> float | None:
    """The stream's ingest clock: the largest ``ts`` stored so far (None: nothing stored since its reset)."""
    value = client.get(Keys.stream_clock(stream_id))
    return float(value) if value is not None else None
