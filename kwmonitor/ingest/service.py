"""Accepting ops into a stream: per-line validation, seq assignment, the stream's source.

Both the HTTP endpoint and ``manage.py replay`` go through :class:`Ingestor`:
each non-blank NDJSON line is parsed and validated against the stream's
schema (``streaming.ops.parse_op``); good lines are written, in order, to the
stream's source (landing directory or Redis stream), which assigns their
``seq``; bad lines come back with their line number and reason and are
published as dead letters on the stream's events (no seq: they never enter the
stream), so the stream page and the history show them like the evaluator's.

The stream's clock guard (``Stream.clock_guard``, docs/ops.md "The stream
clock") is enforced here too: a line whose ``ts`` lies outside the stream's
range, or jumps more than its ``max_clock_jump`` past the *ingest clock* (the
largest ``ts`` stored so far), is a dead letter with the guard's reason and
the rest of the body is stored. The ingest clock is read and advanced under
the stream's landing lock (``streaming.sources.SourceWriter.turn``), so two
writers cannot both slip a jump through.

A body sent with an idempotency key (:class:`BodyKey`, the request's
``Idempotency-Key``) is stored once however often it is sent: under the same
lock the source is asked for the receipt of a body stored under that key,
and if there is one, nothing is stored or published and
:class:`AlreadyStored` carries the first answer (docs/ops.md, "Ingest"). Rules that need the stream's state
(late op, duplicate key, delete of a missing key) are the evaluator's: such
ops get a seq here and become dead letters there; the evaluator also judges
the guard again, with seqs (an edited guard reaches it at its next batch).
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Callable, Iterable, Sequence

import orjson
import redis
from django.conf import settings

from streaming import bus
from streaming.clock import ClockGuard
from streaming.events import DEAD_LETTER_LINE_CHARS, DeadLetter
from streaming.ops import OpRejected, parse_op
from streaming.schema import Schema as SchemaGraph
from streaming.sources import Receipt, writer_for

from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.models import Stream

__all__ = ["LineError", "IngestResult", "GoodLine", "judge_times", "Ingestor", "IngestClosed",
           "closed_to_ingest", "BodyKey", "AlreadyStored", "KeyReused"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LineError:
    """A rejected line: its 1-based number in the body, why, and its text (for the dead letter)."""

    line: int
    reason: str
    text: str = field(default="", repr=False)

    def to_json(self) -> dict:
        return {"line": self.line, "reason": self.reason}


_by_line = attrgetter("line")


@dataclass
class IngestResult:
    """What happened to one body of lines: the seqs of the accepted ones, the errors of the others."""

    seqs: list[int] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        return len(self.seqs)

    def to_json(self) -> dict:
        return {
            "accepted": self.accepted,
            "rejected": len(self.errors),
            "first_seq": self.seqs[0] if self.seqs else None,
            "last_seq": self.seqs[-1] if self.seqs else None,
            "errors": [e.to_json() for e in self.errors],
        }


@dataclass(frozen=True)
class GoodLine:
    """A line that passed validation: its number, its text and the op as compact JSON, with its ``ts``."""

    line: int
    text: str
    op: str
    ts: float


def judge_times(guard: ClockGuard, times: Iterable[float],
                clock: float | None) -> tuple[list[str | None], float | None]:
    """Judge each ``ts`` in order by ``guard`` against the ingest clock as it moves: the reason each is
    refused (None: taken) and the clock after them (the largest ``ts`` taken, or ``clock``)."""
    reasons: list[str | None] = []
    for ts in times:
        reason = guard.refuse(ts, clock)
        reasons.append(reason)
        if reason is None and (clock is None or ts > clock):
            clock = ts
    return reasons, clock


@dataclass(frozen=True)
class BodyKey:
    """A request's idempotency key and the digest of its body."""

    key: str
    digest: str

    @classmethod
    def of(cls, key: str, body: bytes) -> "BodyKey":
        return cls(key, hashlib.sha256(body).hexdigest())


class AlreadyStored(Exception):
    """The body was stored before under its idempotency key: nothing was stored or published again."""

    def __init__(self, receipt: Receipt):
        super().__init__(f"stored before as seqs {receipt.first}..{receipt.first + receipt.count - 1}")
        self.receipt = receipt

    def answer(self) -> dict:
        """The first answer (only its seqs if the writer was killed before recording it), marked replayed."""
        first, last = self.receipt.first, self.receipt.first + self.receipt.count - 1
        answer = self.receipt.answer or {"ops": self.receipt.count, "first_seq": first, "last_seq": last}
        return {**answer, "replayed": True}


class KeyReused(ValueError):
    """The idempotency key was used before for another body."""


class IngestClosed(ValueError):
    """The stream takes no ingest: its ops come from a PostgreSQL publication's capture."""


def closed_to_ingest(stream: Stream) -> str:
    return (f"stream {stream.pk} takes its ops from PostgreSQL publication {stream.source_publication!r} (its "
            "capture is the stream's only writer): change the tables, not the stream")


class Ingestor:
    """Validates lines against one stream's schema and writes the good ones to its source."""

    def __init__(self, stream: Stream):
        if stream.is_captured:
            raise IngestClosed(closed_to_ingest(stream))
        self.stream = stream
        self.schema: SchemaGraph = stream.schema.graph()
        self.guard = stream.clock_guard()
        self.client = redis_client()
        self.writer = writer_for(self.client, stream.pk, stream.source_kind, settings.LANDING_DIR)

    def validate(self, lines: Iterable[str | bytes], first_line: int = 1) -> tuple[list[GoodLine], list[LineError]]:
        """Split ``lines`` into good ops and errors (1-based line numbers)."""
        good: list[GoodLine] = []
        errors: list[LineError] = []
        for number, raw in enumerate(lines, first_line):
            if isinstance(raw, bytes):
                try:
                    raw = raw.decode("utf-8")
                except UnicodeDecodeError:
                    errors.append(LineError(number, "not UTF-8 text", raw.decode("utf-8", "replace")))
                    continue
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                errors.append(LineError(number, f"malformed JSON: {exc.msg} at column {exc.colno}", raw))
                continue
            try:
                op = parse_op(obj, self.schema)
            except OpRejected as exc:
                errors.append(LineError(number, str(exc), raw))
                continue
            good.append(GoodLine(number, raw, orjson.dumps(obj).decode(), op.ts))
        return good, errors

    def ingest(self, lines: Iterable[str | bytes], first_line: int = 1, key: BodyKey | None = None) -> IngestResult:
        """Validate ``lines``, append the good ones the clock guard takes to the stream's source in order,
        publish the others as dead letters. Raises :class:`AlreadyStored` or :class:`KeyReused` (``key``)."""
        good, errors = self.validate(lines, first_line)
        seqs, refused = self.store([(g.ts, (g.op,)) for g in good], errors,
                                   lambda i, reason: LineError(good[i].line, reason, good[i].text), key)
        result = IngestResult(seqs, sorted(errors + refused, key=_by_line))
        self.record_input(len(seqs))
        self.record_answer(key, seqs, result.to_json())
        return result

    def store(self, units: Sequence[tuple[float, Sequence[str]]], errors: Iterable[LineError],
              letter: Callable[[int, str], LineError], key: BodyKey | None = None) -> tuple[list[int], list[LineError]]:
        """Store units of ops that share a ``ts`` (a line, an XML item's ops) in one turn at the source.

        Under the stream's lock each unit's ``ts`` is judged by the clock
        guard against the ingest clock; ``errors`` and a dead letter for each
        refused unit (``letter(index, reason)``) are published first (if
        Redis fails after that, a retried body duplicates dead letters, never
        ops), then the units taken are stored and the clock advanced.
        Returns the seqs stored and the refused units' dead letters. With a
        ``key``, a body stored before under it raises :class:`AlreadyStored`
        (another body: :class:`KeyReused`) before anything is published.
        """
        if not units:
            self.publish_dead_letters(sorted(errors, key=_by_line))
            return [], []
        with self.writer.turn(key.key if key else None) as turn:
            if turn.previous is not None:
                assert key is not None
                if turn.previous.digest != key.digest:
                    raise KeyReused(f"Idempotency-Key {key.key!r} was used for another body")
                raise AlreadyStored(turn.previous)
            reasons, clock = judge_times(self.guard, [ts for ts, _ in units], turn.clock)
            refused = [letter(i, reason) for i, reason in enumerate(reasons) if reason is not None]
            self.publish_dead_letters(sorted([*errors, *refused], key=_by_line))
            ops = [op for (_, unit), reason in zip(units, reasons) if reason is None for op in unit]
            return turn.store(ops, clock, key.digest if key else ""), refused

    def record_answer(self, key: BodyKey | None, seqs: Sequence[int], answer: dict) -> None:
        """Add the answer to the receipt of a body stored under ``key`` (a miss: a retry gets its seqs only)."""
        if key is None or not seqs:
            return
        try:
            self.writer.answer(key.key, Receipt(key.digest, seqs[0], len(seqs)), answer)
        except (redis.RedisError, OSError) as exc:
            log.warning("stream %s: could not record the answer to Idempotency-Key %r: %s", self.stream.pk, key.key, exc)

    def record_input(self, ops: int) -> None:
        """Count ``ops`` stored in the stream's input rate (a miss only dents the rate shown)."""
        try:
            bus.record_ingest(self.client, self.stream.pk, ops)
        except redis.RedisError:
            log.warning("stream %s: could not record the input of %d ops", self.stream.pk, ops)

    def publish_dead_letters(self, errors: Iterable[LineError]) -> None:
        """Each rejected line as a :class:`DeadLetter` on the stream's events (one round trip)."""
        errors = list(errors)
        if not errors:
            return
        now = time.time()
        with self.client.pipeline(transaction=False) as pipe:
            for error in errors:
                event = DeadLetter(stream=self.stream.pk, line=error.text[:DEAD_LETTER_LINE_CHARS], reason=error.reason,
                                   ts=now)
                bus.publish_stream_event(pipe, self.stream.pk, event)
            pipe.execute()
