"""The web tier's side of a PostgreSQL-sourced stream: its catalog, its slot, and what the slot holds.

The capture process (``streaming.capture``) does the capturing; here the
admin reads the publication's stream schema from the catalog, beat watches
each stream's slot (``watch_slots``: how much WAL it holds back, whether it is
active or lost) and ``reset_stream`` drops it. Each connects with the DSN of
the stream's environment variable, for a few seconds at most.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import psycopg
import redis

from streaming import bus
from streaming.capture.catalog import Publication, read_publication
from streaming.capture.replication import session_conninfo
from streaming.sources.registry import STREAM_KINDS

from .models import Stream

__all__ = ["CONNECT_SECONDS", "SourceUnreachable", "publication_of", "slot_report", "drop_slot", "watch_slots",
           "read_slot_report"]

CONNECT_SECONDS = 5
#: How long a slot report is kept in Redis (beat rewrites it every 15 s).
REPORT_TTL_SECONDS = 120

_SLOT = """
SELECT s.active, s.wal_status, s.confirmed_flush_lsn::text,
       pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn)::bigint,
       pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint,
       s.safe_wal_size
FROM pg_replication_slots s WHERE s.slot_name = %s
"""


class SourceUnreachable(RuntimeError):
    """The stream's database could not be reached (or its DSN variable is unset); the message says which."""


def _connect(stream: Stream) -> psycopg.Connection:
    try:
        dsn = stream.source_dsn()
    except ValueError as exc:
        raise SourceUnreachable(str(exc)) from None
    try:
        return psycopg.connect(session_conninfo(dsn, connect_timeout=str(CONNECT_SECONDS)), autocommit=True)
    except psycopg.Error as exc:
        raise SourceUnreachable(f"could not connect with {stream.source_dsn_env}: {exc}") from None


def publication_of(stream: Stream) -> Publication:
    """The stream's publication as the catalog has it now (``CatalogError`` if it cannot be watched)."""
    with _connect(stream) as conn:
        return read_publication(conn, stream.source_publication)


def slot_report(stream: Stream) -> dict[str, Any]:
    """The stream's slot as the server sees it: whether it exists and is active, and the WAL it holds back."""
    report: dict[str, Any] = {"slot": stream.source_slot, "checked_at": time.time()}
    try:
        with _connect(stream) as conn:
            row = conn.execute(_SLOT, (stream.source_slot,)).fetchone()
    except SourceUnreachable as exc:
        return {**report, "error": str(exc)}
    if row is None:
        return {**report, "exists": False}
    active, wal_status, confirmed, held, behind, safe = row
    return {**report, "exists": True, "active": active, "wal_status": wal_status, "confirmed_flush_lsn": confirmed,
            "held_bytes": held, "unconfirmed_bytes": behind, "safe_wal_size": safe}


def drop_slot(stream: Stream) -> str:
    """Drop the stream's slot (after its capture stopped); returns what happened."""
    try:
        with _connect(stream) as conn:
            row = conn.execute("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s",
                               (stream.source_slot,)).fetchone()
            if row is None:
                return f"slot {stream.source_slot!r} did not exist"
            if row[0] is not None:
                conn.execute("SELECT pg_terminate_backend(%s)", (row[0],))
                time.sleep(0.5)
            conn.execute("SELECT pg_drop_replication_slot(%s)", (stream.source_slot,))
    except (SourceUnreachable, psycopg.Error) as exc:
        return (f"could not drop slot {stream.source_slot!r} ({exc}): drop it by hand "
                f"(SELECT pg_drop_replication_slot('{stream.source_slot}')) before the stream starts again")
    return f"slot {stream.source_slot!r} dropped"


def watch_slots(client: redis.Redis) -> dict[str, Any]:
    """Write each PostgreSQL-sourced stream's slot report to Redis (beat, every few seconds)."""
    out = {}
    for stream in Stream.objects.filter(source_kind__in=[k.name for k in STREAM_KINDS.values() if k.captured]):
        report = slot_report(stream)
        client.set(bus.Keys.capture_slot(stream.pk), orjson.dumps(report), ex=REPORT_TTL_SECONDS)
        out[str(stream.pk)] = report.get("held_bytes", report.get("error", "no slot"))
    return out


def read_slot_report(client: redis.Redis, stream_id: int) -> dict[str, Any] | None:
    raw = client.get(bus.Keys.capture_slot(stream_id))
    return orjson.loads(raw) if raw else None
