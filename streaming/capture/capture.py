"""The capture: a publication's rows, then its committed changes, appended once each to a sink.

:meth:`Capture.run` reads the publication from the catalog, puts right what a
kill left (:meth:`~streaming.capture.sinks.OpSink.recover`), and then

1. if the state has not stored a snapshot, creates the slot with an exported
   snapshot, copies every published row under it (an insert each, ``ts`` the
   server's clock just before the slot was created) and seals them with the
   slot's consistent point: changes committed during the copy are not in the
   snapshot and are the slot's first (a kill during the copy drops the slot
   and starts over, nothing was sealed); the copy locks the tables first, so
   a ``TRUNCATE``, which is not MVCC-safe, waits for it, and a truncate
   committed between the slot and the lock makes it start over;
2. streams the slot from the stored LSN: the messages of each committed
   transaction become ops (:class:`~streaming.capture.changes.ChangeOps`),
   ``ts`` = its commit time (never before the previous one), staged in the
   sink; whole transactions are sealed together (when the socket is drained,
   at ``batch_ops`` ops or after ``batch_seconds``), and only then is the end
   LSN of the last one confirmed to the slot.

A restart asks the slot for what commits from the stored LSN on, so the
server sends nothing stored again, whatever it was last told. SIGTERM
(:meth:`stop`) seals the whole transactions staged, or drops the batch if a
transaction is half received (it comes again); ``idle_exit`` stops after that
many seconds without a change.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import orjson
import psycopg
from psycopg import sql

from ..schema import Schema
from . import CaptureError
from .catalog import Publication, read_publication, text_loaders
from .changes import ChangeOps
from .pgoutput import Begin, Commit, Delete, Insert, Relation, Truncate, Update, decode, format_lsn, parse_lsn
from .replication import Keepalive, ReplicationStream, session_conninfo
from .sinks import OpSink

__all__ = ["CaptureConfig", "CaptureProgress", "Capture"]

# Rows fetched per round trip while copying the snapshot.
_SNAPSHOT_FETCH = 5_000
# Snapshots taken before giving up when a published table is truncated while each is taken.
_SNAPSHOT_TRIES = 5


@dataclass(frozen=True)
class CaptureConfig:
    dsn: str
    publication: str
    slot: str
    idle_exit: float | None = None
    batch_ops: int = 10_000
    batch_seconds: float = 0.2
    #: a batch waits this long for more transactions even when none is coming (0: sealed as soon as the socket
    #: is drained); a landing directory gets fewer, larger files, its reader polls every 0.25 s anyway
    linger_seconds: float = 0.0
    #: how often the progress is reported and the server's WAL position read
    report_seconds: float = 1.0
    #: how often the server is told where the capture is when nothing is sealed
    feedback_seconds: float = 5.0


@dataclass
class CaptureProgress:
    """Where a capture is: what a process shows on its stream's page."""

    phase: str = "starting"
    lsn: int = 0  # everything committed before it is stored
    server_lsn: int = 0  # the server's current WAL position, as last read
    ops: int = 0  # stored since the slot was created
    transactions: int = 0  # stored since this start
    last_commit_ts: float | None = None  # commit time of the newest stored transaction
    stored_at: float | None = None  # when it was stored
    notes: list[str] = field(default_factory=list)

    @property
    def bytes_behind(self) -> int:
        return max(0, self.server_lsn - self.lsn)

    @property
    def seconds_behind(self) -> float | None:
        """How long after its commit the newest stored transaction was stored."""
        if self.last_commit_ts is None or self.stored_at is None:
            return None
        return max(0.0, self.stored_at - self.last_commit_ts)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "lsn": format_lsn(self.lsn), "server_lsn": format_lsn(self.server_lsn),
                "bytes_behind": self.bytes_behind, "seconds_behind": self.seconds_behind, "ops": self.ops,
                "transactions": self.transactions, "last_commit_ts": self.last_commit_ts,
                "stored_at": self.stored_at}


@dataclass
class _Batch:
    """The whole transactions staged since the last seal, and the one being received."""

    stored: int  # everything committed before it is sealed
    ts: float  # the newest ts given: commit times, never going back
    total: int  # ops sealed since the slot was made
    end: int  # end LSN of the newest whole transaction staged
    ops: int = 0
    transactions: int = 0
    since: float | None = None  # when its first op was staged
    commit_ts: float | None = None
    open: Begin | None = None

    @property
    def empty(self) -> bool:
        return self.open is None and self.ops == 0

    def due(self, drained: bool, config: CaptureConfig) -> bool:
        """Whether to seal now: whole transactions wait while more is coming (and ``linger_seconds`` at least),
        up to ``batch_ops`` ops and ``batch_seconds``."""
        if self.open is not None or self.end <= self.stored:
            return False
        age = time.monotonic() - (self.since or 0.0)
        return (drained and age >= config.linger_seconds) or self.ops >= config.batch_ops or age >= config.batch_seconds

    def confirmable(self, sent: int) -> int:
        """What the server may be told is stored: past what it sent when nothing is open or unsealed here."""
        return max(self.stored, sent) if self.empty else self.stored


def _canonical(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """A schema document's relations as the contract reads them, in name order (for comparing two)."""
    return sorted(Schema.from_dict(schema).to_dict()["relations"], key=lambda r: r["name"])


def _ops(ops: ChangeOps, message: Insert | Update | Delete | Truncate, ts: float) -> list[dict[str, Any]]:
    if isinstance(message, Insert):
        return ops.insert(message, ts)
    if isinstance(message, Update):
        return ops.update(message, ts)
    if isinstance(message, Delete):
        return ops.delete(message, ts)
    return ops.truncate(message, ts)


class Capture:
    """One capture of ``config.publication`` through ``config.slot`` into ``sink``."""

    def __init__(self, config: CaptureConfig, sink: OpSink, schema: dict[str, Any] | None = None,
                 on_schema: Callable[[Publication], None] | None = None,
                 on_progress: Callable[[CaptureProgress], None] | None = None):
        """``schema``: the stream schema the ops must follow (a platform stream's, made from the catalog);
        by default the state's (fixed when the capture first started), else the catalog's."""
        self.config = config
        self.sink = sink
        self.state = sink.state
        self.schema = schema
        self.on_schema = on_schema
        self.on_progress = on_progress
        self.progress = CaptureProgress()
        self._stopping = threading.Event()
        self._sql: psycopg.Connection | None = None
        self._stream: ReplicationStream | None = None

    def stop(self) -> None:
        """Stop at the next message (safe from a signal handler)."""
        self._stopping.set()

    def run(self) -> None:
        """Capture until stopped or idle; raises :class:`CaptureError` (or a psycopg error) on failure."""
        try:
            self._sql = psycopg.connect(session_conninfo(self.config.dsn), autocommit=True)
            self._check_server()
            self._check_owner()
            publication = self._publication()
            if self.on_schema is not None:
                self.on_schema(publication)
            self.sink.recover()
            ops = ChangeOps(publication, self.state)
            self.progress.notes = ops.notes
            if self.state.position().phase != "streaming":
                self._snapshot(publication, ops)
            else:
                self._check_slot()
            if not self._stopping.is_set():
                self._follow(ops)
        finally:
            for conn in (self._stream, self._sql):
                if conn is not None:
                    conn.close()
            self.sink.close()

    # ------------------------------------------------------------------ checks

    def _publication(self) -> Publication:
        """The publication as it supplies the capture's schema (see :meth:`__init__`)."""
        assert self._sql is not None
        catalog = read_publication(self._sql, self.config.publication)
        stored = self.state.schema()
        if stored is not None and self.schema is not None and _canonical(stored) != _canonical(self.schema):
            raise CaptureError(f"the stream's schema is not the one {self.sink.description} was captured with: "
                               "reset the stream to capture it again with the new schema")
        wanted = stored or self.schema
        return catalog.restricted_to(wanted) if wanted is not None else catalog

    def _check_server(self) -> None:
        assert self._sql is not None
        level = self._sql.execute("SHOW wal_level").fetchone()
        if level is None or level[0] != "logical":
            raise CaptureError(f"the server runs with wal_level = {level[0] if level else '?'}: set wal_level = logical "
                               "(postgresql.conf) and restart it")

    def _check_owner(self) -> None:
        position = self.state.position()
        for what, mine, wanted in (("slot", position.slot, self.config.slot),
                                   ("publication", position.publication, self.config.publication)):
            if mine is not None and mine != wanted:
                raise CaptureError(f"{self.sink.description} holds the capture of {what} {mine!r}, not {wanted!r}: "
                                   "give it that one, or start a new capture (a new file, or a reset stream)")

    def _slot(self) -> tuple[Any, ...] | None:
        assert self._sql is not None
        return self._sql.execute(
            "SELECT plugin, database, active_pid, wal_status FROM pg_replication_slots WHERE slot_name = %s",
            (self.config.slot,)).fetchone()

    def _check_slot(self) -> None:
        slot = self._slot()
        if slot is None:
            raise CaptureError(f"replication slot {self.config.slot!r} is gone (dropped, or invalidated and removed): "
                               f"what {self.sink.description} holds cannot be continued; start a new capture")
        if slot[3] == "lost":
            raise CaptureError(f"replication slot {self.config.slot!r} lost WAL it needed (max_slot_wal_keep_size): "
                               "start a new capture")

    # ------------------------------------------------------------------ snapshot

    def _snapshot(self, publication: Publication, ops: ChangeOps) -> None:
        assert self._sql is not None
        position = self.state.position()
        existing = self._slot()
        if existing is not None:
            if position.phase != "snapshot":
                raise CaptureError(
                    f"replication slot {self.config.slot!r} exists but {self.sink.description} holds no capture of "
                    f"it: drop it (SELECT pg_drop_replication_slot('{self.config.slot}')) or name another slot")
            self._sql.execute("SELECT pg_drop_replication_slot(%s)", (self.config.slot,))  # ours, from a cut copy
        self.state.reset()  # nothing of a cut copy was sealed: the sink holds nothing either
        self.state.commit(phase="snapshot", slot=self.config.slot, publication=self.config.publication,
                          schema=orjson.dumps(publication.schema_document()).decode())
        self.progress.phase = "snapshot"
        self._report(force=True)
        for _ in range(_SNAPSHOT_TRIES):
            copied = self._copy(publication, ops)
            if copied is None:
                return
            point, ts, count, rewritten = copied
            if not rewritten:
                break
            assert self._stream is not None
            self._stream.close()  # its snapshot predates a truncate the copy saw: a new slot's snapshot holds it
            self._stream = None
            self._sql.execute("SELECT pg_drop_replication_slot(%s)", (self.config.slot,))
        else:
            raise CaptureError(f"{', '.join(rewritten)} truncated or rewritten while each of {_SNAPSHOT_TRIES} "
                               "snapshots was taken: take it when the tables are not truncated so often")
        self.sink.seal(phase="streaming", lsn=point, ts=ts, ops=count)
        self.progress.lsn, self.progress.ops = point, count
        self.progress.last_commit_ts, self.progress.stored_at = ts, time.time()

    def _copy(self, publication: Publication, ops: ChangeOps) -> tuple[int, float, int, list[str]] | None:
        """Create the slot and stage every published row under its snapshot: (consistent point, ``ts``, rows,
        tables truncated or rewritten after the snapshot, none staged then); None if stopped.

        ``TRUNCATE`` is not MVCC-safe: a table truncated after the snapshot looks empty to it. So the copy
        first locks every published table (``ACCESS SHARE``: a truncate waits until the copy ends, and comes
        among the slot's changes), then compares each table's file as the snapshot saw it in ``pg_class``
        with the current one, to catch a truncate committed between the slot's creation and the lock.
        """
        assert self._sql is not None
        row = self._sql.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert row is not None
        ts = float(row[0])
        self._stream = ReplicationStream(self.config.dsn, self.config.slot, self.config.publication)
        point, snapshot = self._stream.create_slot()
        count = 0
        with psycopg.connect(session_conninfo(self.config.dsn)) as copy:
            text_loaders(copy)
            copy.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            copy.read_only = True
            with copy.transaction():
                copy.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))
                copy.execute(sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(sql.SQL(", ").join(
                    sql.Identifier(table.namespace, table.name) for table in publication.tables)))
                changed = {oid for (oid,) in copy.execute(
                    "SELECT oid FROM pg_class WHERE oid = ANY(%s) AND relfilenode <> pg_relation_filenode(oid)",
                    ([table.oid for table in publication.tables],))}  # the column as the snapshot saw it; the file now
                rewritten = [table.qualified for table in publication.tables if table.oid in changed]
                if rewritten:
                    return point, ts, count, rewritten
                for table in publication.tables:
                    with copy.cursor(name=f"kwmonitor_snapshot_{table.oid}") as cur:
                        cur.itersize = _SNAPSHOT_FETCH
                        cur.execute(table.select())
                        while rows := cur.fetchmany(_SNAPSHOT_FETCH):
                            if self._stopping.is_set():
                                self.sink.abandon()
                                return None
                            self.sink.stage([orjson.dumps(ops.snapshot_row(table, row, ts)) for row in rows])
                            count += len(rows)
                            self.progress.ops = count
                            self._report()
        return point, ts, count, []

    # ------------------------------------------------------------------ changes

    def _follow(self, ops: ChangeOps) -> None:
        position = self.state.position()
        batch = _Batch(stored=position.lsn, ts=position.ts or 0.0, total=position.ops, end=position.lsn)
        if self._stream is None:
            self._stream = ReplicationStream(self.config.dsn, self.config.slot, self.config.publication)
        stream = self._stream
        stream.start(batch.stored)  # the server sends what commits from there, whatever it was told before
        self.progress.phase, self.progress.lsn, self.progress.ops = "streaming", batch.stored, batch.total
        self._report(force=True)
        sent = batch.stored  # the server has sent every transaction that committed before this
        last_change = last_feedback = time.monotonic()
        while not self._stopping.is_set():
            waiting = batch.end > batch.stored  # a whole batch lingers: look again soon
            received, drained = stream.read(timeout=0.05 if waiting else min(0.5, self.config.report_seconds))
            for item in received:
                if isinstance(item, Keepalive):
                    sent = max(sent, item.sent)
                    if item.reply:
                        stream.confirm(batch.confirmable(sent))
                        last_feedback = time.monotonic()
                elif self._take(decode(item.payload), ops, batch):
                    last_change = time.monotonic()
            if batch.due(drained, self.config):
                self._seal(batch, stream)
                last_feedback = time.monotonic()
            if time.monotonic() - last_feedback >= self.config.feedback_seconds:
                stream.confirm(batch.confirmable(sent), ask_reply=True)
                last_feedback = time.monotonic()
            self.progress.lsn = max(self.progress.lsn, batch.confirmable(sent))
            self._report()
            idle_for = time.monotonic() - last_change
            if batch.empty and self.config.idle_exit is not None and idle_for >= self.config.idle_exit:
                break
        if batch.open is None and batch.end > batch.stored:
            self._seal(batch, stream)
        elif not batch.empty:
            self.sink.abandon()  # a transaction half received: the batch comes again from the slot
        self._report(force=True)

    def _take(self, message: Any, ops: ChangeOps, batch: "_Batch") -> bool:
        """Stage one pgoutput message's ops in ``batch``; whether it had any."""
        if isinstance(message, Begin):
            batch.open = message
            batch.ts = max(batch.ts, message.commit_ts)
        elif isinstance(message, Commit):
            batch.open = None
            batch.end, batch.commit_ts = message.end_lsn, message.commit_ts
            batch.transactions += 1
        elif isinstance(message, Relation):
            ops.relation(message)
        elif isinstance(message, (Insert, Update, Delete, Truncate)):
            lines = [orjson.dumps(op) for op in _ops(ops, message, batch.ts)]
            if lines:
                self.sink.stage(lines)
                batch.ops += len(lines)
                batch.since = batch.since or time.monotonic()
                return True
        return False

    def _seal(self, batch: "_Batch", stream: ReplicationStream) -> None:
        """Make the batch durable with the state, then tell the server."""
        batch.total += batch.ops
        self.sink.seal(lsn=batch.end, ts=batch.ts, ops=batch.total)
        stream.confirm(batch.end)
        self.progress.lsn, self.progress.ops = batch.end, batch.total
        self.progress.transactions += batch.transactions
        self.progress.last_commit_ts, self.progress.stored_at = batch.commit_ts, time.time()
        batch.stored, batch.ops, batch.transactions, batch.since = batch.end, 0, 0, None

    # ------------------------------------------------------------------ progress

    _reported = 0.0

    def _report(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.on_progress is None or (not force and now - self._reported < self.config.report_seconds):
            return
        self._reported = now
        if self._sql is not None:
            row = self._sql.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            if row is not None:
                self.progress.server_lsn = parse_lsn(row[0])
        self.on_progress(self.progress)
