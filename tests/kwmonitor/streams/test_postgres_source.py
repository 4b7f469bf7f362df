"""A stream whose source is a PostgreSQL publication: made in the admin (schema from the catalog, DSN from the
environment), captured by a process the supervisor runs, closed to ingest, its lag and its slot on the stream
page, and reset (slot dropped, state erased).

The database is a throwaway cluster with wal_level=logical; the capture is the real ``python -m
streaming.capture`` process (the primary evaluator is the heartbeat stand-in: no Spark here).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import psycopg
import pytest
from django.urls import reverse

from kwmonitor.catalog.models import Schema
from kwmonitor.streams.management.commands.reset_stream import Command as ResetStream
from kwmonitor.streams.models import Evaluator, Stream
from kwmonitor.streams.plans import publish_plan
from kwmonitor.streams.postgres import watch_slots
from kwmonitor.streams.supervisor import Supervisor, SupervisorSettings
from streaming import bus
from streaming.schema import Schema as SchemaGraph
from streaming.sources import read_landing, split_seq
from tests.kwmonitor.streams.conftest import HEARTBEAT_COMMAND
from tests.kwmonitor.streams.test_supervisor import wait_for
from tests.streaming.capture.reference import replay, table_rows

TABLES = """
CREATE TABLE customer (cid int PRIMARY KEY, name text, state text);
CREATE TABLE product (pid int PRIMARY KEY, title text, price numeric(8, 2));
CREATE TABLE orders (oid int PRIMARY KEY, cid int REFERENCES customer, pid int REFERENCES product, note text,
                     doc jsonb, CHECK (oid > 0));
INSERT INTO customer VALUES (1, 'Ann Lee', 'Texas');
INSERT INTO product VALUES (1, 'Red dress', 49.5);
INSERT INTO orders VALUES (1, 1, 1, 'gift', NULL);
CREATE PUBLICATION shop FOR TABLE customer, product, orders (oid, cid, pid, note);
"""


@pytest.fixture
def tables(source_db, monkeypatch):
    with psycopg.connect(source_db, autocommit=True) as conn:
        conn.execute(TABLES)
    monkeypatch.setenv("KW_DSN_SHOP", source_db)
    return source_db


def form(**changes) -> dict:
    data = {"name": "pgshop", "item_format": "json", "source_kind": "postgres", "source_dsn_env": "KW_DSN_SHOP",
            "source_publication": "shop", "source_slot": "kw_pgshop", "schema_from_catalog": "on",
            "evaluator_processes": "1", "dtd": "", "xml_mapping": "null", "schema": ""}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.django_db
def test_the_admin_makes_the_stream_and_its_schema_from_the_catalog(staff_client, tables):
    response = staff_client.post(reverse("admin:streams_stream_add"), form(), follow=True)
    assert response.status_code == 200, response.content
    stream = Stream.objects.get(name="pgshop")
    doc = stream.schema.to_document()
    assert stream.schema.name == "pgshop" and [r["name"] for r in doc["relations"]] == ["customer", "orders", "product"]
    orders = next(r for r in doc["relations"] if r["name"] == "orders")
    assert orders["attributes"] == {"oid": "int", "cid": "int", "pid": "int", "note": "text"}  # the column list
    assert {fk["references"] for fk in orders["foreign_keys"]} == {"customer", "product"}
    assert set(Evaluator.objects.filter(stream=stream).values_list("role", flat=True)) == {"primary", "capture"}
    assert stream.source_dsn_env == "KW_DSN_SHOP" and tables not in str(Stream.objects.filter(pk=stream.pk).values())
    assert "made from the catalog: customer, orders, product" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("changes, field, message", [
    ({"source_dsn_env": "KW_DSN_NOPE"}, "source_publication", "KW_DSN_NOPE holding the DSN of stream 'pgshop' is not set"),
    ({"source_publication": "nope"}, "source_publication", "publication 'nope' does not exist"),
    ({"source_dsn_env": "SECRET_KEY", "schema_from_catalog": None}, "source_dsn_env", "KW_DSN_ and capitals"),
    ({"source_slot": "Bad-Slot", "schema_from_catalog": None}, "source_slot", "lower-case letters"),
    ({"schema_from_catalog": None}, "schema", "Choose the stream&#x27;s schema"),
    ({"item_format": "xml", "schema_from_catalog": None, "schema": "__existing__"}, "item_format", "not XML items"),
    ({"source_kind": "landing"}, "schema_from_catalog", "Only a PostgreSQL source has a catalog"),
])
def test_what_the_admin_refuses(staff_client, tables, ecommerce_schema, changes, field, message):
    if changes.get("schema") == "__existing__":
        changes["schema"] = str(ecommerce_schema.pk)
    response = staff_client.post(reverse("admin:streams_stream_add"), form(**changes))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors and message.replace("&#x27;", "'") in " ".join(errors[field]), errors
    assert not Stream.objects.filter(name="pgshop").exists() and not Schema.objects.filter(name="pgshop").exists()


def landing_ops(stream: Stream) -> list[bytes]:
    return [orjson.dumps(split_seq(line)[1]) for line in read_landing(stream.landing_path())]


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_supervisor_runs_the_capture_into_the_landing_directory(tables, redis_client, staff_client, settings,
                                                                    tmp_path, reap_evaluators):
    """About 10 s: two processes start, the capture makes its slot and copies the tables."""
    settings.LANDING_DIR, settings.CHECKPOINT_DIR = tmp_path / "landing", tmp_path / "checkpoints"
    from kwmonitor.streams.postgres import publication_of

    probe = Stream(name="pgshop", source_dsn_env="KW_DSN_SHOP", source_publication="shop")
    schema = Schema.import_document(dict(publication_of(probe).schema_document(), name="pgshop"))
    stream = Stream.objects.create(name="pgshop", schema=schema, source_kind="postgres", source_dsn_env="KW_DSN_SHOP",
                                   source_publication="shop", source_slot="kw_pgshop")
    graph = SchemaGraph.from_dict(schema.to_document())
    supervisor = Supervisor(SupervisorSettings(
        command=tuple(HEARTBEAT_COMMAND), preprocessor_command=(), capture_command=tuple(settings.CAPTURE_COMMAND),
        heartbeat_timeout=15.0, start_grace=30.0, stable_after=60.0, backoff=0.5, backoff_max=4.0, stop_timeout=10.0,
        log_dir=tmp_path / "log"))
    publish_plan(stream.pk)
    primary = supervisor.start(stream.evaluator.pk)
    reap_evaluators.append(primary.pid)
    supervisor.supervise()
    capture = Evaluator.objects.get(stream=stream, role="capture")
    assert capture.desired == "running" and capture.pid
    reap_evaluators.append(capture.pid)
    assert "KW_DSN_SHOP" in capture.command and tables not in " ".join(capture.command)  # the name, never the DSN
    wait_for(lambda: len(landing_ops(stream)) == 3, timeout=60)
    with psycopg.connect(tables, autocommit=True) as conn:
        conn.execute("INSERT INTO orders VALUES (2, 1, 1, 'rush', '{}'); UPDATE product SET price = 45")
    wait_for(lambda: len(landing_ops(stream)) == 6, timeout=30)
    assert replay(landing_ops(stream), graph) == table_rows(tables, graph)
    progress = wait_for(lambda: redis_client.hget(bus.Keys.evaluator_state(capture.pk), "capture"), timeout=10)
    assert orjson.loads(progress)["phase"] == "streaming"

    response = staff_client.post(f"/ingest/{stream.pk}/", data=b"{}\n", content_type="application/x-ndjson",
                                 HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}")
    assert response.status_code == 409 and "only writer" in response.json()["error"]

    def running_panel() -> str | None:
        panel = staff_client.get(reverse("dashboard:stream-source", args=[stream.pk])).content.decode()
        return panel if 'data-field="capture-status" title' in panel and ">running<" in panel else None

    page = wait_for(running_panel, timeout=20)
    assert "Ops captured" in page and "publication <b>shop</b>" in page and tables not in page

    supervisor.stop(primary.pk)
    supervisor.supervise()
    wait_for(lambda: Evaluator.objects.get(pk=capture.pk).lifecycle == "stopped", timeout=30)
    with psycopg.connect(tables, autocommit=True) as conn:
        conn.execute("INSERT INTO orders VALUES (3, 1, 1, 'while stopped', NULL)")
    watch_slots(redis_client)
    page = staff_client.get(reverse("dashboard:stream", args=[stream.pk])).content.decode()
    assert "The capture is stopped: its slot holds" in page

    state = Path(capture.capture_state_path())
    assert state.exists()
    reset = ResetStream()
    reset.reset(stream.evaluator)
    assert "dropped" in reset.slot_note and not state.exists()
    with psycopg.connect(tables) as conn:
        assert conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone()[0] == 0
