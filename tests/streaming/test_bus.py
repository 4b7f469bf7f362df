"""The Redis bus against a real Redis: atomic, idempotent, gap-free reads."""

import os

import pytest

from streaming import bus
from streaming.events import (
    BatchMetrics,
    EvaluatorStatus,
    ResultAdded,
    ResultRemoved,
    ResultView,
    TupleView,
    parse_event,
    result_key,
)
from streaming.evaluator_state import StateField
from streaming.sharing.properties import EvaluatorPlan

pytestmark = pytest.mark.redis


@pytest.fixture
def client():
    c = bus.connect(os.environ.get("BUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/14"))
    c.flushdb()
    yield c
    c.flushdb()


def view(*keys, edges=()):
    tuples = [["A", k] for k in keys]
    return ResultView(
        key=result_key(tuples, edges),
        tuples=[TupleView(relation="A", key=k, values={"t": "dress"}, hits=["dress"]) for k in keys],
        edges=list(edges),
    )


def test_result_key_is_order_free_and_tells_edges_apart():
    a = result_key([["B", 1], ["A", 2]], [[["A", 2], ["B", 1], "f"]])
    b = result_key([["A", 2], ["B", 1]], [[["A", 2], ["B", 1], "f"]])
    c = result_key([["A", 2], ["B", 1]], [[["A", 2], ["B", 1], "g"]])
    assert a == b != c


def test_publish_is_idempotent(client):
    r = view(1)
    add = ResultAdded(query=1, seq=0, result=r)
    assert bus.publish_changes(client, 1, [add, add]) == 1
    assert bus.publish_changes(client, 1, [ResultRemoved(query=1, seq=1, result=r)] * 2) == 1
    assert bus.read_snapshot(client, 1)[1] == []
    types = [c.type for _, c in bus.read_changes(client, 1, "0-0")]
    assert types == ["result.add", "result.remove"]


def test_snapshot_then_changes_has_no_gap_or_duplicate(client):
    seqs = {0: 0, 3: 0, 1: 1, 4: 1, 2: 2}  # result -> seq of its add
    bus.publish_changes(client, 7, [ResultAdded(query=7, seq=seq, result=view(i)) for i, seq in seqs.items()])
    last_id, snap = bus.read_snapshot(client, 7)
    assert [r.tuples[0].key for r in snap] == [2, 1, 4, 0, 3]  # newest add first, ties by key
    bus.publish_changes(client, 7, [ResultRemoved(query=7, seq=9, result=view(2)), ResultAdded(query=7, seq=9, result=view(9))])
    after = bus.read_changes(client, 7, last_id)
    live = {r.key for r in snap}
    for _, change in after:
        if change.type == "result.add":
            assert change.result.key not in live
            live.add(change.result.key)
        else:
            live.remove(change.result.key)
    assert live == {r.key for r in bus.read_snapshot(client, 7)[1]}
    assert bus.read_changes(client, 7, after[-1][0]) == []


def test_reconcile_publishes_only_the_difference(client):
    bus.publish_changes(client, 3, [ResultAdded(query=3, seq=0, result=view(k)) for k in (1, 2)])
    assert [(kind, seq) for kind, _, _, seq in bus.reconcile(client, 3, 5, [view(2), view(3)])] == [
        ("remove", 5), ("add", 5)]
    assert sorted(r.tuples[0].key for r in bus.read_snapshot(client, 3)[1]) == [2, 3]
    assert bus.reconcile(client, 3, 6, [view(2), view(3)]) == []


def test_restore_live_sets_the_live_set_and_seq_with_no_change_but_a_mark(client):
    bus.publish_changes(client, 3, [ResultAdded(query=3, seq=0, result=view(k)) for k in (1, 2)])
    adds = {view(k).key: ResultAdded(query=3, seq=4, result=view(k)).model_dump_json() for k in (2, 5)}
    bus.restore_live(client, 3, 4, adds)
    assert sorted(r.tuples[0].key for r in bus.read_snapshot(client, 3)[1]) == [2, 5]
    assert [c.type for _, c in bus.read_changes(client, 3, "0-0")] == ["result.add", "result.add", "live.restored"]
    assert bus.publish_changes(client, 3, [ResultAdded(query=3, seq=3, result=view(6))]) == 0  # older than seq 4


def test_stream_events_plan_and_heartbeat_round_trip(client):
    status = EvaluatorStatus(evaluator=4, stream=2, status="running", pid=10, ts=1.0)
    metrics = BatchMetrics(evaluator=4, stream=2, batch_id=0, input_rows=3, rows_per_second=3.0, duration_ms=1.0, ts=2.0)
    first = bus.publish_stream_event(client, 2, status)
    bus.publish_stream_event(client, 2, metrics)
    assert [e for _, e in bus.read_stream_events(client, 2)] == [status, metrics]
    assert [e for _, e in bus.read_stream_events(client, 2, first)] == [metrics]
    plan = EvaluatorPlan.model_validate({"version": 1, "evaluator": 4,
                                         "stream": {"id": 2, "name": "shop", "schema": {}, "source": {}}})
    bus.write_plan(client, 4, plan)
    assert bus.read_plan(client, 4) == plan
    assert bus.read_plan(client, 5) is None
    bus.write_heartbeat(client, status)
    assert bus.read_heartbeat(client, 4) == status
    assert 0 < client.ttl(bus.Keys.heartbeat(4)) <= 15


def test_parse_event_rejects_unknown_fields():
    with pytest.raises(ValueError):
        parse_event({"type": "result.add", "query": 1, "seq": 0, "result": view(1).model_dump(), "extra": 1})


def test_change_json_is_the_models_own_json():
    from streaming.events import ResultAdded, ResultRemoved, ResultView, TupleView, change_json

    view = ResultView(key='[[["Order",9]],[]]', edges=[(("Order", 9), ("Customer", 5), "cid")], tuples=[
        TupleView(relation="Order", key=9, values={"note": "gift \u00e9\"x", "price": 1.5, "n": None}, hits=["gift"])])
    for model, kind in ((ResultAdded, "add"), (ResultRemoved, "remove")):
        assert change_json(kind, 12, 345, view.model_dump_json()) == model(query=12, seq=345, result=view).model_dump_json()


def test_serialized_changes_of_many_queries_in_one_round_trip(redis_client):
    from streaming.events import ResultAdded, ResultView

    def added(q, i):
        return ResultAdded(query=q, seq=i, result=ResultView(key=f"k{i}", tuples=[], edges=[]))

    quads = {q: [("add", f"k{i}", added(q, i).model_dump_json(), i) for i in range(3)] for q in (7, 8)}
    quads[7].append(("add", "k1", added(7, 2).model_dump_json(), 2))  # already live: dropped
    assert bus.publish_serialized_changes(redis_client, quads, chunk=2) == 6
    assert [c.seq for _, c in bus.read_changes(redis_client, 7, "0-0")] == [0, 1, 2]
    assert len(bus.read_snapshot(redis_client, 8)[1]) == 3


def test_changes_are_published_only_while_redis_holds_the_evaluators_loaded_state(redis_client):
    from streaming.events import ResultAdded, ResultView

    state = bus.Keys.evaluator_state(3)
    quads = {7: [("add", "k1", ResultAdded(query=7, seq=1, result=ResultView(key="k1", tuples=[], edges=[]))
                  .model_dump_json(), 1)]}
    redis_client.hset(state, "seq", 1)  # written again by a batch after Redis lost the state
    with pytest.raises(bus.StateLost):
        bus.publish_serialized_changes(redis_client, quads, state_key=state)
    assert redis_client.xlen(bus.Keys.changes(7)) == 0 and not redis_client.exists(bus.Keys.published_seq(7))
    redis_client.hset(state, StateField.LOADED, 1)
    assert bus.publish_serialized_changes(redis_client, quads, state_key=state) == 1


def test_two_publishers_of_one_query_give_each_change_once_in_seq_order(redis_client):
    """A class moving between evaluators: both publish a while, the one behind adds nothing."""
    from streaming.events import ResultAdded, ResultRemoved, ResultView

    def change(kind, key, seq):
        model = ResultAdded if kind == "add" else ResultRemoved
        return model(query=3, seq=seq, result=ResultView(key=key, tuples=[], edges=[]))

    ahead = [change("add", "a", 5), change("add", "b", 6), change("remove", "a", 8), change("add", "c", 9)]
    behind = ahead[:3]
    assert bus.publish_changes(redis_client, 3, ahead[:2]) == 2
    assert bus.publish_changes(redis_client, 3, behind[:1]) == 0  # seq 5 < 6: dropped
    assert bus.publish_changes(redis_client, 3, ahead[2:]) == 2
    assert bus.publish_changes(redis_client, 3, behind[1:]) == 0  # "b" at 6 and the remove at 8: already there
    assert bus.publish_changes(redis_client, 3, [change("add", "a", 7)]) == 0  # after the remove at 8: never back
    assert [(c.type, c.result.key, c.seq) for _, c in bus.read_changes(redis_client, 3, "0-0")] == [
        ("result.add", "a", 5), ("result.add", "b", 6), ("result.remove", "a", 8), ("result.add", "c", 9)]
    assert sorted(r.key for r in bus.read_snapshot(redis_client, 3)[1]) == ["b", "c"]
