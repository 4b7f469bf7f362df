"""PostgreSQL crashed and restarted mid-stream, twice: history resumes, the admin works, nothing lost or duplicated.

The database of the web tier and the Celery worker is a PostgreSQL cluster
of the test's own (``initdb``, fsync on), loaded with the test database's
rows (the stream, its query, a staff user and their session). An evaluator
(the engine core, ``GroupEvaluator``, fed batch by batch as Spark feeds it)
applies the ops the client sends and publishes their changes to Redis, while
``persist_history`` is sent to a real Celery worker every half second, as
beat would. A third of the way in the cluster is stopped with ``pg_ctl stop
-m immediate`` (no checkpoint: recovery replays the WAL), two thirds in its
postmaster is SIGKILLed; while it is down a body sent to ingest must be
answered 503 with ``Retry-After`` (nothing stored) and a websocket handshake
closed with 4503 (try again later), and once it is started
again the admin (daphne on the same cluster) must answer a staff user's pages.
Afterwards the history rows must be the reference's changes (the reference
engine over the lines sent), seq by seq, each once.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

import psycopg
import pytest
from django.db import connection
from django.test import Client
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams import tasks
from kwmonitor.streams.models import Stream
from kwmonitor.streams.plans import publish_plan
from streaming import bus
from streaming.evaluator import GroupEvaluator
from streaming.ops import op_to_dict
from streaming.parsed import parse_stored_line
from streaming.schema import Schema
from streaming.sources import stamp
from streaming.workloads import ecommerce
from tests.browser.server import asgi_server
from tests.faults.reference import by_seq, change_of, reference_changes
from tests.faults.services import OwnPostgres
from tests.kwmonitor.streams.test_celery_worker import wait_for
from tests.workers import celery_worker

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEYWORDS, TMAX = "gift texas", 4
OPS, BATCH, PAUSE = 3000, 30, 0.03  # ~1,000 ops/s in batches of 30
DOWN_FOR = 0.5


def copy_database(source_url: str, own: OwnPostgres, dbname: str) -> None:
    """Create ``dbname`` on the own cluster holding what the test database holds now (schema and rows)."""
    with psycopg.connect(own.url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    dump = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", source_url], capture_output=True, check=True)
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", own.url(dbname)], input=dump.stdout, capture_output=True,
                   check=True)


def admin_answers(base: str, session: str, query_id: int) -> bool:
    """Whether the admin shows the query's history to the staff user (a page that reads the database)."""
    request = urllib.request.Request(f"{base}/admin/streams/resultevent/?query__id__exact={query_id}",
                                     headers={"Cookie": f"sessionid={session}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status == 200 and b"result event" in response.read().lower()
    except OSError:
        return False


def feed_answer(base: str, session: str, query_id: int) -> str:
    """How the query's websocket feed answers a handshake: "HTTP <status>", "closed <code>" or "open"."""
    url = base.replace("http://", "ws://") + f"/ws/queries/{query_id}/"
    try:
        with ws_connect(url, additional_headers={"Cookie": f"sessionid={session}"}, origin=base, open_timeout=10) as ws:
            ws.recv(timeout=10)
            return "open"
    except InvalidStatus as exc:
        return f"HTTP {exc.response.status_code}"
    except ConnectionClosed as exc:
        return f"closed {exc.rcvd.code if exc.rcvd else None}"


def ingest_status(base: str, stream: Stream, line: str) -> tuple[int, str | None]:
    """The status (and Retry-After) of one body of ``line`` POSTed to the stream's ingest."""
    request = urllib.request.Request(f"{base}/ingest/{stream.pk}/", data=(line + "\n").encode(), method="POST", headers={
        "Authorization": f"Bearer {stream.ingest_token}", "Content-Type": "application/x-ndjson"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Retry-After")


def test_history_survives_postgres_crashes(ecommerce_schema, user, staff_user, redis_client, redis_url, tmp_path,
                                           request):
    db = connection.settings_dict
    if "postgresql" not in db["ENGINE"]:
        pytest.skip("needs the PostgreSQL test database")
    stream = Stream.objects.create(name="shop", schema=ecommerce_schema)
    query = KeywordQuery.objects.create(owner=user, name="q", schema=ecommerce_schema, stream=stream,
                                        keywords=KEYWORDS, tmax=TMAX)
    browser = Client()
    browser.force_login(staff_user)
    session = browser.cookies["sessionid"].value
    publish_plan(stream.pk)
    evaluator = GroupEvaluator(bus.connect(redis_url), stream.evaluator.pk)
    evaluator.start()
    schema = Schema.from_dict(ecommerce.SCHEMA_DOC)
    lines = [json.dumps(op_to_dict(op)) for op in ecommerce.build(OPS, seed=5).ops()]

    own = OwnPostgres()
    own.start()
    request.addfinalizer(own.close)
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    copy_database(f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}", own, "kw")
    env = dict(os.environ, DATABASE_URL=own.url("kw"), REDIS_URL=redis_url)
    crashes = {OPS // 3 // BATCH * BATCH: threading.Event(), 2 * OPS // 3 // BATCH * BATCH: threading.Event()}
    stop = threading.Event()

    def produce() -> None:
        for start in range(0, OPS, BATCH):
            if start in crashes:
                crashes[start].set()
            rows = [parse_stored_line(stamp(seq, lines[seq]), schema, evaluator.session.keywords)
                    for seq in range(start, min(start + BATCH, OPS))]
            evaluator.apply_batch(start // BATCH, rows)
            time.sleep(PAUSE)

    def beat(queue: str) -> None:
        while not stop.wait(0.5):
            tasks.persist_history.apply_async(queue=queue)  # what beat sends, every 5 s in production

    log_path = tmp_path / "worker.log"
    outages, admin_after, ingest_down, feed_down = [], [], [], []
    web_env = {"DATABASE_URL": own.url("kw"), "LANDING_DIR": str(tmp_path / "landing")}
    with celery_worker(env, log_path) as queue, asgi_server(redis_url, extra_env=web_env) as base:
        try:
            assert admin_answers(base, session, query.pk)
            producer = threading.Thread(target=produce, daemon=True)
            beating = threading.Thread(target=beat, args=(queue,), daemon=True)
            producer.start()
            beating.start()
            for at, how in zip(sorted(crashes), ("immediate", "sigkill")):
                assert crashes[at].wait(120)
                outages.append(own.crash(how, DOWN_FOR, lambda: (ingest_down.append(ingest_status(base, stream, lines[0])),
                                                                  feed_down.append(feed_answer(base, session, query.pk)))))
                restarted = time.monotonic()
                wait_for(lambda: admin_answers(base, session, query.pk), 30, "the admin after the restart")
                admin_after.append(time.monotonic() - restarted)
            producer.join(timeout=120)
            assert not producer.is_alive()
            published = redis_client.xlen(bus.Keys.changes(query.pk))

            def persisted() -> int:
                with psycopg.connect(own.url("kw")) as conn:
                    return conn.execute("SELECT count(*) FROM streams_resultevent WHERE query_id = %s",
                                        [query.pk]).fetchone()[0]

            restored_at = time.monotonic()
            wait_for(lambda: persisted() >= published, 60, "the history to catch up")
            caught_up_after = time.monotonic() - restored_at
        finally:
            stop.set()
        assert admin_answers(base, session, query.pk)
        assert ingest_down == [(503, "2")] * 2  # nothing stored while the database was down: send it again
        assert ingest_status(base, stream, lines[0])[0] == 200
        assert feed_down == ["closed 4503"] * 2  # try again later, not HTTP 500
        assert feed_answer(base, session, query.pk) == "open"
    with psycopg.connect(own.url("kw")) as conn:
        rows = conn.execute("SELECT seq, type, result FROM streams_resultevent WHERE query_id = %s ORDER BY id",
                            [query.pk]).fetchall()

    reference = reference_changes(schema, KEYWORDS, TMAX, lines)
    history = [change_of(seq, kind, result) for seq, kind, result in rows]
    failed_rounds = log_path.read_text(errors="replace").count(" raised unexpected")
    print(f"PostgreSQL crashed twice (immediate shutdown, SIGKILL of the postmaster), down {outages[0]:.1f} s and "
          f"{outages[1]:.1f} s; {failed_rounds} persist rounds failed meanwhile; the admin answered "
          f"{admin_after[0]:.1f} s and {admin_after[1]:.1f} s after each restart; {len(reference)} reference changes, "
          f"history caught up {caught_up_after:.1f} s after the last op with {len(history)} rows")
    assert failed_rounds > 0  # the crashes were real: rounds failed while the server was down
    assert Counter(kind for _, kind, _ in history) == Counter(kind for _, kind, _ in reference)
    assert by_seq(history) == by_seq(reference)  # every change once, in its op, in seq order
