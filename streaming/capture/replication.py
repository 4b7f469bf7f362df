"""A logical replication connection: create the slot with an exported snapshot, stream it, confirm progress.

psycopg 3 runs replication commands on a ``replication=database`` connection
but has no API for the copy-both stream that ``START_REPLICATION`` opens, so
the stream is read and answered at libpq level (``psycopg.pq``): each
``CopyData`` is an XLogData (``w``: a pgoutput message) or a primary
keepalive (``k``: the server's sent position, and whether it wants an answer);
the answer is a standby status update (``r``) whose flushed position tells the
server what it may forget. Docs/sources.md says why this and not the SQL slot
functions.

Every session the capture opens runs with ``DateStyle=ISO``,
``TimeZone=UTC`` and ``extra_float_digits=3``, so values come in the text
forms :mod:`.changes` reads, whatever the server's defaults.
"""

from __future__ import annotations

import select
import struct
import time
from dataclasses import dataclass
from typing import Union

import psycopg
from psycopg import pq, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from . import CaptureError
from .pgoutput import PG_EPOCH, format_lsn, parse_lsn

__all__ = ["SESSION_OPTIONS", "session_conninfo", "XLogData", "Keepalive", "ReplicationStream"]

SESSION_OPTIONS = "-c DateStyle=ISO -c TimeZone=UTC -c extra_float_digits=3"
_XLOG = struct.Struct("!QQq")
_KEEPALIVE = struct.Struct("!QqB")
_STATUS = struct.Struct("!cQQQqB")


def session_conninfo(dsn: str, **extra: str) -> str:
    """``dsn`` with the capture's session options added to any it has (and ``extra`` parameters)."""
    params = conninfo_to_dict(dsn)
    options = " ".join(o for o in (params.get("options"), SESSION_OPTIONS) if o)
    return make_conninfo(dsn, options=options, application_name=params.get("application_name") or "kwmonitor-capture",
                         **extra)


@dataclass(frozen=True, slots=True)
class XLogData:
    start: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Keepalive:
    sent: int  # the server has sent every transaction that committed before this position
    reply: bool


Received = Union[XLogData, Keepalive]


class ReplicationStream:
    """One replication connection to the database of ``dsn``."""

    def __init__(self, dsn: str, slot: str, publication: str):
        self.slot = slot
        self.publication = publication
        self.conn = psycopg.connect(session_conninfo(dsn, replication="database"), autocommit=True)
        self.pgconn = self.conn.pgconn
        self.streaming = False

    def close(self) -> None:
        self.conn.close()

    def create_slot(self) -> tuple[int, str]:
        """Create the slot (``pgoutput``); returns its consistent point and the exported snapshot's name.

        The snapshot may be imported (``SET TRANSACTION SNAPSHOT``) until this
        connection runs another command: the rows it shows are exactly those
        committed before the slot's first change.
        """
        command = sql.SQL("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput EXPORT_SNAPSHOT").format(
            sql.Identifier(self.slot))
        result = self.pgconn.exec_(command.as_bytes(self.conn))
        self._check(result, pq.ExecStatus.TUPLES_OK, "could not create the replication slot")
        point = result.get_value(0, 1)
        snapshot = result.get_value(0, 2)
        assert point is not None and snapshot is not None
        return parse_lsn(point.decode()), snapshot.decode()

    def start(self, lsn: int) -> None:
        """Stream the slot's changes committed at or after ``lsn`` (the server also skips what it was confirmed)."""
        names = sql.Identifier(self.publication).as_string(self.conn)
        command = sql.SQL("START_REPLICATION SLOT {} LOGICAL {} (proto_version '1', publication_names {})").format(
            sql.Identifier(self.slot), sql.SQL(format_lsn(lsn)), sql.Literal(names))
        result = self.pgconn.exec_(command.as_bytes(self.conn))
        self._check(result, pq.ExecStatus.COPY_BOTH, "could not start streaming the slot")
        self.pgconn.nonblocking = 1
        self.streaming = True

    def read(self, timeout: float, most: int = 5_000) -> tuple[list[Received], bool]:
        """What the server sent, waiting up to ``timeout`` seconds for the first message; also whether the
        socket was drained (False: more is already waiting)."""
        out: list[Received] = []
        waited = False
        while len(out) < most:
            size, data = self.pgconn.get_copy_data(1)
            if size == 0:
                if out or waited:
                    return out, True
                ready, _, _ = select.select([self.pgconn.socket], [], [], timeout)
                waited = True
                if ready:
                    self.pgconn.consume_input()
                continue
            if size < 0:
                self._ended()
            raw = bytes(data)
            if raw[:1] == b"w":
                start, _end, _clock = _XLOG.unpack_from(raw, 1)
                out.append(XLogData(start, raw[1 + _XLOG.size:]))
            elif raw[:1] == b"k":
                sent, _clock, reply = _KEEPALIVE.unpack_from(raw, 1)
                out.append(Keepalive(sent, bool(reply)))
        return out, False

    def confirm(self, flushed: int, ask_reply: bool = False) -> None:
        """Tell the server every change before ``flushed`` is durable here (a standby status update)."""
        clock = int((time.time() - PG_EPOCH) * 1_000_000)
        message = _STATUS.pack(b"r", flushed, flushed, flushed, clock, 1 if ask_reply else 0)
        if self.pgconn.put_copy_data(message) != 1:
            raise CaptureError(f"the replication connection failed: {self._error()}")
        while self.pgconn.flush() == 1:
            select.select([], [self.pgconn.socket], [], 1.0)

    def _ended(self) -> None:
        result = self.pgconn.get_result()
        message = result.error_message.decode(errors="replace").strip() if result is not None else ""
        raise CaptureError(f"the server ended the replication stream: {message or self._error()}")

    def _error(self) -> str:
        return self.pgconn.error_message.decode(errors="replace").strip() or "connection lost"

    def _check(self, result: pq.PGresult, wanted: pq.ExecStatus, what: str) -> None:
        if result.status != wanted:
            message = result.error_message.decode(errors="replace").strip() or self._error()
            raise CaptureError(f"{what} {self.slot!r}: {message}")
