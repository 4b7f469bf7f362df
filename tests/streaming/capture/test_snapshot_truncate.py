"""A ``TRUNCATE`` committed while the snapshot is taken is neither lost nor half seen.

``TRUNCATE`` is not MVCC-safe: a table truncated after a snapshot was taken
looks empty to that snapshot. The capture copies the tables one after the
other under the slot's snapshot, so a truncate committed in between used to
empty the snapshot's copy of a later table, while the changes committed
before the truncate (a delete of one of its rows) still came from the slot:
the history deleted a row it never inserted. ``test_exactly_once`` hit this
once in CI (a snapshot of the accounts with no transfer). Here the truncate
lands at the two moments that matter, exactly: while the first table is
copied, and between the slot's creation and the copy's first read.
"""

from __future__ import annotations

import threading
import time

import psycopg

from streaming.capture.capture import Capture, CaptureConfig
from streaming.capture.replication import ReplicationStream
from streaming.capture.sinks import FileSink
from streaming.capture.state import CaptureState
from streaming.schema import Schema
from tests.streaming.capture.reference import replay, table_rows

BANK = """
CREATE TABLE account (id int PRIMARY KEY, balance int);
CREATE TABLE transfer (id int PRIMARY KEY, amount int);
INSERT INTO account SELECT g, 100 FROM generate_series(1, 20) g;
INSERT INTO transfer SELECT g, g FROM generate_series(1, 10) g;
CREATE PUBLICATION bank FOR TABLE account, transfer;
"""
SCHEMA = Schema.from_dict({"name": "bank", "relations": [
    {"name": "account", "key": "id", "attributes": {"id": "int", "balance": "int"}},
    {"name": "transfer", "key": "id", "attributes": {"id": "int", "amount": "int"}}]})


def delete_then_truncate(dsn: str) -> None:
    """A change the slot sends (a delete of transfer 1), then the truncate, each committed on its own."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM transfer WHERE id = 1")
        conn.execute("TRUNCATE transfer")


def waiting_for_a_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND query LIKE 'TRUNCATE%%'").fetchone()
    return bool(row and row[0])


def capture(dsn: str, sink_type: type, tmp_path) -> None:
    out = tmp_path / "ops.ndjson"
    state = CaptureState(tmp_path / "state")
    try:
        Capture(CaptureConfig(dsn=dsn, publication="bank", slot="truncated", idle_exit=0.5),
                sink_type(out, state)).run()
    finally:
        state.close()


def history(tmp_path) -> dict:
    return replay((tmp_path / "ops.ndjson").read_bytes().splitlines(), SCHEMA)


def test_a_truncate_while_the_first_table_is_copied_comes_after_the_snapshot(source_db, tmp_path):
    """The truncate waits for the copy (which holds every published table), so the snapshot has the
    transfers and the slot sends the delete, then the truncate."""
    with psycopg.connect(source_db, autocommit=True) as conn:
        conn.execute(BANK)
    writer = threading.Thread(target=delete_then_truncate, args=(source_db,))

    class TruncatedDuringTheCopy(FileSink):
        def stage(self, lines):
            if not writer.is_alive() and writer.ident is None:  # the first rows of the first table (account)
                writer.start()
                deadline = time.monotonic() + 30
                while writer.is_alive() and not waiting_for_a_lock(source_db) and time.monotonic() < deadline:
                    time.sleep(0.02)
            super().stage(lines)

    capture(source_db, TruncatedDuringTheCopy, tmp_path)
    writer.join(timeout=30)
    assert not writer.is_alive()
    capture(source_db, FileSink, tmp_path)  # the delete and the truncate, committed once the copy ended
    assert history(tmp_path) == table_rows(source_db, SCHEMA)
    assert table_rows(source_db, SCHEMA)["transfer"] == {}


def test_a_truncate_between_the_slot_and_the_copy_takes_the_snapshot_again(source_db, tmp_path, monkeypatch):
    """Committed after the slot's snapshot but before the copy locks the tables, the truncate would empty the
    copy of a table whose delete the slot still sends; the capture sees the table was rewritten and starts
    over with a new slot, whose snapshot holds the truncate."""
    with psycopg.connect(source_db, autocommit=True) as conn:
        conn.execute(BANK)
    create_slot = ReplicationStream.create_slot
    slots: list[int] = []

    def create_slot_then_truncate(self):
        made = create_slot(self)
        slots.append(made[0])
        if len(slots) == 1:
            delete_then_truncate(source_db)
        return made

    monkeypatch.setattr(ReplicationStream, "create_slot", create_slot_then_truncate)
    capture(source_db, FileSink, tmp_path)
    assert len(slots) == 2
    assert history(tmp_path) == table_rows(source_db, SCHEMA)
    assert table_rows(source_db, SCHEMA)["transfer"] == {}
    with psycopg.connect(source_db, autocommit=True) as conn:
        slot_names = [name for (name,) in conn.execute("SELECT slot_name FROM pg_replication_slots")]
    assert slot_names == ["truncated"]

