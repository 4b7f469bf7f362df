"""A pipelined evaluator applies a batch while Spark reads the next; a batch Spark committed but the
evaluator never applied (it died) is kept by the source and applied at the next start."""

from __future__ import annotations

import json
import os

import pytest
from django.urls import reverse
from pyspark.errors import StreamingQueryException

from streaming import bus, sources
from streaming.bench.shop import shop_ops
from streaming.evaluator import GroupEvaluator
from streaming.spark.landing_source import LandingOpsReader

from .changes import cli_events, published

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow]


class Died(RuntimeError):
    """The evaluator process died while applying a batch."""


def dress_stream(name, schema, user):
    """A stream with one query {dress, texas} (Tmax 4) and its plan published: the stream and the query."""
    from kwmonitor.queries.models import KeywordQuery
    from kwmonitor.streams.models import Stream
    from kwmonitor.streams.plans import publish_plan

    stream = Stream.objects.create(name=name, schema=schema)
    query = KeywordQuery.objects.create(owner=user, name="dress", schema=schema, stream=stream,
                                        keywords="dress texas", tmax=4)
    publish_plan(stream.pk)
    return stream, query


def ingest(client, stream, lines):
    response = client.post(reverse("ingest:ingest", args=[stream.pk]), data="".join(l + "\n" for l in lines),
                           content_type="application/x-ndjson", HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}")
    assert response.status_code == 200


def test_a_batch_committed_before_it_was_applied_is_recovered(spark, client, db, ecommerce_schema, user,
                                                              redis_client, redis_url, settings, tmp_path):
    from streaming.spark.job import BatchHandler, recover_committed, start_query

    settings.LANDING_DIR = tmp_path / "landing"
    stream, query = dress_stream("pipelined", ecommerce_schema, user)
    ops = list(shop_ops(1200, seed=5, event_rate=20))
    for start in range(0, 1200, 300):
        ingest(client, stream, ops[start:start + 300])
    directory = sources.landing_directory(settings.LANDING_DIR, stream.pk)
    checkpoint = tmp_path / "ck"

    first = GroupEvaluator(redis_client, stream.evaluator.pk)
    first.start()
    applied = first.apply_batch

    def apply_or_die(batch_id, *args, **kwargs):
        if batch_id == 1:
            raise Died("killed while applying batch 1")
        return applied(batch_id, *args, **kwargs)

    first.apply_batch = apply_or_die
    handler = BatchHandler(first, pipelined=True)
    running = start_query(spark, first, redis_url, checkpoint, max_rows=300, trigger_seconds=0.1, handler=handler)
    with pytest.raises(StreamingQueryException, match="killed while applying batch 1"):
        running.awaitTermination(120)
    running.stop()
    handler.close()  # the failed apply was reported through the query already
    # Spark committed batch 1 (its handler returned before the apply failed); the source kept its file
    assert first.session.applied_seq == 299
    assert sorted(os.listdir(directory))[:1] == [f"{300:020d}.ndjson"]

    second = GroupEvaluator(redis_client, stream.evaluator.pk)
    second.start()
    assert recover_committed(second, checkpoint, redis_url) == 300
    assert second.session.applied_seq == 599
    rest = start_query(spark, second, redis_url, checkpoint, available_now=True, max_rows=300)
    rest.awaitTermination()
    assert rest.exception() is None and second.session.applied_seq == 1199

    accepted = [json.dumps(op) for _, op in sorted(sources.split_seq(l) for l in sources.read_landing(directory))]
    expected, expected_live = cli_events(stream.schema.to_document(), accepted, "dress texas", 4, None, tmp_path)
    got, live = published(redis_client, query.pk)
    assert got == expected and live == expected_live and expected_live


def test_the_landing_source_archives_only_what_the_evaluator_applied(redis_client, redis_url, tmp_path):
    directory = tmp_path / "landing"
    directory.mkdir()
    for first, count in ((0, 3), (3, 2), (5, 4)):
        (directory / sources.landing_file_name(first)).write_text(
            "".join(sources.stamp(first + i, '{"op":"delete","relation":"Order","key":1,"ts":0}') + "\n"
                    for i in range(count)))
    key = bus.Keys.evaluator_state(42)
    reader = LandingOpsReader(str(directory), str(tmp_path / "archive"), None, 1, (redis_url, [key], None))
    redis_client.hset(key, "seq", 3)
    reader.commit({"file": sources.landing_file_name(5)})
    assert sorted(os.listdir(tmp_path / "archive")) == [sources.landing_file_name(0)]  # file 3 holds seq 4
    redis_client.hset(key, "seq", 8)
    reader.commit({"file": sources.landing_file_name(3)})  # never past the committed offset
    assert sorted(os.listdir(directory)) == [sources.landing_file_name(5)]
    reader.commit({"file": sources.landing_file_name(5)})
    assert os.listdir(directory) == []


def test_a_landing_file_read_by_several_consumers_moves_once_each_applied_it(redis_client, redis_url, tmp_path):
    directory = tmp_path / "landing"
    directory.mkdir()
    for first, count in ((0, 3), (3, 2)):
        (directory / sources.landing_file_name(first)).write_text(
            "".join(sources.stamp(first + i, '{"op":"delete","relation":"Order","key":1,"ts":0}') + "\n"
                    for i in range(count)))
    keys = [bus.Keys.evaluator_state(e) for e in (50, 51)]
    reader = LandingOpsReader(str(directory), str(tmp_path / "archive"), None, 1, (redis_url, keys, None))
    redis_client.hset(keys[0], "seq", 4)
    reader.commit({"file": sources.landing_file_name(3)})
    assert len(os.listdir(directory)) == 2  # the other consumer has applied nothing yet
    redis_client.hset(keys[1], "seq", 2)
    reader.commit({"file": sources.landing_file_name(3)})
    assert os.listdir(directory) == [sources.landing_file_name(3)]
    redis_client.hset(keys[1], "seq", 4)
    reader.commit({"file": sources.landing_file_name(3)})
    assert os.listdir(directory) == []


def test_the_redis_source_trims_only_what_the_evaluator_applied(redis_client, redis_url):
    from streaming.spark.redis_source import RedisOpsReader

    ids = [redis_client.xadd("ops", {sources.LINE_FIELD: sources.stamp(i, '{"op":"x"}')}) for i in range(6)]
    key = bus.Keys.evaluator_state(43)
    reader = RedisOpsReader(redis_url, "ops", None, key)
    redis_client.hset(key, "seq", 2)
    reader.commit({"id": ids[4]})
    assert [entry_id for entry_id, _ in redis_client.xrange("ops")] == ids[3:]
    redis_client.hset(key, "seq", 5)
    reader.commit({"id": ids[5]})
    assert [entry_id for entry_id, _ in redis_client.xrange("ops")] == ids[5:]


def test_an_evaluator_started_after_redis_lost_its_state_rebuilds_from_the_landing_files(
        spark, client, db, ecommerce_schema, user, redis_client, redis_url, settings, tmp_path):
    from kwmonitor.streams.plans import publish_plan
    from streaming.spark.job import recover_committed, start_query

    settings.LANDING_DIR = tmp_path / "landing"
    stream, query = dress_stream("lost", ecommerce_schema, user)
    ops = list(shop_ops(600, seed=7, event_rate=20))
    for start in range(0, 450, 150):
        ingest(client, stream, ops[start:start + 150])
    checkpoint = tmp_path / "ck"
    first = GroupEvaluator(redis_client, stream.evaluator.pk)
    first.start()
    running = start_query(spark, first, redis_url, checkpoint, available_now=True)
    running.awaitTermination()
    assert running.exception() is None and first.session.applied_seq == 449

    redis_client.flushdb()  # the evaluator died and Redis came back empty
    publish_plan(stream.pk)  # what the supervisor does when it finds no plan
    ingest(client, stream, ops[450:])  # seqs go on after the landing files
    second = GroupEvaluator(redis_client, stream.evaluator.pk)
    second.start()
    assert second.session.applied_seq == -1
    assert recover_committed(second, checkpoint, redis_url) == 450  # every op Spark had committed, again
    rest = start_query(spark, second, redis_url, checkpoint, available_now=True)
    rest.awaitTermination()
    assert rest.exception() is None and second.session.applied_seq == 599

    directory = sources.landing_directory(settings.LANDING_DIR, stream.pk)
    stored = [sources.split_seq(line) for line in sources.read_landing(directory)]
    assert [seq for seq, _ in stored] == list(range(600))
    expected, expected_live = cli_events(stream.schema.to_document(), ops, "dress texas", 4, None, tmp_path)
    got, live = published(redis_client, query.pk)
    assert got == expected and live == expected_live and expected_live  # the change stream again, whole
