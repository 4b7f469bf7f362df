"""The whole path: HTTP ingest -> source -> Spark -> evaluator -> Redis, against the engine CLI.

The integration test runs the streaming query in this process (the shared
Spark session, ``availableNow``); the fault test runs the real evaluator
process under the platform's supervisor, SIGKILLs it mid-stream and lets the
supervisor restart it from its checkpoint. Both run on local[2] and on the
standalone test cluster (two workers), where they also check, from the
cluster's own state, that the work ran on its executors.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from django.urls import reverse

from streaming import bus, sources
from streaming.bench.shop import shop_ops
from streaming.events import DeadLetter
from streaming.evaluator import GroupEvaluator

from .changes import cli_events, published
from .on_cluster import assert_ran_on_cluster

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow]

QUERIES = [("dress texas", 4, None), ("hat", 2, 20.0)]


@pytest.fixture
def shop_stream(db, ecommerce_schema, user, settings, tmp_path):
    from kwmonitor.queries.models import KeywordQuery
    from kwmonitor.streams.models import Stream

    settings.LANDING_DIR = tmp_path / "landing"
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    settings.EVALUATOR_LOG_DIR = tmp_path / "log"

    def make(source_kind):
        stream = Stream.objects.create(name=f"shop-{source_kind}", schema=ecommerce_schema, source_kind=source_kind)
        queries = [
            KeywordQuery.objects.create(owner=user, name=kw, schema=ecommerce_schema, stream=stream,
                                        keywords=kw, tmax=tmax, window_seconds=window)
            for kw, tmax, window in QUERIES
        ]
        from kwmonitor.streams.plans import publish_plan

        publish_plan(stream.pk)
        return stream, queries

    return make


def post(client, stream, lines):
    return client.post(reverse("ingest:ingest", args=[stream.pk]), data="".join(l + "\n" for l in lines),
                       content_type="application/x-ndjson", HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}")


def stored_ops(stream, redis_client, settings) -> list[str]:
    """The accepted ops in seq order, as the engine CLI should read them (seq = line index)."""
    lines = sources.read_landing(sources.landing_directory(settings.LANDING_DIR, stream.pk))
    pairs = sorted(sources.split_seq(line) for line in lines)
    assert [seq for seq, _ in pairs] == list(range(len(pairs)))
    return [json.dumps(op) for _, op in pairs]


def assert_same_as_cli(redis_client, stream, queries, ops, workdir, per_seq=True):
    for (kw, tmax, window), query in zip(QUERIES, queries):
        expected, expected_live = cli_events(stream.schema.to_document(), ops, kw, tmax, window, workdir)
        got, live = published(redis_client, query.pk)
        if per_seq:
            assert got == expected, f"query {kw!r}: the change stream differs from the CLI's events"
        assert live == expected_live, f"query {kw!r}: final live set differs from the CLI's"
        assert live == {r.key for r in bus.read_snapshot(redis_client, query.pk)[1]}
        assert expected_live, "the workload should leave live results"


def test_http_ingest_through_spark_equals_the_engine_cli(spark_on_master, spark_master, client, shop_stream,
                                                         redis_client, redis_url, settings, tmp_path):
    from streaming.spark.job import start_query

    stream, queries = shop_stream("landing")
    ops = list(shop_ops(1200, seed=3, event_rate=20))
    bad = ['{"op": "insert", "relation": "Customer"', '{"op":"insert","relation":"Shipment","tuple":{"id":1},"ts":0}',
           '{"op":"insert","relation":"Product","tuple":{"pid":"x"},"ts":0}']
    response = post(client, stream, ops[:300] + bad + ops[300:700])
    assert response.status_code == 200
    body = response.json()
    assert (body["accepted"], body["rejected"]) == (700, 3)
    assert [e["line"] for e in body["errors"]] == [301, 302, 303]
    assert body["errors"][1]["reason"] == "unknown relation 'Shipment'"
    settings.INGEST_MAX_BYTES = 1000
    assert post(client, stream, ops[700:]).status_code == 413  # refused whole, nothing stored
    settings.INGEST_MAX_BYTES = 8 * 1024 * 1024

    evaluator = GroupEvaluator(redis_client, stream.evaluator.pk)
    evaluator.start()
    checkpoint = tmp_path / "ck"

    def run_available():
        query = start_query(spark_on_master, evaluator, redis_url, checkpoint, available_now=True)
        query.awaitTermination()
        assert query.exception() is None

    run_available()
    for start in range(700, 1200, 250):  # more requests, then the query resumes from its checkpoint
        assert post(client, stream, ops[start:start + 250]).json()["accepted"] == 250
    run_available()

    accepted = stored_ops(stream, redis_client, settings)
    assert len(accepted) == 1200
    # the first run's file left the directory the source lists once its batch was committed (Spark
    # tells the source when it plans the next batch, so the last batch's files stay until then)
    directory = sources.landing_directory(settings.LANDING_DIR, stream.pk)
    first = f"{0:020d}.ndjson"
    assert [p.name for p in sources.landing_archive(directory).rglob("*.ndjson")] == [first]
    assert sorted(p.name for p in directory.glob("*.ndjson")) == [f"{700:020d}.ndjson", f"{950:020d}.ndjson"]
    assert_same_as_cli(redis_client, stream, queries, accepted, tmp_path)
    dead = [e for _, e in bus.read_stream_events(redis_client, stream.pk, count=10_000) if isinstance(e, DeadLetter)]
    stream_level = sorted(d.seq for d in dead if d.seq is not None)
    assert stream_level == [i for i in range(99, 1200, 100)]  # one stream-level reject per 100 ops
    assert all(d.reason.endswith(("the key is already live", "no live tuple with this key"))
               for d in dead if d.seq is not None)
    assert spark_on_master.sparkContext.master == spark_master.url
    if spark_master.cluster:
        assert_ran_on_cluster(spark_master.cluster, spark_on_master.sparkContext.applicationId)


def _applied_seq(redis_client, evaluator_id) -> int:
    return int(redis_client.hget(bus.Keys.evaluator_state(evaluator_id), "seq") or -1)


def _running(redis_client, evaluator_id) -> bool:
    heartbeat = bus.read_heartbeat(redis_client, evaluator_id)
    return heartbeat is not None and heartbeat.status == "running"


@pytest.mark.django_db(transaction=True)
def test_sigkill_mid_stream_then_supervisor_restart_loses_and_duplicates_nothing(
        spark_master, spark_sessions, client, shop_stream, redis_client, settings, tmp_path):
    from kwmonitor.ingest.service import Ingestor
    from kwmonitor.streams.models import Evaluator
    from kwmonitor.streams.supervisor import Supervisor

    if spark_master.cluster:  # the evaluators need its cores, which the test process's session holds
        spark_sessions.close()
    settings.SPARK_MASTER = spark_master.url
    started_ms = time.time() * 1000
    stream, queries = shop_stream("redis")
    evaluator_id = stream.evaluator.pk
    # Small batches, so the kill lands mid-stream however slowly the first batch starts.
    settings.EVALUATOR_COMMAND = [*settings.EVALUATOR_COMMAND, "--max-rows-per-batch", "300"]
    supervisor = Supervisor()
    supervisor.start(evaluator_id)
    ops = list(shop_ops(3000, seed=11, event_rate=50))
    ingestor = Ingestor(stream)
    seqs: list[int] = []

    def feed():  # ~400 ops/s in requests of 200, like a client of the ingest endpoint
        for start in range(0, len(ops), 200):
            seqs.extend(ingestor.ingest(ops[start:start + 200]).seqs)
            time.sleep(0.5)

    def wait_for(condition, timeout, what):
        deadline = time.monotonic() + timeout
        while not condition():
            supervisor.supervise()
            if time.monotonic() > deadline:
                log = (settings.EVALUATOR_LOG_DIR / f"evaluator-{evaluator_id}.log")
                tail = log.read_text()[-3000:] if log.exists() else ""
                pytest.fail(f"timed out waiting for {what}\n{tail}")
            time.sleep(0.5)

    feeder = threading.Thread(target=feed)
    try:
        wait_for(lambda: _running(redis_client, evaluator_id), 240, "the evaluator to run")
        feeder.start()
        wait_for(lambda: _applied_seq(redis_client, evaluator_id) >= 600, 240, "the first batches")
        first_pid = Evaluator.objects.get(pk=evaluator_id).pid
        os.kill(first_pid, signal.SIGKILL)
        killed_at = _applied_seq(redis_client, evaluator_id)
        wait_for(lambda: Evaluator.objects.get(pk=evaluator_id).pid not in (None, first_pid), 60, "the restart")
        feeder.join()
        wait_for(lambda: _applied_seq(redis_client, evaluator_id) == len(ops) - 1, 240, "the end of the stream")
    finally:
        if feeder.is_alive():
            feeder.join()
        supervisor.stop(evaluator_id)
    row = Evaluator.objects.get(pk=evaluator_id)
    assert row.restarts >= 1 and row.lifecycle == "stopped"
    assert killed_at < len(ops) - 1, "the kill should land mid-stream"
    assert seqs == list(range(len(ops)))
    # Results published before the kill and replays after it: the bus refuses duplicates, so the
    # change stream stays a valid history whose final live set is the CLI's.
    assert_same_as_cli(redis_client, stream, queries, ops, tmp_path, per_seq=False)
    if spark_master.cluster:  # the killed evaluator and its restart: two applications on the cluster
        apps = [app for app in spark_master.cluster.applications(f"kwmonitor-evaluator-{evaluator_id}")
                if app["starttime"] >= started_ms]
        assert len(apps) == 1 + row.restarts
        for app in apps:
            assert_ran_on_cluster(spark_master.cluster, app["id"])
