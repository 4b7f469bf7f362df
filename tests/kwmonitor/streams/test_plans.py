"""Plans are written to Redis after commit, with a new version on every change."""

import sys

import pytest

from kwmonitor.queries.models import KeywordQuery, Predicate
from kwmonitor.streams.models import Evaluator, Stream
from streaming import bus
from streaming.clock import MAX_CLOCK_JUMP, TS_MAX, TS_MIN

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def plan_of(redis_client, stream):
    """The plan the stream's evaluator reads, as stored."""
    return bus.read_plan(redis_client, Evaluator.objects.get(stream=stream).pk).model_dump(mode="json", by_alias=True)


def test_plan_lists_the_enabled_queries_with_schema_source_and_clock_guard(shop, redis_client, settings):
    plan = plan_of(redis_client, shop)
    evaluator = Evaluator.objects.get(stream=shop)
    assert plan["version"] == evaluator.plan_version and plan["evaluator"] == evaluator.pk
    assert plan["stream"]["id"] == shop.pk and plan["stream"]["name"] == "shop"
    assert plan["stream"]["schema"] == shop.schema.to_document()
    consumers = bus.Keys.landing_consumers(shop.pk, "raw")
    assert plan["stream"]["source"] == {"kind": "landing", "path": str((settings.LANDING_DIR / str(shop.pk)).resolve()),
                                        "consumers": [evaluator.pk], "consumers_key": consumers}
    # a running reader follows the directory's consumers in Redis, written with the plans
    assert redis_client.smembers(consumers) == {bus.Keys.evaluator_state(evaluator.pk)}
    assert plan["stream"]["clock"] == {"ts_min": TS_MIN, "ts_max": TS_MAX, "max_jump": MAX_CLOCK_JUMP}
    query = KeywordQuery.objects.get(name="dress in texas")
    assert plan["queries"] == [{
        "id": query.pk, "keywords": ["dress", "texas"], "tmax": 4, "window_seconds": 1800.0,
        "predicates": [{"relation": "Product", "attribute": "price", "op": ">=", "value": 40}],
    }]


def test_every_committed_change_publishes_a_newer_plan(shop, redis_client, user):
    versions = [plan_of(redis_client, shop)["version"]]

    def changed():
        plan = plan_of(redis_client, shop)
        assert plan["version"] > versions[-1]
        versions.append(plan["version"])
        return plan

    off = KeywordQuery.objects.get(name="off")
    off.enabled = True
    off.save()
    assert [q["keywords"] for q in changed()["queries"]] == [["dress", "texas"], ["hat"]]
    Predicate.objects.create(query=off, relation="Customer", attribute="state", op="=", value="Ohio")
    assert changed()["queries"][1]["predicates"][0]["value"] == "Ohio"
    off.delete()
    assert len(changed()["queries"]) == 1
    shop.source_kind = "redis"
    shop.save()
    assert changed()["stream"]["source"] == {"kind": "redis", "key": bus.Keys.stream_ops(shop.pk)}
    shop.max_clock_jump, shop.ts_max = 60.0, None
    shop.save()
    assert changed()["stream"]["clock"] == {"ts_min": TS_MIN, "ts_max": sys.float_info.max, "max_jump": 60.0}


def test_one_transaction_publishes_once_and_a_rollback_publishes_nothing(shop, redis_client, user):
    from django.db import transaction

    before = plan_of(redis_client, shop)["version"]
    with transaction.atomic():
        query = KeywordQuery.objects.create(owner=user, name="new", schema=shop.schema, stream=shop, keywords="sun", tmax=3)
        Predicate.objects.create(query=query, relation="Product", attribute="price", op="<", value=20)
        Predicate.objects.create(query=query, relation="Product", attribute="price", op=">", value=1)
    assert plan_of(redis_client, shop)["version"] == before + 1
    with pytest.raises(RuntimeError), transaction.atomic():
        query.enabled = False
        query.save()
        raise RuntimeError("rolled back")
    assert plan_of(redis_client, shop)["version"] == before + 1
    assert len(plan_of(redis_client, shop)["queries"]) == 2


def test_a_query_moved_to_another_stream_leaves_the_first_plan(shop, redis_client):
    other = Stream.objects.create(name="second", schema=shop.schema)
    query = KeywordQuery.objects.get(name="dress in texas")
    query.stream = other
    query.save()
    assert plan_of(redis_client, shop)["queries"] == []
    assert [q["id"] for q in plan_of(redis_client, other)["queries"]] == [query.pk]
