"""A stream on two evaluators through Spark, a sharing class moved between them mid-stream: every query's
change stream still equals ``run-plan`` seq by seq (HTTP ingest -> landing directory read by both -> Redis)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from streaming import bus, sources
from streaming.bench.shop import shop_ops
from streaming.evaluator import GroupEvaluator
from streaming.placement import Placement

from .changes import published, run_plan_events, run_plan_query
from .on_cluster import assert_ran_on_cluster

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow]

QUERIES = [("dress texas", 4, None), ("texas dress", 3, 20.0), ("hat", 2, 20.0), ("dress", 2, None), ("gift", 3, 30.0)]


def test_a_class_moved_between_two_evaluators_mid_stream_keeps_every_change_stream(
        spark_on_master, spark_master, client, db, ecommerce_schema, user, redis_client, redis_url, settings, tmp_path):
    from kwmonitor.queries.models import KeywordQuery
    from kwmonitor.streams.models import Evaluator, Stream
    from kwmonitor.streams.plans import advance_placement, build_plan, publish_plan
    from kwmonitor.streams.supervisor import Supervisor
    from streaming.spark.job import start_query

    settings.LANDING_DIR = tmp_path / "landing"
    stream = Stream.objects.create(name="moving", schema=ecommerce_schema)
    queries = [KeywordQuery.objects.create(owner=user, name=words, schema=ecommerce_schema, stream=stream,
                                           keywords=words, tmax=tmax, window_seconds=window)
               for words, tmax, window in QUERIES]
    publish_plan(stream.pk)
    primary = stream.evaluator
    ops = list(shop_ops(1500, seed=5, event_rate=20))
    evaluators = {primary.pk: GroupEvaluator(redis_client, primary.pk)}
    evaluators[primary.pk].start()

    def ingest(part: list[str]) -> None:
        response = client.post(reverse("ingest:ingest", args=[stream.pk]), data="".join(f"{line}\n" for line in part),
                               content_type="application/x-ndjson", HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}")
        assert response.json()["accepted"] == len(part)

    def run(evaluator_id: int, max_rows: int) -> None:
        query = start_query(spark_on_master, evaluators[evaluator_id], redis_url, tmp_path / f"ck-{evaluator_id}",
                            available_now=True, max_rows=max_rows)
        query.awaitTermination()
        assert query.exception() is None

    def measured() -> None:  # every query measured at the same cost, so the rule's moves are these
        for e in evaluators:
            report = {"type": "sharing.report", "stream": stream.pk, "evaluator": e, "sharing": "widen", "ts": 1.0,
                      "totals": {"ops": 100}, "classes": [{"members": [q.pk], "busy_seconds": 0.1} for q in queries]}
            redis_client.hset(bus.Keys.sharing_report(stream.pk), str(e), json.dumps(report))

    ingest(ops[:300])
    run(primary.pk, 250)
    # scale out: a second evaluator; the rule starts moving the smallest unit ("hat") to it
    stream.evaluator_processes = 2
    stream.save()
    measured()
    publish_plan(stream.pk)
    secondary = Evaluator.objects.get(stream=stream, role="secondary")
    Supervisor().seed(secondary)  # what the supervisor does at its first start: the primary's store and seq
    evaluators[secondary.pk] = GroupEvaluator(redis_client, secondary.pk)
    evaluators[secondary.pk].start()
    assert advance_placement(stream.pk).startswith("moved queries")  # it joined at 299, where the primary is
    ingest(ops[300:700])
    run(secondary.pk, 400)
    measured()
    assert advance_placement(stream.pk).startswith("moving queries")  # still 4 against 1: "dress" moves too
    evaluators[secondary.pk].refresh_plan()  # between batches, as its heartbeat thread does: it joins at 699
    assert advance_placement(stream.pk) == ""  # the source has applied only up to 299
    ingest(ops[700:1100])
    run(primary.pk, 300)  # the source publishes the class's changes of 300..1099
    assert advance_placement(stream.pk).startswith("moved queries")
    run(secondary.pk, 150)  # the target publishes them from 700 on: the ones already there add nothing
    ingest(ops[1100:])
    run(primary.pk, 200)
    run(secondary.pk, 350)
    assert all(e.session.applied_seq == 1499 for e in evaluators.values())
    stream.refresh_from_db()
    move = Placement.from_json(stream.placement).move
    assert move is not None and move.done and move.target == secondary.pk
    assert {q.name for q in queries if Placement.from_json(stream.placement).assignment[q.pk] == secondary.pk} == {
        "hat", "dress"}
    assert all(q in evaluators[secondary.pk].session.queries and q not in evaluators[primary.pk].session.queries for q in move.queries)

    lines = sources.read_landing(sources.landing_directory(settings.LANDING_DIR, stream.pk))
    accepted = [json.dumps(op) for _, op in sorted(sources.split_seq(line) for line in lines)]
    assert len(accepted) == 1500
    plan = build_plan(primary, 0).model_dump(mode="json", by_alias=True)
    out = run_plan_events({"schema": plan["stream"]["schema"], "queries": plan["queries"]}, accepted, tmp_path)
    for q in queries:
        got, _ = published(redis_client, q.pk)
        assert got == run_plan_query(out, q.pk), q.name
    moved = [q for q in queries if q.pk in move.queries]
    assert any(published(redis_client, q.pk)[0] for q in moved), "the moved class should have changes"
    if spark_master.cluster:
        assert_ran_on_cluster(spark_master.cluster, spark_on_master.sparkContext.applicationId)
