"""The capture's state: where it is in the slot and the live rows, in one SQLite file.

The state changes only in transactions that also seal what the sink holds
(:mod:`.sinks`): a batch's ops, the live rows they leave, the end LSN of its
last transaction, its last ``ts`` and the sink's own mark (how many bytes of
the output file are sealed; the landing files not yet placed) commit together
or not at all. SQLite commits durably (write-ahead log, ``synchronous=FULL``),
and only then is the LSN confirmed to the slot. A second capture on the same
state waits for nothing: it fails at once (:class:`StateBusy`).

Phases: none (a new state), ``snapshot`` (the slot was created and the
snapshot is being copied: a crash then means starting over with a new slot),
``streaming`` (the snapshot is stored; ``lsn`` is where the slot resumes).
"""

from __future__ import annotations

import fcntl
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["StateBusy", "Position", "CaptureState"]

# Rows changed in an open transaction are written to SQLite in groups of this many (a snapshot may hold millions).
_FLUSH_ROWS = 20_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS live (relation TEXT NOT NULL, key TEXT NOT NULL, row BLOB NOT NULL,
                                 PRIMARY KEY (relation, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending (first_seq INTEGER PRIMARY KEY, count INTEGER NOT NULL, data BLOB NOT NULL);
"""


class StateBusy(RuntimeError):
    """Another capture holds this state."""


@dataclass(frozen=True)
class Position:
    """What the state says about the capture (``lsn`` 0 and ``ts`` None before anything was stored)."""

    phase: str | None = None
    slot: str | None = None
    publication: str | None = None
    lsn: int = 0
    ts: float | None = None
    sink_bytes: int = 0
    ops: int = 0


class CaptureState:
    """One capture's state file; a :class:`~streaming.capture.changes.RowStore` within its transaction."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path.with_name(self.path.name + ".lock"), "a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise StateBusy(f"another capture is using {self.path}") from None
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(_SCHEMA)
        self._changed: dict[tuple[str, bytes], bytes | None] = {}
        self._open = False

    def close(self) -> None:
        if self._open:
            self.rollback()
        self.db.close()
        self._lock.close()

    # ------------------------------------------------------------------ position

    def position(self) -> Position:
        meta = dict(self.db.execute("SELECT name, value FROM meta").fetchall())
        return Position(
            phase=meta.get("phase"), slot=meta.get("slot"), publication=meta.get("publication"),
            lsn=int(meta.get("lsn", 0)), ts=float(meta["ts"]) if "ts" in meta else None,
            sink_bytes=int(meta.get("sink_bytes", 0)), ops=int(meta.get("ops", 0)))

    def schema(self) -> dict[str, Any] | None:
        """The stream schema the capture was started with (None before its first snapshot)."""
        found = self.db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        return orjson.loads(found[0]) if found else None

    # ------------------------------------------------------------------ transactions

    def begin(self) -> None:
        if not self._open:
            self.db.execute("BEGIN IMMEDIATE")
            self._open = True

    @property
    def in_transaction(self) -> bool:
        return self._open

    def commit(self, **meta: Any) -> None:
        """Write the rows changed and ``meta`` (phase, slot, publication, schema, lsn, ts, sink_bytes, ops),
        durably."""
        self.begin()
        self._flush()
        self.db.executemany("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
                            [(name, str(value)) for name, value in meta.items() if value is not None])
        self.db.execute("COMMIT")
        self._open = False

    def rollback(self) -> None:
        self._changed.clear()
        if self._open:
            self.db.execute("ROLLBACK")
            self._open = False

    def reset(self) -> None:
        """Forget everything (a new slot's snapshot starts from nothing)."""
        self.rollback()
        self.db.execute("BEGIN IMMEDIATE")
        for table in ("meta", "live", "pending"):
            self.db.execute(f"DELETE FROM {table}")
        self.db.execute("COMMIT")

    def _flush(self) -> None:
        if not self._changed:
            return
        puts = [(r, k, v) for (r, k), v in self._changed.items() if v is not None]
        gone = [(r, k) for (r, k), v in self._changed.items() if v is None]
        self.db.executemany("DELETE FROM live WHERE relation = ? AND key = ?", gone)
        self.db.executemany("INSERT OR REPLACE INTO live (relation, key, row) VALUES (?, ?, ?)", puts)
        self._changed.clear()

    # ------------------------------------------------------------------ live rows (RowStore)

    def row(self, relation: str, key: Any) -> dict[str, Any] | None:
        id_ = (relation, orjson.dumps(key))
        if id_ in self._changed:
            raw = self._changed[id_]
        else:
            found = self.db.execute("SELECT row FROM live WHERE relation = ? AND key = ?", id_).fetchone()
            raw = found[0] if found else None
        return orjson.loads(raw) if raw is not None else None

    def put_row(self, relation: str, key: Any, row: dict[str, Any]) -> None:
        self._change((relation, orjson.dumps(key)), orjson.dumps(row))

    def remove_row(self, relation: str, key: Any) -> None:
        self._change((relation, orjson.dumps(key)), None)

    def _change(self, id_: tuple[str, bytes], value: bytes | None) -> None:
        self.begin()
        self._changed[id_] = value
        if len(self._changed) >= _FLUSH_ROWS:
            self._flush()

    def keys(self, relation: str) -> list[Any]:
        self.begin()
        self._flush()
        return [orjson.loads(k) for (k,) in self.db.execute("SELECT key FROM live WHERE relation = ? ORDER BY key",
                                                            (relation,))]

    # ------------------------------------------------------------------ files not yet placed (landing sink)

    def add_pending(self, first_seq: int, count: int, data: bytes) -> None:
        self.begin()
        self.db.execute("INSERT OR REPLACE INTO pending (first_seq, count, data) VALUES (?, ?, ?)",
                        (first_seq, count, data))

    def pending(self) -> list[tuple[int, int, bytes]]:
        """(first seq, ops, stamped lines) of each file reserved but maybe not placed, in seq order."""
        return [(first, count, bytes(data)) for first, count, data
                in self.db.execute("SELECT first_seq, count, data FROM pending ORDER BY first_seq")]

    def clear_pending(self) -> None:
        """Forget the files once placed (its own small commit)."""
        self.db.execute("DELETE FROM pending")

