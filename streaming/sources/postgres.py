"""The PostgreSQL source: a publication whose capture (``streaming.capture``) writes a landing directory.

The capture is the stream's only writer (the ingest refuses such a stream)
and lands its ops through the landing source's writer, seqs from the same
counter; the evaluators read the directory as a landing source, so the
plan names ``landing``. What the capture does is docs/sources.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis

from .landing import LANDING, LandingWriter

__all__ = ["PostgresSource", "POSTGRES"]


class PostgresSource:
    """The PostgreSQL kind of a stream's source (``Stream.source_kind``)."""

    name = "postgres"
    label = "PostgreSQL publication (captured into a landing directory)"
    captured = True
    has_landing_directory = True

    def spec(self, stream_id: int, landing_root: str | Path) -> dict[str, Any]:
        return LANDING.spec(stream_id, landing_root)

    def writer(self, client: redis.Redis, stream_id: int, landing_root: str | Path) -> LandingWriter:
        """None but the capture writes the stream: it makes its own landing writer
        (``streaming.capture.sinks.LandingSink``)."""
        raise ValueError(f"stream {stream_id} is written by its PostgreSQL capture only")

    def prune(self, stream_id: int, landing_root: str | Path, keep_seconds: float, now: float) -> int | None:
        return LANDING.prune(stream_id, landing_root, keep_seconds, now)


POSTGRES = PostgresSource()
