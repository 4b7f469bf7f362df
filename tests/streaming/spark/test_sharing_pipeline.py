"""A plan of sharing queries and aggregate subscriptions through Spark equals ``run-plan``.

HTTP ingest -> landing directory -> the Spark streaming query -> the shared
evaluator -> Redis: every query's change stream equals its ``run-plan`` file
seq by seq, and every subscription's published values equal its file.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from django.urls import reverse

from streaming import bus, sources
from streaming.bench.shop import shop_ops
from streaming.events import AggregateValue
from streaming.evaluator import GroupEvaluator

from .changes import published, run_plan_events, run_plan_query

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow]

PRICEY = {"relation": "Product", "attribute": "price", "op": ">=", "value": 40}
CHEAP = {"relation": "Product", "attribute": "price", "op": "<", "value": 30}
# (keywords, tmax, window, predicates): the first two share a class, widened to Tmax 4 and no window
QUERIES = [("dress texas", 4, None, []), ("texas dress", 3, 20.0, [PRICEY]), ("hat", 2, 20.0, []),
           ("", 1, 30.0, [CHEAP])]


def test_a_shared_plan_through_spark_equals_run_plan(spark, client, admin_client, db, ecommerce_schema, user,
                                                      redis_client, redis_url, settings, tmp_path):
    from kwmonitor.queries.models import AggregateSubscription, KeywordQuery, Predicate
    from kwmonitor.streams.models import Stream
    from kwmonitor.streams.plans import build_plan, publish_plan
    from streaming.spark.job import start_query

    settings.LANDING_DIR = tmp_path / "landing"
    stream = Stream.objects.create(name="shared", schema=ecommerce_schema)
    queries = []
    for keywords, tmax, window, preds in QUERIES:
        query = KeywordQuery.objects.create(owner=user, name=keywords or "cheap", schema=ecommerce_schema,
                                            stream=stream, keywords=keywords, tmax=tmax, window_seconds=window)
        for p in preds:
            Predicate.objects.create(query=query, **p)
        queries.append(query)
    for name, fields in (("products", {"source_relation": "Product", "aggregate": "count", "window": 10, "step": 5}),
                         ("avg price", {"source_relation": "Product", "aggregate": "avg", "attribute": "price",
                                        "window": 20, "step": 10, "having": ">= 30"}),
                         ("born", {"source_query": queries[0], "aggregate": "count", "window": 30, "step": 10})):
        AggregateSubscription.objects.create(owner=user, name=name, stream=stream, **fields)
    publish_plan(stream.pk)
    ops = list(shop_ops(1200, seed=3, event_rate=20))
    for start in range(0, 1200, 300):
        response = client.post(reverse("ingest:ingest", args=[stream.pk]),
                               data="".join(line + "\n" for line in ops[start:start + 300]),
                               content_type="application/x-ndjson", HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}")
        assert response.json()["accepted"] == 300

    evaluator = GroupEvaluator(redis_client, stream.evaluator.pk)
    evaluator.start()
    query = start_query(spark, evaluator, redis_url, tmp_path / "ck", available_now=True, max_rows=400)
    query.awaitTermination()
    assert query.exception() is None
    assert evaluator.session.applied_seq == 1199

    lines = sources.read_landing(sources.landing_directory(settings.LANDING_DIR, stream.pk))
    accepted = [json.dumps(op) for _, op in sorted(sources.split_seq(line) for line in lines)]
    plan = build_plan(stream.evaluator, 0).model_dump(mode="json", by_alias=True)
    out = run_plan_events({"schema": plan["stream"]["schema"], "queries": plan["queries"],
                           "aggregates": plan["aggregates"]}, accepted, tmp_path)
    for q in queries:
        got, live = published(redis_client, q.pk)
        expected = run_plan_query(out, q.pk)
        assert got == expected, q.name
        assert expected, f"{q.name}: the workload should give results"
    values = defaultdict(list)
    for _, event in bus.read_stream_events(redis_client, stream.pk, count=20_000):
        if isinstance(event, AggregateValue):
            values[event.aggregate].append({"id": event.aggregate, "window_end": event.window_end, "value": event.value})
    for subscription in AggregateSubscription.objects.filter(stream=stream):
        file = (out / f"aggregate-{subscription.pk}.ndjson").read_text().splitlines()
        assert values[subscription.pk] == [json.loads(line) for line in file] != [], subscription.name
    report = bus.read_sharing_report(redis_client, stream.pk)
    assert report is not None and report.totals["classes"] == 3 and report.totals["queries_sharing"] == 1
    page = admin_client.get(reverse("dashboard:sharing"))  # the Sharing page renders the evaluator's own report
    assert page.status_code == 200
    text = page.content.decode()
    assert all(q.name in text for q in queries) and "results of dress texas" in text
