"""The history persister copies the Redis change and event streams into the database."""

import threading

import pytest
from django.db import connection

from kwmonitor.queries.models import AggregateSubscription, KeywordQuery
from kwmonitor.streams.history import HistoryPersister
from kwmonitor.streams.models import (
    AggregateValueRecord,
    DeadLetterRecord,
    DroppingSample,
    HistoryCursor,
    MetricSample,
    RearrangementRecord,
    ResultEvent,
)
from streaming import bus
from streaming.events import (
    AggregateValue,
    BatchMetrics,
    DeadLetter,
    DroppingRatio,
    EvaluatorStatus,
    Rearrangement,
    ResultAdded,
    ResultRemoved,
    ResultView,
    TupleView,
    result_key,
)

pytestmark = [pytest.mark.redis, pytest.mark.django_db]


def result(cid: int) -> ResultView:
    tuples = [("Customer", cid)]
    return ResultView(key=result_key(tuples, []), tuples=[TupleView(relation="Customer", key=cid, hits=["texas"])], edges=[])


def test_changes_are_persisted_once_in_order_across_runs(shop, redis_client):
    query = KeywordQuery.objects.get(name="dress in texas")
    bus.publish_changes(redis_client, query.pk, [ResultAdded(query=query.pk, seq=i, result=result(i)) for i in range(5)])
    persister = HistoryPersister(redis_client, batch=2)
    assert persister.run()["results"] == 5
    assert persister.run()["results"] == 0
    bus.publish_changes(redis_client, query.pk, [ResultRemoved(query=query.pk, seq=9, result=result(3))])
    assert persister.run()["results"] == 1
    rows = list(ResultEvent.objects.filter(query=query).order_by("id"))
    assert [(r.type, r.seq) for r in rows] == [("result.add", i) for i in range(5)] + [("result.remove", 9)]
    entries = redis_client.xrange(bus.Keys.changes(query.pk))
    assert [r.entry_id for r in rows] == [entry_id for entry_id, _ in entries]
    assert rows[-1].result["tuples"][0] == {"relation": "Customer", "key": 3, "values": {}, "hits": ["texas"]}
    assert HistoryCursor.objects.get(key=bus.Keys.changes(query.pk)).last_id == entries[-1][0]


def test_every_query_is_persisted_across_batches_and_an_entry_already_held_is_not_written_again(shop, redis_client, user):
    first = KeywordQuery.objects.get(name="dress in texas")
    others = [KeywordQuery.objects.create(owner=user, name=f"q{i}", schema=shop.schema, stream=shop, keywords="hat",
                                          tmax=2) for i in range(3)]
    counts = {first.pk: 5, others[0].pk: 2, others[1].pk: 0, others[2].pk: 3}
    for query_id, n in counts.items():
        bus.publish_changes(redis_client, query_id, [ResultAdded(query=query_id, seq=i, result=result(i)) for i in range(n)])
    redis_client.xadd(bus.Keys.changes(first.pk), {"data": '{"type": "result.add", "seq": "x"}'})  # malformed: skipped
    persister = HistoryPersister(redis_client, batch=2)
    assert persister.run()["results"] == 10
    for query_id, n in counts.items():
        rows = ResultEvent.objects.filter(query_id=query_id).order_by("id")
        assert [(r.seq, r.entry_id) for r in rows] == [
            (i, entry_id) for i, (entry_id, _) in enumerate(redis_client.xrange(bus.Keys.changes(query_id))[:n])]
    last = redis_client.xrange(bus.Keys.changes(first.pk))[-1][0]
    assert HistoryCursor.objects.get(key=bus.Keys.changes(first.pk)).last_id == last
    HistoryCursor.objects.filter(key=bus.Keys.changes(first.pk)).update(last_id="0-0")  # copied again: held
    assert persister.run()["results"] == 0
    assert ResultEvent.objects.count() == 10


def test_changes_published_again_after_redis_lost_them_are_not_persisted_twice(shop, redis_client):
    query = KeywordQuery.objects.get(name="dress in texas")
    changes = [ResultAdded(query=query.pk, seq=i, result=result(i)) for i in range(4)]
    changes += [ResultRemoved(query=query.pk, seq=4, result=result(1)), ResultAdded(query=query.pk, seq=4, result=result(1))]
    bus.publish_changes(redis_client, query.pk, changes[:5])
    persister = HistoryPersister(redis_client, batch=2)
    assert persister.run()["results"] == 5
    redis_client.flushdb()  # the evaluator publishes every change again, from the first op, under new ids
    bus.publish_changes(redis_client, query.pk, changes)
    assert persister.run()["results"] == 1  # only the add at seq 4 is new
    rows = ResultEvent.objects.filter(query=query).order_by("id").values_list("seq", "type", "result__key")
    assert list(rows) == [(c.seq, c.type, c.result.key) for c in changes]


def test_dead_letters_and_values_published_again_after_redis_lost_them_are_not_persisted_twice(shop, redis_client):
    query = KeywordQuery.objects.get(name="dress in texas")
    aggregate = AggregateSubscription.objects.create(owner=query.owner, name="customers", stream=shop,
                                                     source_relation="Customer", window=60, step=60)

    def dead(seq):
        return DeadLetter(stream=shop.pk, seq=seq, line="{}", reason="late", ts=1.0)

    def value(end):
        return AggregateValue(stream=shop.pk, aggregate=aggregate.pk, seq=int(end), window_end=end, value=2, ts=1.0)

    for event in (dead(4), dead(None), value(60.0)):
        bus.publish_stream_event(redis_client, shop.pk, event)
    persister = HistoryPersister(redis_client)
    persister.run()
    redis_client.flushdb()  # the rebuild publishes the evaluator's dead letters and values again
    for event in (dead(4), value(60.0), dead(5), value(120.0), dead(None)):  # the last one a new ingest reject
        bus.publish_stream_event(redis_client, shop.pk, event)
    persister.run()
    assert list(DeadLetterRecord.objects.order_by("id").values_list("seq", flat=True)) == [4, None, 5, None]
    assert list(AggregateValueRecord.objects.order_by("id").values_list("window_end", flat=True)) == [60.0, 120.0]


def test_stream_events_go_to_their_tables_and_status_is_not_kept(shop, redis_client):
    events = [
        EvaluatorStatus(evaluator=1, stream=shop.pk, status="running", ts=1.0),
        BatchMetrics(evaluator=1, stream=shop.pk, batch_id=7, input_rows=100, rows_per_second=50.0, duration_ms=2000.0,
                     breakdown_ms={"parse": 5.0}, dead_letters=1, state={"1": {"results": 3}}, ts=2.0),
        DeadLetter(stream=shop.pk, seq=4, line='{"op": "x"}', reason="unknown op 'x'", ts=3.0),
        DroppingRatio(stream=shop.pk, relation="Order", period=2, tuples=10, dropped=4, ratio=0.4, ts=4.0),
        Rearrangement(stream=shop.pk, relation="Order", old_sequence=["a", "b"], new_sequence=["b", "a"],
                      d_init=0.5, d_cur=0.2, mu=0.1, ts=5.0),
        Rearrangement(stream=shop.pk, relation="Order", old_sequence=["b", "a"], new_sequence=["b", "a"],
                      d_init=0.2, d_cur=0.2, mu=0.0, ts=6.0),  # a check that kept the order: not a rearrangement
    ]
    for event in events:
        bus.publish_stream_event(redis_client, shop.pk, event)
    redis_client.xadd(bus.Keys.stream_events(shop.pk), {"data": '{"type": "nonsense"}'})
    assert HistoryPersister(redis_client).run()["stream_events"] == 4
    metric = MetricSample.objects.get(stream=shop)
    assert (metric.batch_id, metric.input_rows, metric.breakdown_ms, metric.state) == (7, 100, {"parse": 5.0}, {"1": {"results": 3}})
    assert metric.ts.timestamp() == 2.0
    assert DeadLetterRecord.objects.get(stream=shop).reason == "unknown op 'x'"
    assert DroppingSample.objects.get(stream=shop).ratio == 0.4
    assert RearrangementRecord.objects.get(stream=shop).new_sequence == ["b", "a"]
    # the malformed entry is skipped, and the cursor is past it
    assert HistoryPersister(redis_client).run()["stream_events"] == 0


def test_subscription_results_are_persisted_once_in_order(photons_stream, user, redis_client):
    from kwmonitor.queries.models import WXQuerySubscription
    from kwmonitor.streams.models import SubscriptionResultRecord
    from streaming.events import SubscriptionResult
    from streaming.workloads.photons import PAPER_QUERIES

    sub = WXQuerySubscription.objects.create(owner=user, name="rxj", stream=photons_stream, text=PAPER_QUERIES["q3"])
    items = [SubscriptionResult(subscription=sub.pk, stream=photons_stream.pk, seq=2 * i, item=f"<rxj>{i}</rxj>",
                                ts=1.0) for i in range(5)]
    bus.publish_subscription_results(redis_client, items[:3])
    persister = HistoryPersister(redis_client, batch=2)
    assert persister.run()["subscription_results"] == 3
    bus.publish_subscription_results(redis_client, items[3:])
    assert persister.run()["subscription_results"] == 2
    assert persister.run()["subscription_results"] == 0
    rows = list(SubscriptionResultRecord.objects.filter(subscription=sub).order_by("id"))
    assert [(r.seq, r.item) for r in rows] == [(i.seq, i.item) for i in items]
    assert [r.entry_id for r in rows] == [e for e, _ in redis_client.xrange(bus.Keys.subscription_results(sub.pk))]


def test_a_run_that_drained_every_stream_marks_each_evaluator_at_its_published_seq(shop, redis_client):
    """The mark is the published seq read before the drain, written only when every stream was read to its end
    (the evaluator publishes again what came after it, should Redis lose it)."""
    query = KeywordQuery.objects.get(name="dress in texas")
    evaluator = shop.evaluator
    state = bus.Keys.evaluator_state(evaluator.pk)
    bus.publish_changes(redis_client, query.pk, [ResultAdded(query=query.pk, seq=i, result=result(i)) for i in range(5)])
    redis_client.hset(state, "published", 4)
    persister = HistoryPersister(redis_client, batch=2, max_batches=2)  # four entries a run: one left over
    persister.run()
    assert redis_client.get(bus.Keys.persisted_seq(evaluator.pk)) is None
    persister.run()
    assert redis_client.get(bus.Keys.persisted_seq(evaluator.pk)) == "4"
    bus.publish_changes(redis_client, query.pk, [ResultRemoved(query=query.pk, seq=7, result=result(2))])
    redis_client.hset(state, "published", 7)
    persister.run()
    assert redis_client.get(bus.Keys.persisted_seq(evaluator.pk)) == "7"
    assert ResultEvent.objects.filter(query=query).count() == 6


@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_write_each_change_once_in_order(shop, redis_client, user):
    queries = [KeywordQuery.objects.create(owner=user, name=f"q{i}", schema=shop.schema, stream=shop, keywords="hat",
                                           tmax=2).pk for i in range(4)]
    for query_id in queries:
        bus.publish_changes(redis_client, query_id, [ResultAdded(query=query_id, seq=i, result=result(i)) for i in range(300)])
    written: list[int] = []

    def run() -> None:
        try:
            written.append(HistoryPersister(redis_client, batch=7).run()["results"])
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(written) == 1200
    for query_id in queries:
        assert list(ResultEvent.objects.filter(query_id=query_id).order_by("id").values_list("seq", flat=True)) == list(range(300))
