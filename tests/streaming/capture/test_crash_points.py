"""A kill at each point of a batch's seal, made to happen exactly there, for both sinks.

The random SIGKILLs of ``test_exactly_once`` land where the capture spends
its time; these land on the narrow steps between them: ops staged but not
sealed, the state committed but the LSN not yet confirmed to the slot (the
server sends that transaction again), landing files recorded but not placed,
placed but not yet forgotten. Each run dies there; the next run, with a
plain sink, must leave a history that replays to exactly the tables' rows.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import psycopg
import pytest

from streaming.capture.capture import Capture, CaptureConfig
from streaming.capture.sinks import FileSink, LandingSink
from streaming.capture.state import CaptureState
from streaming.schema import Schema
from streaming.sources import LandingFile, LandingWriter, read_landing, split_seq
from tests.streaming.capture.reference import replay, table_rows

SCHEMA = Schema.from_dict({"name": "shop", "relations": [
    {"name": "product", "key": "pid", "attributes": {"pid": "int", "title": "text", "price": "float"}}]})


class Killed(BaseException):
    """The process dies here (not an Exception: nothing on the way out handles it)."""


def crashing(base: type, point: str, seal_number: int) -> type:
    """``base`` dying at ``point`` of its ``seal_number``-th seal (1: the snapshot's)."""

    class Crashing(base):  # type: ignore[misc, valid-type]
        seals = 0

        def seal(self, **meta):
            type(self).seals += 1
            due = type(self).seals == seal_number
            if due and point == "before seal":
                raise Killed
            super().seal(**meta)
            if due and point == "after seal":  # the state is committed, the slot not told
                raise Killed

        def _place(self):
            due = type(self).seals == seal_number
            if due and point == "before place" and self.state.pending():
                raise Killed
            if due and point == "after place" and self.state.pending():
                pending = self.state.pending
                self.state.pending = lambda: []  # placed, but the state still lists them when it dies
                try:
                    for first, count, data in pending():
                        self.writer.place(LandingFile(first, count, data))
                finally:
                    del self.state.pending
                raise Killed
            super()._place()

    return Crashing


def run(dsn: str, state_path: Path, make_sink, idle: float = 0.3) -> None:
    state = CaptureState(state_path)
    try:
        Capture(CaptureConfig(dsn=dsn, publication="shop", slot="crash", idle_exit=idle), make_sink(state)).run()
    finally:
        state.close()


def write(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def history(dsn: str, state_path: Path, sink_for) -> None:
    """Snapshot, changes, a run killed at the point, more changes, a plain run."""
    write(dsn, "CREATE TABLE product (pid int PRIMARY KEY, title text, price float8)",
          "INSERT INTO product SELECT g, 'item ' || g, g FROM generate_series(1, 50) g",
          "CREATE PUBLICATION shop FOR TABLE product")
    run(dsn, state_path, sink_for(None))
    write(dsn, "UPDATE product SET price = price + 1 WHERE pid <= 10", "DELETE FROM product WHERE pid > 45",
          "INSERT INTO product VALUES (100, 'new', 1)")
    with pytest.raises(Killed):
        run(dsn, state_path, sink_for("crash"))
    write(dsn, "UPDATE product SET pid = 200 WHERE pid = 100", "TRUNCATE product",
          "INSERT INTO product VALUES (1, 'again', 2)")
    run(dsn, state_path, sink_for(None))


@pytest.mark.parametrize("point", ["before seal", "after seal"])
def test_file_sink(source_db, tmp_path, point):
    out = tmp_path / "ops.ndjson"

    def sink_for(crash):
        kind = crashing(FileSink, point, seal_number=1) if crash else FileSink
        return lambda state: kind(out, state)

    history(source_db, tmp_path / "state", sink_for)
    assert replay(out.read_bytes().splitlines(), SCHEMA) == table_rows(source_db, SCHEMA)


@pytest.mark.redis
@pytest.mark.parametrize("point", ["before seal", "after seal", "before place", "after place"])
def test_landing_sink(source_db, tmp_path, redis_client, point):
    directory = tmp_path / "landing" / "7"

    def sink_for(crash):
        kind = crashing(LandingSink, point, seal_number=1) if crash else LandingSink
        return lambda state: kind(LandingWriter(redis_client, 7, directory), state, ops_per_file=4)

    history(source_db, tmp_path / "state", sink_for)
    stored = [split_seq(line) for line in read_landing(directory)]
    seqs = [seq for seq, _ in stored]
    assert seqs == sorted(set(seqs))  # each seq once, in file order
    lines = [orjson.dumps(op) for _, op in stored]
    assert replay(lines, SCHEMA) == table_rows(source_db, SCHEMA)
