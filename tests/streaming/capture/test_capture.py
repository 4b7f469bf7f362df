"""The capture against a real PostgreSQL with wal_level=logical: snapshot, what each change becomes, restarts.

Each test runs the capture in this process until it has been idle a moment
(``idle_exit``), changes the tables, and runs it again: the second run
resumes from the state the first left, as a restarted capture does.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import orjson
import psycopg
import pytest

from streaming.capture.capture import Capture, CaptureConfig
from streaming.capture.catalog import CatalogError
from streaming.capture import CaptureError
from streaming.capture.sinks import FileSink
from streaming.capture.state import CaptureState
from streaming.schema import Schema
from tests.streaming.capture.reference import replay, table_rows

SHOP = """
CREATE TABLE customer (cid int PRIMARY KEY, name text, state text);
CREATE TABLE product (pid int PRIMARY KEY, title text, price numeric(8, 2));
CREATE TABLE orders (oid int PRIMARY KEY, cid int REFERENCES customer ON DELETE CASCADE,
                     pid int REFERENCES product, note text);
INSERT INTO customer VALUES (1, 'Ann Lee', 'Texas'), (2, 'Bob Ray', 'Oregon');
INSERT INTO product VALUES (1, 'Red dress', 49.5), (2, 'Boots', 120);
INSERT INTO orders VALUES (1, 1, 1, 'gift'), (2, 2, 2, NULL);
CREATE PUBLICATION shop FOR TABLE customer, product, orders;
"""


def sql(dsn: str, *statements: str) -> None:
    """Each statement in its own transaction (a string of several: one transaction)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            with conn.transaction():
                conn.execute(statement)


def capture(dsn: str, out: Path, idle: float = 0.4, publication: str = "shop", slot: str = "kw_test",
            **config) -> Capture:
    state = CaptureState(out.with_name(out.name + ".state"))
    try:
        run = Capture(CaptureConfig(dsn=dsn, publication=publication, slot=slot, idle_exit=idle, **config),
                      FileSink(out, state))
        run.run()
    finally:
        state.close()
    return run


def ops_of(out: Path) -> list[dict]:
    return [orjson.loads(line) for line in out.read_bytes().splitlines()]


def shape(ops: list[dict]) -> list[tuple]:
    return [(o["op"], o["relation"], o.get("key", o.get("tuple"))) for o in ops]


def test_snapshot_then_each_change_as_the_contract_says(source_db, tmp_path):
    out = tmp_path / "ops.ndjson"
    sql(source_db, SHOP)
    capture(source_db, out)
    snapshot = ops_of(out)
    assert shape(snapshot) == [
        ("insert", "customer", {"cid": 1, "name": "Ann Lee", "state": "Texas"}),
        ("insert", "customer", {"cid": 2, "name": "Bob Ray", "state": "Oregon"}),
        ("insert", "orders", {"oid": 1, "cid": 1, "pid": 1, "note": "gift"}),
        ("insert", "orders", {"oid": 2, "cid": 2, "pid": 2, "note": None}),
        ("insert", "product", {"pid": 1, "title": "Red dress", "price": 49.5}),
        ("insert", "product", {"pid": 2, "title": "Boots", "price": 120.0}),
    ]
    assert len({o["ts"] for o in snapshot}) == 1
    before = time.time()
    sql(source_db,
        "INSERT INTO product VALUES (3, 'Scarf', 12); UPDATE product SET price = 45 WHERE pid = 1",
        "UPDATE orders SET oid = 10, note = 'rush' WHERE oid = 1",
        "DELETE FROM customer WHERE cid = 2",  # cascades to order 2
        "TRUNCATE orders",
        "INSERT INTO orders VALUES (11, 1, 3, 'again')")
    capture(source_db, out)
    changes = ops_of(out)[len(snapshot):]
    assert shape(changes) == [
        ("insert", "product", {"pid": 3, "title": "Scarf", "price": 12.0}),
        ("delete", "product", 1), ("insert", "product", {"pid": 1, "title": "Red dress", "price": 45.0}),
        ("delete", "orders", 1), ("insert", "orders", {"oid": 10, "cid": 1, "pid": 1, "note": "rush"}),
        ("delete", "customer", 2), ("delete", "orders", 2),  # the cascade comes after its cause
        ("delete", "orders", 10),
        ("insert", "orders", {"oid": 11, "cid": 1, "pid": 3, "note": "again"}),
    ]
    times = [o["ts"] for o in changes]
    transactions = [times[0:3], times[3:5], times[5:7], times[7:8], times[8:9]]
    assert all(len(set(t)) == 1 for t in transactions)  # one commit time per transaction
    assert [t[0] for t in transactions] == sorted({t[0] for t in transactions})
    assert before - 1 < times[0] <= times[-1] < time.time() + 1
    schema = Schema.from_dict({"name": "shop", "relations": [
        {"name": "customer", "key": "cid", "attributes": {"cid": "int", "name": "text", "state": "text"}},
        {"name": "product", "key": "pid", "attributes": {"pid": "int", "title": "text", "price": "float"}},
        {"name": "orders", "key": "oid", "attributes": {"oid": "int", "cid": "int", "pid": "int", "note": "text"}}]})
    assert replay(out.read_bytes().splitlines(), schema) == table_rows(source_db, schema)


def test_an_update_that_leaves_a_toasted_value_still_carries_it(source_db, tmp_path):
    out = tmp_path / "ops.ndjson"
    long_text = " ".join(f"{random.Random(7).random():.17f}{i}" for i in range(600))  # ~12 kB, stored out of line
    sql(source_db, "CREATE TABLE doc (id int PRIMARY KEY, body text, n int); CREATE PUBLICATION shop FOR TABLE doc",
        f"INSERT INTO doc VALUES (1, '{long_text}', 0)")
    capture(source_db, out)
    sql(source_db, "UPDATE doc SET n = 1 WHERE id = 1")
    capture(source_db, out)
    last = ops_of(out)[-1]
    assert last["op"] == "insert" and last["tuple"] == {"id": 1, "body": long_text, "n": 1}


def test_values_are_typed_as_the_schema_types_them(source_db, tmp_path):
    out = tmp_path / "ops.ndjson"
    sql(source_db, """
        CREATE TABLE v (id bigint PRIMARY KEY, f float8, r real, n numeric, b boolean, c char(4), u uuid,
                        at timestamptz, local timestamp, day date);
        CREATE PUBLICATION shop FOR TABLE v;
        SET TimeZone = 'America/New_York';
        INSERT INTO v VALUES (9007199254740993, 0.1, 1.5, 12345678901234567890.5, true, 'ab',
                              'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-05-06 07:08:09.25+02',
                              '2024-05-06 07:08:09', '2024-01-02'),
                             (2, 'NaN', '-Infinity', 'NaN', false, NULL, NULL, 'infinity', '-infinity', '0044-03-15 BC');
    """)
    capture(source_db, out)
    sql(source_db, "UPDATE v SET b = NOT b")
    capture(source_db, out)
    ops = ops_of(out)
    first = {"id": 9007199254740993, "f": 0.1, "r": 1.5, "n": 12345678901234567890.5, "b": True, "c": "ab  ",
             "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "at": 1714972089.25, "local": 1714979289.0,
             "day": 1704153600.0}
    second = {"id": 2, "f": None, "r": None, "n": None, "b": False, "c": None, "u": None, "at": None, "local": None,
              "day": None}
    assert [o["tuple"] for o in ops[:2]] == [first, second]  # snapshot: the values as they are
    changed = {o["tuple"]["id"]: o["tuple"] for o in ops[2:] if o["op"] == "insert"}
    assert changed == {1 << 53 | 1: dict(first, b=False), 2: dict(second, b=True)}  # the same forms from pgoutput


def test_a_snapshot_taken_under_load_is_consistent_with_the_slot(source_db, tmp_path):
    """Rows committed while the snapshot is copied are in the snapshot or in the slot's changes, never both,
    never neither: the replayed ops equal the table."""
    out = tmp_path / "ops.ndjson"
    sql(source_db, "CREATE TABLE t (id int PRIMARY KEY, v int); CREATE PUBLICATION shop FOR TABLE t",
        "INSERT INTO t SELECT g, 0 FROM generate_series(1, 20000) g")
    stop = threading.Event()
    writes = [0]

    def write() -> None:
        rng = random.Random(3)
        with psycopg.connect(source_db, autocommit=True) as conn:
            while not stop.is_set():
                key = rng.randrange(1, 25000)
                with conn.transaction():
                    conn.execute("INSERT INTO t VALUES (%s, 1) ON CONFLICT (id) DO UPDATE SET v = t.v + 1", (key,))
                    conn.execute("DELETE FROM t WHERE id = %s", (rng.randrange(1, 25000),))
                writes[0] += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        time.sleep(0.3)
        capture(source_db, out, idle=0.0001, batch_seconds=0.05)
    finally:
        stop.set()
        writer.join()
    capture(source_db, out)
    schema = Schema.from_dict({"name": "shop", "relations": [
        {"name": "t", "key": "id", "attributes": {"id": "int", "v": "int"}}]})
    assert writes[0] > 50
    assert replay(out.read_bytes().splitlines(), schema) == table_rows(source_db, schema)


def test_a_restart_resumes_where_the_state_is_and_adds_nothing_twice(source_db, tmp_path):
    out = tmp_path / "ops.ndjson"
    sql(source_db, SHOP)
    capture(source_db, out)
    sql(source_db, "INSERT INTO product VALUES (3, 'Scarf', 12)")
    capture(source_db, out)
    size = out.stat().st_size
    capture(source_db, out)
    assert out.stat().st_size == size
    sql(source_db, "DELETE FROM product WHERE pid = 3")
    capture(source_db, out)
    assert ops_of(out)[-2:][1]["op"] == "delete" and len(ops_of(out)) == 8


def test_the_schema_stays_the_one_the_capture_started_with(source_db, tmp_path):
    """A column added while it runs, or before a restart, is left out of the ops (and said so); a column of the
    schema that goes away stops it."""
    out = tmp_path / "ops.ndjson"
    sql(source_db, SHOP)
    running = threading.Thread(target=capture, args=(source_db, out), kwargs={"idle": 1.5})
    running.start()
    time.sleep(0.8)
    sql(source_db, "ALTER TABLE product ADD COLUMN stock int", "INSERT INTO product VALUES (3, 'Scarf', 12, 5)")
    running.join()
    sql(source_db, "INSERT INTO product VALUES (4, 'Hat', 9, 1)")
    run = capture(source_db, out)
    assert [o["tuple"] for o in ops_of(out)[-2:]] == [{"pid": 3, "title": "Scarf", "price": 12.0},
                                                      {"pid": 4, "title": "Hat", "price": 9.0}]
    assert any("product: column(s) stock are not in the stream schema" in note for note in run.progress.notes)
    sql(source_db, "ALTER TABLE product DROP COLUMN title")
    with pytest.raises(CatalogError, match="relation 'product' of the stream schema: column 'title' is no longer"):
        capture(source_db, out)


def test_what_it_cannot_continue_is_refused(source_db, tmp_path):
    out = tmp_path / "ops.ndjson"
    sql(source_db, SHOP)
    with psycopg.connect(source_db, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot('theirs', 'pgoutput')")
    with pytest.raises(CaptureError, match="slot 'theirs' exists but .* holds no capture of it"):
        capture(source_db, out, slot="theirs")
    foreign = tmp_path / "foreign.ndjson"
    foreign.write_text('{"op":"insert"}\n')
    with pytest.raises(CaptureError, match="already holds 16 bytes"):
        capture(source_db, foreign)
    capture(source_db, out)
    with pytest.raises(CaptureError, match="holds the capture of slot 'kw_test', not 'other'"):
        capture(source_db, out, slot="other")
    with psycopg.connect(source_db, autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot('kw_test')")
    with pytest.raises(CaptureError, match="slot 'kw_test' is gone"):
        capture(source_db, out)
