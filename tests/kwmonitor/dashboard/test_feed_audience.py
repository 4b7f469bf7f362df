"""Feeds carry only what their viewer may see: one test per kind of event, with two non-staff users of
one stream (Ann and Bob, each with a query and an aggregate subscription of their own) and staff, through
the real ASGI application and real Redis."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from kwmonitor.dashboard import consumers
from kwmonitor.queries.models import AggregateSubscription, KeywordQuery
from streaming import bus
from streaming.events import AggregateValue, BatchMetrics, DeadLetter, EvaluatorStatus, SharingReport

from .conftest import added
from .test_consumers import communicator, session_cookie

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", "bob@example.com", "bob-password-1")


@pytest.fixture
def bobs_query(stream, bob):
    return KeywordQuery.objects.create(owner=bob, name="bob's secret", schema=stream.schema, stream=stream,
                                       keywords="laptop austin", tmax=3)


def _aggregate(owner, stream, name: str) -> AggregateSubscription:
    return AggregateSubscription.objects.create(owner=owner, name=name, stream=stream, source_relation="Order",
                                                window=60, step=60)


async def _all(path: str, cookie) -> list[dict]:
    """Every message the feed sends at once (its replay, or a query's snapshot)."""
    ws = communicator(path, cookie)
    assert (await ws.connect())[0]
    messages = []
    while not await ws.receive_nothing(timeout=0.5):
        messages.append(await ws.receive_json_from())
    await ws.disconnect()
    return messages


def stream_feed(stream_id: int, user) -> list[dict]:
    return asyncio.run(_all(f"/ws/streams/{stream_id}/", session_cookie(user)))


def test_changes_reach_only_the_querys_owner_and_staff(query, bobs_query, user, bob, staff_user, redis_client):
    bus.publish_changes(redis_client, query.pk, [added(query.pk, 1)])
    bus.publish_changes(redis_client, bobs_query.pk, [added(bobs_query.pk, 2)])

    async def refused(path: str, cookie) -> bool:
        return not (await communicator(path, cookie).connect())[0]

    (ann_sees,) = asyncio.run(_all(f"/ws/queries/{query.pk}/", session_cookie(user)))
    (staff_sees,) = asyncio.run(_all(f"/ws/queries/{query.pk}/", session_cookie(staff_user)))
    assert [r["tuples"][1]["key"] for r in ann_sees["results"]] == [1] and ann_sees == staff_sees
    assert asyncio.run(refused(f"/ws/queries/{query.pk}/", session_cookie(bob)))
    assert asyncio.run(refused(f"/ws/queries/{bobs_query.pk}/", session_cookie(user)))
    assert all(m["type"] not in ("result.add", "result.remove") for m in stream_feed(query.stream_id, bob))


def test_aggregate_values_reach_only_who_may_see_the_subscription(query, bobs_query, user, bob, staff_user,
                                                                  redis_client):
    s = query.stream_id
    anns, bobs = _aggregate(user, query.stream, "ann's orders"), _aggregate(bob, query.stream, "bob's orders")
    bus.publish_aggregate_values(redis_client, s, [
        AggregateValue(stream=s, aggregate=a.pk, seq=1, window_end=60.0, value=n, ts=1.0)
        for a, n in ((anns, 3), (bobs, 99))])

    def values(viewer) -> dict[int, float]:
        return {m["aggregate"]: m["value"] for m in stream_feed(s, viewer) if m["type"] == "aggregate.value"}

    assert values(user) == {anns.pk: 3}
    assert values(bob) == {bobs.pk: 99}
    assert values(staff_user) == {anns.pk: 3, bobs.pk: 99}


def test_sharing_reports_name_only_the_viewers_queries_and_subscriptions(query, bobs_query, user, bob, staff_user,
                                                                         redis_client):
    s = query.stream_id
    bobs_other = KeywordQuery.objects.create(owner=bob, name="bob alone", schema=query.schema, stream=query.stream,
                                             keywords="dress texas", tmax=4)
    anns, bobs = _aggregate(user, query.stream, "ann's orders"), _aggregate(bob, query.stream, "bob's orders")
    hull = {"Product": {"price": "[100.0, inf)"}}
    shared = {"class": 0, "members": [query.pk, bobs_other.pk], "properties": {
        "keywords": ["dress", "texas"], "tmax": 4, "selection": hull, "attributes": {"Product": ["price"]}}}
    alone = {"class": 1, "members": [bobs_query.pk], "properties": {"keywords": ["austin", "laptop"], "tmax": 3}}
    report = SharingReport(stream=s, evaluator=1, sharing="widen", classes=[shared, alone], totals={"queries": 3},
                           aggregate_classes=[{"subscribers": [anns.pk, bobs.pk], "source_relation": "Order",
                                               "source_query": None}], ts=1.0)
    bus.publish_stream_event(redis_client, s, report)

    (ann_sees,) = [m for m in stream_feed(s, user) if m["type"] == "sharing.report"]
    assert [(c["class"], c["members"], c["members_total"]) for c in ann_sees["classes"]] == [(0, [query.pk], 2)]
    assert ann_sees["classes"][0]["properties"] == {"keywords": ["dress", "texas"], "tmax": 4}
    assert [(a["subscribers"], a["subscribers_total"]) for a in ann_sees["aggregate_classes"]] == [([anns.pk], 2)]
    (bob_sees,) = [m for m in stream_feed(s, bob) if m["type"] == "sharing.report"]
    assert [(c["class"], c["members"]) for c in bob_sees["classes"]] == [(0, [bobs_other.pk]), (1, [bobs_query.pk])]
    (staff_sees,) = [m for m in stream_feed(s, staff_user) if m["type"] == "sharing.report"]
    assert staff_sees["classes"] == [shared, alone] and staff_sees["aggregate_classes"][0]["subscribers"] == [anns.pk,
                                                                                                              bobs.pk]
    bus.publish_stream_event(redis_client, s, SharingReport(stream=s, sharing="widen", classes=[alone], totals={},
                                                            ts=2.0))
    assert [m["ts"] for m in stream_feed(s, user) if m["type"] == "sharing.report"] == [1.0]  # nothing of Ann's in it


def test_health_carries_only_the_viewers_queries(query, bobs_query, user, bob, staff_user, redis_client, client):
    s = query.stream_id
    errors = {str(query.pk): "ValueError: ann's", str(bobs_query.pk): "ValueError: bob's"}
    status = EvaluatorStatus(evaluator=1, stream=s, status="running", query_errors=errors, ts=1.0)
    state = {"stream": {"query_errors": errors, "aggregate_errors": {}},
             str(query.pk): {"live_results": 1, "keywords": ["dress", "texas"]},
             str(bobs_query.pk): {"live_results": 7, "keywords": ["austin", "laptop"]}}
    bus.publish_stream_event(redis_client, s, status)
    bus.publish_stream_event(redis_client, s, BatchMetrics(evaluator=1, stream=s, batch_id=0, input_rows=1,
                                                           rows_per_second=1.0, duration_ms=1.0, state=state, ts=2.0))

    def seen(viewer) -> tuple[dict, set[str], dict]:
        status_msg, metrics = stream_feed(s, viewer)
        return status_msg["query_errors"], set(metrics["state"]), metrics["state"]["stream"]["query_errors"]

    assert seen(user) == ({str(query.pk): "ValueError: ann's"}, {"stream", str(query.pk)},
                          {str(query.pk): "ValueError: ann's"})
    assert seen(bob) == ({str(bobs_query.pk): "ValueError: bob's"}, {"stream", str(bobs_query.pk)},
                         {str(bobs_query.pk): "ValueError: bob's"})
    assert seen(staff_user) == (errors, set(state), errors)
    client.force_login(user)
    report = client.get("/status/").json()
    assert [q["query"] for q in report["queries"]] == [query.pk] and [r["stream"] for r in report["streams"]] == [s]
    client.force_login(bob)
    assert [q["query"] for q in client.get(f"/status/?queries={query.pk},{bobs_query.pk}").json()["queries"]] == [
        bobs_query.pk]


def test_dead_letters_keep_their_line_for_staff_only(query, bobs_query, user, bob, staff_user, redis_client):
    s = query.stream_id
    bus.publish_stream_event(redis_client, s, DeadLetter(stream=s, seq=None, line='{"card": "4111"', reason="malformed "
                                                         "JSON", ts=1.0))
    for viewer, line in ((user, None), (bob, None), (staff_user, '{"card": "4111"')):
        (letter,) = stream_feed(s, viewer)
        assert (letter["type"], letter["reason"], letter["line"]) == ("deadletter", "malformed JSON", line)


def test_the_stream_pages_process_panel_names_only_the_viewers_queries(query, bobs_query, user, bob, staff_user,
                                                                       redis_client, client):
    query.stream.evaluator_processes = 2
    query.stream.save()

    def placed(viewer) -> str:
        client.force_login(viewer)
        page = client.get(f"/streams/{query.stream_id}/").content.decode()
        return page[page.index('id="panel-processes"'):page.index("</section>", page.index('id="panel-processes"'))]

    anns, bobs, staffs = placed(user), placed(bob), placed(staff_user)
    assert "dress in texas" in anns and "bob&#x27;s secret" not in anns and "laptop" not in anns
    assert "bob&#x27;s secret" in bobs and "dress in texas" not in bobs and "texas" not in bobs
    assert "dress in texas" in staffs and "bob&#x27;s secret" in staffs


def test_an_open_feed_follows_what_its_viewer_may_see(query, user, redis_client, monkeypatch):
    monkeypatch.setattr(consumers, "AUDIENCE_SECONDS", 0.0)  # read again for every batch of entries
    s = query.stream_id
    cookie = session_cookie(user)
    bus.publish_stream_event(redis_client, s, DeadLetter(stream=s, seq=None, line="x", reason="bad", ts=1.0))

    async def scenario() -> list[dict]:
        ws = communicator(f"/ws/streams/{s}/?replay=1", cookie)
        assert (await ws.connect())[0]
        messages = [await ws.receive_json_from(timeout=5)]  # the feed has read what Ann may see
        aggregate = await database_sync_to_async(_aggregate)(user, query.stream, "new tile")
        bus.publish_aggregate_values(redis_client, s, [
            AggregateValue(stream=s, aggregate=aggregate.pk, seq=1, window_end=60.0, value=5, ts=2.0)])
        messages.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()
        return messages

    letter, value = asyncio.run(scenario())
    assert letter["type"] == "deadletter"
    assert (value["type"], value["value"]) == ("aggregate.value", 5)
