"""Aggregate subscriptions and narrowing reach the evaluator's plan; the evaluator's values reach history."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from kwmonitor.queries.models import AggregateSubscription, KeywordQuery
from kwmonitor.queries.sharing import sharing_note
from kwmonitor.streams.history import HistoryPersister
from kwmonitor.streams.models import AggregateValueRecord, Evaluator
from streaming import bus
from streaming.events import AggregateValue, SharingReport
from streaming.sharing.properties import EvaluatorPlan

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def plan_of(redis_client, stream):
    """The plan the stream's evaluator reads, as stored."""
    return bus.read_plan(redis_client, Evaluator.objects.get(stream=stream).pk).model_dump(mode="json", by_alias=True)


def subscription(stream, user, **fields):
    defaults = {"owner": user, "name": "avg price", "stream": stream, "source_relation": "Product",
                "aggregate": "avg", "attribute": "price", "window": 600, "step": 60}
    return AggregateSubscription(**{**defaults, **fields})


def test_aggregates_are_in_the_plan_and_the_plan_is_the_typed_model(shop, redis_client, user):
    query = KeywordQuery.objects.get(name="dress in texas")
    avg = subscription(shop, user, having=">= 100", predicates=[
        {"relation": "Product", "attribute": "price", "op": ">=", "value": 40}])
    avg.full_clean()
    avg.save()
    born = subscription(shop, user, name="results born", source_relation="", source_query=query, aggregate="count",
                        attribute="", window=600, step=60)
    born.full_clean()
    born.save()
    plan = plan_of(redis_client, shop)
    EvaluatorPlan.model_validate(plan)
    assert plan["aggregates"] == [
        {"id": avg.pk, "source": {"relation": "Product"}, "aggregate": "avg", "attribute": "price", "window": 600,
         "step": 60, "window_kind": "time", "having": ">= 100",
         "predicates": [{"relation": "Product", "attribute": "price", "op": ">=", "value": 40}]},
        {"id": born.pk, "source": {"query": query.pk}, "aggregate": "count", "attribute": None, "window": 600,
         "step": 60, "window_kind": "time", "having": None, "predicates": []},
    ]
    query.enabled = False
    query.save()  # a disabled source query takes its subscriptions out of the plan
    assert [a["id"] for a in plan_of(redis_client, shop)["aggregates"]] == [avg.pk]


@pytest.mark.parametrize("fields, message", [
    ({"source_relation": "Shipment"}, "unknown relation"),
    ({"attribute": "title"}, "needs a number"),
    ({"attribute": "weight"}, "unknown attribute"),
    ({"having": "about 5"}, "having"),
    ({"source_relation": ""}, "either a source query or a source relation"),
    ({"predicates": [{"relation": "Customer", "attribute": "state", "op": "=", "value": "Ohio"}]}, "pre-selection"),
])
def test_a_bad_subscription_is_refused_with_the_reason(shop, user, fields, message):
    with pytest.raises(ValidationError, match=message):
        subscription(shop, user, **fields).full_clean()


def test_narrow_stream_bumps_the_plans_counter(shop, redis_client):
    before = plan_of(redis_client, shop)
    call_command("narrow_stream", "shop")
    after = plan_of(redis_client, shop)
    assert after["narrow"] == before["narrow"] + 1 and after["version"] > before["version"]


def test_aggregate_values_are_persisted_once(shop, redis_client, user):
    avg = subscription(shop, user)
    avg.save()
    for end, value in ((60.0, 41.5), (120.0, None)):
        bus.publish_stream_event(redis_client, shop.pk, AggregateValue(
            stream=shop.pk, aggregate=avg.pk, seq=7, window_end=end, value=value, ts=1.0))
    bus.publish_stream_event(redis_client, shop.pk, AggregateValue(
        stream=shop.pk, aggregate=avg.pk + 99, seq=8, window_end=60.0, value=1.0, ts=1.0))  # a deleted subscription
    HistoryPersister(redis_client).run()
    HistoryPersister(redis_client).run()
    assert list(AggregateValueRecord.objects.values_list("aggregate_id", "window_end", "value")) == [
        (avg.pk, 60.0, 41.5), (avg.pk, 120.0, None)]


def test_the_query_knows_its_class_from_the_latest_report(shop, redis_client, user):
    query = KeywordQuery.objects.get(name="dress in texas")
    other = KeywordQuery.objects.create(owner=user, name="wide", schema=shop.schema, stream=shop,
                                        keywords="texas dress", tmax=5)
    assert sharing_note(redis_client, query)[0] is None
    bus.write_sharing_report(redis_client, SharingReport(
        stream=shop.pk, sharing="widen", ts=1.0, totals={},
        classes=[{"class": 3, "members": [query.pk, other.pk],
                  "properties": {"keywords": ["dress", "texas"], "tmax": 5, "window_seconds": None}}]))
    found, _ = sharing_note(redis_client, query)
    assert found is not None and found.others == [other.pk]
    assert found.describe() == (f"class 3: keywords {{dress, texas}}, Tmax 5, window none; "
                                f"shared with wide (#{other.pk})")
