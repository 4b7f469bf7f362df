"""The demo's PostgreSQL-sourced stream: its tables, its stream and queries, and its feeder writing the demo
feed into the tables so that the capture gives back exactly what the tables hold."""

from __future__ import annotations

import io
import json
import re

import orjson
import pytest
from django.core.management import call_command

from kwmonitor.streams.demo import DEMO_DIR, DEMO_QUERIES
from kwmonitor.streams.demo.postgres import DSN_ENV, load_postgres_demo
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
    report = io.StringIO()
    call_command("feed_demo", "--stream", stream.name, "--rate", "0", "--ops", "1500", stdout=report)
    counts = [tuple(map(int, re.fullmatch(r"(\d+) ops applied, (\d+) skipped", line).groups()))
              for line in report.getvalue().splitlines()]
    assert len(counts) == 2  # a line per 1,000 lines sent
    assert sum(a for a, _ in counts) > 1000 and sum(s for _, s in counts) >= 6  # the bad lines are skipped
    Capture(config, FileSink(out, state)).run()
    state.close()
    graph = Schema.from_dict(stream.schema.to_document())
    assert replay(out.read_bytes().splitlines(), graph) == table_rows(source_db, graph)
    assert all(orjson.loads(line)["ts"] > 1e9 for line in out.read_bytes().splitlines())  # commit times
