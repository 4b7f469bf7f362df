"""Accepting ops into a stream: per-line validation, seq assignment, the stream's source.

Both the HTTP endpoint and ``manage.py replay`` go through :class:`Ingestor`:
each non-blank NDJSON line is parsed and validated against the stream's
schema (``streaming.ops.parse_op``); good lines are written, in order, to the
stream's source (landing directory or Redis stream), which assigns their
``seq``; bad lines come back with their line number and reason and are
published as dead letters on the stream's events (no seq: they never enter the
stream), so the stream page and the history show them like the evaluator's.
Rules that need the stream's state (late op, duplicate key, delete of a
missing key) are the evaluator's: such ops get a seq here and become dead
letters there (docs/ops.md).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Iterable

import orjson
import redis
from django.conf import settings

from streaming import bus
from streaming.events import DEAD_LETTER_LINE_CHARS, DeadLetter
from streaming.ops import OpRejected, parse_op
from streaming.schema import Schema as SchemaGraph
from streaming.sources import writer_for

from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.models import Stream

__all__ = ["LineError", "IngestResult", "Ingestor", "IngestClosed", "closed_to_ingest"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LineError:
    """A rejected line: its 1-based number in the body, why, and its text (for the dead letter)."""

    line: int
    reason: str
    text: str = field(default="", repr=False)

    def to_json(self) -> dict:
        return {"line": self.line, "reason": self.reason}


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
        self.client = redis_client()
        self.writer = writer_for(self.client, stream.pk, stream.source_kind, settings.LANDING_DIR)

    def validate(self, lines: Iterable[str | bytes], first_line: int = 1) -> tuple[list[str], list[LineError]]:
        """Split ``lines`` into good ops (compact JSON) and errors (1-based line numbers)."""
        good: list[str] = []
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
                parse_op(obj, self.schema)
            except OpRejected as exc:
                errors.append(LineError(number, str(exc), raw))
                continue
            good.append(orjson.dumps(obj).decode())
        return good, errors

    def ingest(self, lines: Iterable[str | bytes], first_line: int = 1) -> IngestResult:
        """Validate ``lines``, append the good ones to the stream's source in order, publish the bad ones."""
        good, errors = self.validate(lines, first_line)
        # Dead letters first: if Redis fails in between, a retried body duplicates dead letters, never ops.
        self.publish_dead_letters(errors)
        result = IngestResult(self.writer.write(good), errors)
        try:
            bus.record_ingest(self.client, self.stream.pk, result.accepted)
        except redis.RedisError:  # the ops are stored: a missed count only dents the input rate shown
            log.warning("stream %s: could not record the input of %d ops", self.stream.pk, result.accepted)
        return result

    def publish_dead_letters(self, errors: Iterable[LineError]) -> None:
        """Each rejected line as a :class:`DeadLetter` on the stream's events (one round trip)."""
        now = time.time()
        with self.client.pipeline(transaction=False) as pipe:
            for error in errors:
                event = DeadLetter(stream=self.stream.pk, line=error.text[:DEAD_LETTER_LINE_CHARS], reason=error.reason,
                                   ts=now)
                bus.publish_stream_event(pipe, self.stream.pk, event)
            pipe.execute()
