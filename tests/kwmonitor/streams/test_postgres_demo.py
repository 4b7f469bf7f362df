"""The demo's PostgreSQL-sourced stream: its tables, its stream and queries, and its feeder writing the demo
feed into the tables so that the capture gives back exactly what the tables hold."""

from __future__ import annotations

import itertools
import json

import orjson
import pytest

from kwmonitor.streams.demo import DEMO_DIR, DEMO_QUERIES, demo_feed
from kwmonitor.streams.demo.postgres import DSN_ENV, TableFeeder, load_postgres_demo
from streaming.capture.capture import Capture, CaptureConfig
from streaming.capture.sinks import FileSink
from streaming.capture.state import CaptureState
from streaming.schema import Schema
from tests.streaming.capture.reference import replay, table_rows

pytestmark = pytest.mark.django_db


def test_the_demo_tables_fed_and_captured_give_back_the_tables(source_db, monkeypatch, staff_user, tmp_path):
    monkeypatch.setenv(DSN_ENV, source_db)
    stream = load_postgres_demo(staff_user.username)
    assert load_postgres_demo(staff_user.username).pk == stream.pk  # idempotent
    ecommerce = json.loads((DEMO_DIR / "schema.json").read_text())["relations"]
    made = stream.schema.to_document()["relations"]
    assert sorted(made, key=lambda r: r["name"]) == sorted(ecommerce, key=lambda r: r["name"])  # the demo's relations
    assert stream.user_queries and sorted(q.name for q in stream.queries.all()) == sorted(q[0] for q in DEMO_QUERIES)

    out = tmp_path / "ops.ndjson"
    config = CaptureConfig(dsn=source_db, publication="demo", slot="kw_demo", idle_exit=0.5)
    state = CaptureState(tmp_path / "state")
    Capture(config, FileSink(out, state)).run()  # the slot and its (empty) snapshot
    result = TableFeeder(stream).run(itertools.islice(demo_feed(1500), 1506))
    assert result.applied > 1000 and any("not an op of the stream" in r for r in result.skipped)  # the bad lines
    Capture(config, FileSink(out, state)).run()
    state.close()
    graph = Schema.from_dict(stream.schema.to_document())
    assert replay(out.read_bytes().splitlines(), graph) == table_rows(source_db, graph)
    assert all(orjson.loads(line)["ts"] > 1e9 for line in out.read_bytes().splitlines())  # commit times
