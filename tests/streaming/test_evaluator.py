"""The group evaluator against real Redis: same changes as the engine, restarts, live plan, dead letters."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import replace

import pytest

from streaming import bus
from streaming.engine import KeywordEngine
from streaming.evaluator import GroupEvaluator, group_keywords
from streaming.parsed import parse_stored_line
from streaming.events import BatchMetrics, DeadLetter, DroppingRatio, Rearrangement, result_key
from streaming.ops import OpRejected, parse_op
from streaming.schema import Schema
from streaming.sharing.properties import EvaluatorPlan
from streaming.sources import landing_archive, landing_file_name, prune_archive, stamp
from streaming.workloads.ecommerce import SCHEMA_DOC as SCHEMA

pytestmark = pytest.mark.redis



def ins(rel, ts, **values):
    return {"op": "insert", "relation": rel, "tuple": values, "ts": ts}


def dele(rel, key, ts):
    return {"op": "delete", "relation": rel, "key": key, "ts": ts}


# The worked example of docs/examples/ecommerce, with its three bad ops.
OPS = [
    ins("Customer", 0, cid=1, name="Ann Lee", state="Texas"),
    ins("Customer", 1, cid=2, name="Bo Chen", state="Ohio"),
    ins("Customer", 2, cid=3, name="Cy Diaz", state="TEXAS"),
    ins("Product", 3, pid=1, title="Summer dress", price=40.0),
    ins("Product", 4, pid=2, title="Sun hat", price=15.0),
    ins("Product", 5, pid=3, title="Beach bundle", price=55.0),
    ins("Product", 6, pid=4, title="Dress shoes", price=70.0),
    ins("Order", 7, oid=1, cid=1, pid=1, note=""),
    ins("Order", 8, oid=2, cid=2, pid=1, note="gift for texas cousin"),
    ins("Order", 9, oid=3, cid=3, pid=2, note=""),
    ins("Group", 10, gid=1, pid=3, sid=1),
    ins("Group", 11, gid=2, pid=3, sid=2),
    ins("Order", 12, oid=4, cid=1, pid=3, note=""),
    ins("Order", 13, oid=4, cid=2, pid=2, note=""),
    dele("Order", 99, 13),
    ins("Shipment", 13, id=1),
    ins("Order", 14, oid=5, cid=3, pid=4, note="dress for texas"),
    ins("Customer", 15, cid=4, name="Di Texas-Dress", state="Utah"),
    dele("Group", 1, 16),
    ins("Order", 17, oid=6, cid=2, pid=3, note=""),
    ins("Group", 18, gid=3, pid=3, sid=4),
    dele("Order", 1, 19),
    ins("Product", 20, pid=5, title="dress dress", price=30.0),
    ins("Order", 21, oid=7, cid=1, pid=5, note=""),
    ins("Group", 22, gid=4, pid=5, sid=5),
    ins("Order", 40, oid=8, cid=3, pid=1, note=""),
    ins("Order", 41, oid=9, cid=1, pid=4, note=""),
    dele("Customer", 3, 42),
    ins("Product", 43, pid=6, title="Texas dress", price=20.0),
]
LINES = [stamp(i, json.dumps(op, separators=(",", ":"))) for i, op in enumerate(OPS)]




def plan_doc(version, *queries, **fields):
    return {"version": version, "evaluator": 1,
            "stream": {"id": 2, "name": "shop", "schema": SCHEMA, "source": {"kind": "redis", "key": "kw:stream:2:ops"}},
            "queries": list(queries), **fields}


def plan(version, *queries, **fields):
    return EvaluatorPlan.model_validate(plan_doc(version, *queries, **fields))


def query(qid, keywords=("dress", "texas"), tmax=5, window=None, predicates=()):
    return {"id": qid, "keywords": list(keywords), "tmax": tmax, "window_seconds": window, "predicates": list(predicates)}


def parsed(redis_client, lines):
    schema = Schema.from_dict(SCHEMA)
    keywords = group_keywords(bus.read_plan(redis_client, 1))
    return [parse_stored_line(line, schema, keywords) for line in lines]


def reference(ops, keywords=("dress", "texas"), tmax=5, window=None, keep=lambda op: True):
    """What ``python -m streaming run`` reports: seq -> sorted (type, result key)."""
    schema = Schema.from_dict(SCHEMA)
    engine = KeywordEngine(schema, list(keywords), tmax, window)
    out = defaultdict(list)
    for seq, raw in enumerate(ops):
        try:
            op = parse_op(raw, schema)
        except OpRejected:
            continue
        if not keep(op):
            continue
        try:
            changes = engine.apply(op)
        except OpRejected as exc:
            changes = exc.changes
        for c in changes:
            out[seq].append((c.type, result_key(c.result.tuples, c.result.edges)))
    return {seq: sorted(v) for seq, v in out.items()}, {result_key(r.tuples, r.edges) for r in engine.snapshot()}


def published(redis_client, qid):
    out = defaultdict(list)
    live: set[str] = set()
    for _, change in bus.read_changes(redis_client, qid, "0-0", count=100_000):
        kind = "add" if change.type == "result.add" else "remove"
        assert (kind == "add") != (change.result.key in live), f"{kind} of {change.result.key} breaks the live set"
        live.symmetric_difference_update({change.result.key})
        out[change.seq].append((kind, change.result.key))
    return {seq: sorted(v) for seq, v in out.items()}, live


def stream_events(redis_client, cls):
    return [e for _, e in bus.read_stream_events(redis_client, 2, count=10_000) if isinstance(e, cls)]


def test_changes_equal_the_engine_per_seq_and_bad_ops_are_dead_letters(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    for batch_id, start in enumerate(range(0, len(LINES), 7)):
        ev.apply_batch(batch_id, parsed(redis_client, LINES[start:start + 7]))
    expected, expected_live = reference(OPS)
    got, live = published(redis_client, 5)
    assert got == expected
    assert live == expected_live == {r.key for r in bus.read_snapshot(redis_client, 5)[1]}
    dead = stream_events(redis_client, DeadLetter)
    assert [(d.seq, d.reason.split(":")[0]) for d in dead] == [
        (13, "insert of Order 4"), (14, "delete of Order 99"), (15, "unknown relation 'Shipment'")]
    metrics = stream_events(redis_client, BatchMetrics)
    assert [m.input_rows for m in metrics] == [7, 7, 7, 7, 1]
    assert sum(m.dead_letters for m in metrics) == 3
    assert metrics[-1].state["5"]["live_results"] == len(expected_live)


def test_result_views_carry_values_and_hits(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    ev.apply_batch(0, parsed(redis_client, LINES[:9]))
    views = {tuple(t.key for t in r.tuples): r for r in bus.read_snapshot(redis_client, 5)[1]}
    order2 = views[(2, 1)]
    assert order2.tuples[0].relation == "Order" and order2.tuples[0].values["note"] == "gift for texas cousin"
    assert order2.tuples[0].hits == ["texas"] and order2.tuples[1].hits == ["dress"]


def test_window_and_unsorted_batches(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(6, tmax=4, window=30.0)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    rows = parsed(redis_client, LINES)
    ev.apply_batch(0, list(reversed(rows[:20])))
    ev.apply_batch(1, rows[20:])
    expected, expected_live = reference(OPS, tmax=4, window=30.0)
    got, live = published(redis_client, 6)
    assert got == expected and live == expected_live


def test_replayed_batch_is_not_applied_twice(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    rows = parsed(redis_client, LINES)
    ev.apply_batch(0, rows[:15])
    ev.apply_batch(0, rows[:15])
    ev.apply_batch(1, rows[10:])
    assert published(redis_client, 5)[0] == reference(OPS)[0]
    assert len(stream_events(redis_client, DeadLetter)) == 3


@pytest.mark.parametrize("cut", [9, 16, 24])
def test_restart_rebuilds_from_the_persisted_tuples(redis_client, cut):
    bus.write_plan(redis_client, 1, plan(1, query(5), query(6, tmax=4, window=30.0)))
    first = GroupEvaluator(redis_client, 1)
    first.start()
    rows = parsed(redis_client, LINES)
    first.apply_batch(0, rows[:cut])
    second = GroupEvaluator(redis_client, 1)  # the process died; a new one starts from Redis
    second.start()
    second.apply_batch(0, rows[cut - 3:])  # Spark replays an uncommitted batch
    for qid, kwargs in ((5, {}), (6, {"tmax": 4, "window": 30.0})):
        expected, expected_live = reference(OPS, **kwargs)
        got, live = published(redis_client, qid)
        assert got == expected and live == expected_live


def test_stored_tuples_are_saved_as_records_and_a_state_saved_as_lines_restarts_the_same(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5), query(6, tmax=4, window=30.0)))
    first = GroupEvaluator(redis_client, 1)
    first.start()
    first.apply_batch(0, parsed(redis_client, LINES[:16]))
    saved = {field: json.loads(raw) for field, raw in redis_client.hgetall(bus.Keys.evaluator_tuples(1)).items()}
    assert saved and all(json.loads(LINES[seq]) == {"seq": seq, **ins(rel, ts, **values)}
                         for field, (seq, ts, values) in saved.items() for rel in [json.loads(field)[0]])
    # the hash as a state saved before the records held it: each tuple's stored line
    redis_client.hset(bus.Keys.evaluator_tuples(1), mapping={field: LINES[seq] for field, (seq, _, _) in saved.items()})
    second = GroupEvaluator(redis_client, 1)
    second.start()
    assert second.session.stored == first.session.stored
    second.apply_batch(1, parsed(redis_client, LINES[16:]))
    for qid, kwargs in ((5, {}), (6, {"tmax": 4, "window": 30.0})):
        expected, expected_live = reference(OPS, **kwargs)
        got, live = published(redis_client, qid)
        assert got == expected and live == expected_live


def write_landing(directory, lines, per_file=10, archived=0):
    """``lines`` as landing files of ``per_file`` lines, the first ``archived`` files moved to the archive."""
    directory.mkdir(parents=True)
    landing_archive(directory).mkdir(parents=True)
    for n, first in enumerate(range(0, len(lines), per_file)):
        folder = landing_archive(directory) if n < archived else directory
        (folder / landing_file_name(first)).write_text("".join(line + "\n" for line in lines[first:first + per_file]))


def landing_plan(directory, *queries):
    stream = plan_doc(1)["stream"] | {"source": {"kind": "landing", "path": str(directory)}}
    return plan(1, *queries, stream=stream)


@pytest.mark.parametrize("cut", [9, 21])
def test_redis_losing_its_data_is_rebuilt_from_the_landing_files(redis_client, tmp_path, cut):
    directory = tmp_path / "2"
    write_landing(directory, LINES, archived=2)
    bus.write_plan(redis_client, 1, landing_plan(directory, query(5), query(6, tmax=4, window=30.0)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    rows = parsed(redis_client, LINES)
    ev.apply_batch(0, rows[:cut])
    redis_client.flushdb()  # a crash without persistence: tuples, state, plan, live sets, change streams gone
    # a batch's writes that its Redis client retried on the new Redis, before the evaluator could see the loss
    redis_client.hset(bus.Keys.evaluator_state(1), "seq", cut - 1)
    redis_client.set(bus.Keys.published_seq(5), cut - 1)
    ev.apply_batch(1, rows[cut - 2:])  # the next batch finds the state lost and rebuilds first
    for qid, kwargs in ((5, {}), (6, {"tmax": 4, "window": 30.0})):
        expected, expected_live = reference(OPS, **kwargs)
        got, live = published(redis_client, qid)
        assert got == expected and live == expected_live  # every change once again, from the first op
    bus.write_plan(redis_client, 1, landing_plan(directory, query(5), query(6, tmax=4, window=30.0)))  # supervisor
    restarted = GroupEvaluator(redis_client, 1)
    restarted.start()  # what Redis holds again is the whole state
    assert restarted.session.applied_seq == len(LINES) - 1 and restarted.session.stored == ev.session.stored


def test_a_lost_state_is_not_rebuilt_from_pruned_landing_files(redis_client, tmp_path):
    directory = tmp_path / "2"
    write_landing(directory, LINES, archived=1)
    bus.write_plan(redis_client, 1, landing_plan(directory, query(5)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    rows = parsed(redis_client, LINES)
    ev.apply_batch(0, rows[:15])
    redis_client.flushdb()
    assert prune_archive(directory, 3600, time.time() + 7200) == 1  # LANDING_ARCHIVE_HOURS went by
    with pytest.raises(RuntimeError, match="archived landing files were deleted"):
        ev.apply_batch(1, rows[15:])


def test_crash_after_persist_before_publish_is_reconciled(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    first = GroupEvaluator(redis_client, 1)
    first.start()
    rows = parsed(redis_client, LINES)
    first.apply_batch(0, rows[:12])
    for row in rows[12:20]:  # applied and persisted, but the process dies before publishing
        if row.op is not None:
            first.session.apply_op(row)
        first.session.applied_seq = row.seq
    first._persist()
    second = GroupEvaluator(redis_client, 1)
    second.start()
    second.apply_batch(1, rows[12:])
    _, expected_live = reference(OPS)
    assert published(redis_client, 5)[1] == expected_live


def test_plan_changes_at_batch_boundaries(redis_client):
    rows = parsed(redis_client, LINES)
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    ev.apply_batch(0, rows[:20])
    # a query joins with data in the window: static evaluation over the stored tuples
    bus.write_plan(redis_client, 1, plan(2, query(5), query(7, keywords=("dress",), tmax=3)))
    assert ev.refresh_plan()
    assert published(redis_client, 7)[1] == reference(OPS[:20], keywords=("dress",), tmax=3)[1]
    # an edited query restarts; its published set follows the new definition
    bus.write_plan(redis_client, 1, plan(3, query(5, tmax=3), query(7, keywords=("dress",), tmax=3)))
    ev.apply_batch(1, rows[20:25])
    assert published(redis_client, 5)[1] == reference(OPS[:25], tmax=3)[1]
    # a removed query ends: every live result gets a remove, the history stays
    bus.write_plan(redis_client, 1, plan(4, query(7, keywords=("dress",), tmax=3)))
    ev.apply_batch(2, rows[25:])
    assert published(redis_client, 5)[1] == set() and bus.read_snapshot(redis_client, 5)[1] == []
    assert published(redis_client, 7)[1] == reference(OPS, keywords=("dress",), tmax=3)[1]
    assert ev.session.plan_version == 4


def test_predicates_filter_the_tuples_a_query_sees(redis_client):
    price = {"relation": "Product", "attribute": "price", "op": ">=", "value": 40}
    bus.write_plan(redis_client, 1, plan(1, query(8, predicates=[price])))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    ev.apply_batch(0, parsed(redis_client, LINES))
    keep = lambda op: op.relation != "Product" or op.kind == "delete" or op.values["price"] >= 40
    expected, expected_live = reference(OPS, keep=keep)
    got, live = published(redis_client, 8)
    assert got == expected and live == expected_live
    assert all(t.values["price"] >= 40 for r in bus.read_snapshot(redis_client, 8)[1] for t in r.tuples if t.relation == "Product")


def test_seqless_and_malformed_lines_are_dead_letters(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    bad = ['{"op":"insert"', stamp(0, '{"op":"insert","relation":"Customer","tuple":{"cid":"x"},"ts":0}'), LINES[1]]
    ev.apply_batch(0, parsed(redis_client, bad))
    reasons = [d.reason for d in stream_events(redis_client, DeadLetter)]
    assert reasons[0].startswith("stored line is not JSON") and "expected int" in reasons[1]
    assert ev.session.stored and ev.session.applied_seq == 1


def test_executor_selection_routes_like_the_predicates_and_feeds_the_monitor(redis_client):
    """Query sets computed by the selection constructs (as on executors) give the naive result."""
    from streaming.spark.parse import collect_ops, make_parser
    import pyarrow as pa

    price = {"relation": "Product", "attribute": "price", "op": ">=", "value": 40}
    cheap = {"relation": "Product", "attribute": "price", "op": "<", "value": 20}
    bus.write_plan(redis_client, 1, plan(1, query(8, predicates=[price]), query(9, keywords=("hat",), tmax=2, predicates=[cheap])))
    ev = GroupEvaluator(redis_client, 1, asc_sequence="macro", asc_period=3, asc_mu=0.0)
    ev.start()
    selected = []
    for batch_id, start in enumerate(range(0, len(LINES), 10)):
        parser = make_parser(SCHEMA, sorted(ev.session.keywords), ev.session.selection_plan())
        table = pa.Table.from_batches(list(parser(iter([pa.RecordBatch.from_pydict({"value": LINES[start:start + 10]})]))))
        rows, stats = collect_ops(table)
        selected += [r.queries for r in rows if r.queries is not None]
        ev.apply_batch(batch_id, rows, selection_stats=stats, parsed_with_version=ev.session.plan_version)
    keep = lambda op: op.relation != "Product" or op.kind == "delete" or op.values["price"] >= 40
    assert published(redis_client, 8) == reference(OPS, keep=keep)
    keep_cheap = lambda op: op.relation != "Product" or op.kind == "delete" or op.values["price"] < 20
    assert published(redis_client, 9) == reference(OPS, keywords=("hat",), tmax=2, keep=keep_cheap)
    # prices 40, 15, 55, 70, 30, 20: bit 0 is query 8, bit 1 query 9; the last two satisfy neither
    assert selected == [0b01, 0b10, 0b01, 0b01, 0, 0]
    assert sum(m.state["stream"]["dropped_by_selection"] for m in stream_events(redis_client, BatchMetrics)) == 2
    ratios = stream_events(redis_client, DroppingRatio)
    assert [(r.relation, r.tuples, r.dropped) for r in ratios] == [("Product", 4, 0)]  # the first period of 3+ tuples
    assert [r.relation for r in stream_events(redis_client, Rearrangement)] == ["Product"]


def test_a_bad_query_is_reported_and_the_others_still_run(redis_client):
    bad = {"relation": "Product", "attribute": "weight", "op": ">", "value": 1}
    bus.write_plan(redis_client, 1, plan(1, query(5), query(6, predicates=[bad])))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    metrics = ev.apply_batch(0, parsed(redis_client, LINES))
    assert "weight" in metrics.state["stream"]["query_errors"]["6"]
    assert published(redis_client, 5) == reference(OPS)
    assert published(redis_client, 6) == ({}, set())


EXPENSIVE = {"relation": "Product", "attribute": "price", "op": ">=", "value": 40}
TEXAN = {"relation": "Customer", "attribute": "state", "op": "=", "value": "Texas"}


def filter_reference(ops, keep, window=None):
    """A filter subscription, naively: stream-level rejects, then every kept tuple alive in the window."""
    schema = Schema.from_dict(SCHEMA)
    out = defaultdict(list)
    stored, matching, last = {}, {}, None
    for seq, raw in enumerate(ops):
        try:
            op = parse_op(raw, schema)
        except OpRejected:
            continue
        if last is not None and op.ts < last:
            continue
        last = op.ts  # the op moves the clock whatever its verdict by key
        stored = {ident: since for ident, since in stored.items() if window is None or since + window > op.ts}
        for other, since in sorted(matching.items(), key=lambda item: item[1]):
            if window is not None and since + window <= op.ts:
                del matching[other]
                out[seq].append(("remove", result_key([other], [])))
        ident = (op.relation, op.key)
        if (op.kind == "insert") == (ident in stored):
            continue
        if op.kind == "insert":
            stored[ident] = op.ts
            if keep(op):
                matching[ident] = op.ts
                out[seq].append(("add", result_key([ident], [])))
        else:
            del stored[ident]
            if matching.pop(ident, None) is not None:
                out[seq].append(("remove", result_key([ident], [])))
    return {seq: sorted(v) for seq, v in out.items()}, {result_key([ident], []) for ident in matching}


def expensive(op):
    return op.relation == "Product" and op.values["price"] >= 40


def expensive_or_texan(op):
    return expensive(op) or (op.relation == "Customer" and op.values["state"] == "Texas")


def test_filter_subscriptions_next_to_a_keyword_query(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5), query(7, keywords=(), predicates=[EXPENSIVE]),
                                         query(8, keywords=(), window=5.0, predicates=[EXPENSIVE, TEXAN])))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    for batch_id, start in enumerate(range(0, len(LINES), 7)):
        metrics = ev.apply_batch(batch_id, parsed(redis_client, LINES[start:start + 7]))
    assert published(redis_client, 5) == reference(OPS)
    assert published(redis_client, 7) == filter_reference(OPS, expensive)
    assert published(redis_client, 7)[1] == {result_key([("Product", pid)], []) for pid in (1, 3, 4)}
    windowed = filter_reference(OPS, expensive_or_texan, window=5.0)
    assert published(redis_client, 8) == windowed
    assert any(kind == "remove" for changes in windowed[0].values() for kind, _ in changes)
    views = bus.read_snapshot(redis_client, 7)[1]
    assert [(t.relation, t.key, t.values["price"], t.hits) for r in views for t in r.tuples] == [
        ("Product", 4, 70.0, []), ("Product", 3, 55.0, []), ("Product", 1, 40.0, [])]  # newest first
    assert all(r.edges == [] for r in views)
    state = metrics.state["7"]
    assert state["engine"] == "filter" and state["live_results"] == 3
    # the two filter subscriptions share one class, the keyword query has its own
    assert state["class"] == metrics.state["8"]["class"] != metrics.state["5"]["class"]
    assert state["class_members"] == 2 and metrics.state["stream"]["classes"] == 2
    # a restart rebuilds the same live sets without publishing any change
    restarted = GroupEvaluator(redis_client, 1)
    restarted.start()
    assert published(redis_client, 7) == filter_reference(OPS, expensive)
    assert published(redis_client, 8) == windowed


def test_executor_selection_routes_filter_subscriptions(redis_client):
    from streaming.spark.parse import collect_ops, make_parser
    import pyarrow as pa

    bus.write_plan(redis_client, 1, plan(1, query(5), query(7, keywords=(), predicates=[EXPENSIVE])))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    for batch_id, start in enumerate(range(0, len(LINES), 10)):
        parser = make_parser(SCHEMA, sorted(ev.session.keywords), ev.session.selection_plan())
        table = pa.Table.from_batches(list(parser(iter([pa.RecordBatch.from_pydict({"value": LINES[start:start + 10]})]))))
        rows, stats = collect_ops(table)
        ev.apply_batch(batch_id, rows, selection_stats=stats, parsed_with_version=ev.session.plan_version)
    assert published(redis_client, 5) == reference(OPS)
    assert published(redis_client, 7) == filter_reference(OPS, expensive)
    assert [r.tuples for r in ev.session.engine.results(7)] == [(("Product", 1),), (("Product", 3),), (("Product", 4),)]


def test_a_query_with_neither_keywords_nor_predicates_is_reported(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5), query(6, keywords=())))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    metrics = ev.apply_batch(0, parsed(redis_client, LINES))
    assert "without keywords needs predicates" in metrics.state["stream"]["query_errors"]["6"]
    assert 6 not in ev.session.queries and published(redis_client, 5) == reference(OPS)


def aggregate(aid, **fields):
    return {"id": aid, "source": {"relation": "Product"}, "aggregate": "avg", "attribute": "price", "window": 10,
            "step": 5, **fields}


AGGREGATES = [aggregate(1), aggregate(2, window=6, step=4), aggregate(3, aggregate="count", attribute=None),
              aggregate(4, source={"query": 5}, aggregate="count", attribute=None, window=20, step=10)]


def plan_with_aggregates(version):
    return plan(version, query(5), aggregates=AGGREGATES)


def run_plan_values():
    """What ``run-plan`` emits for the same plan and ops."""
    from streaming.sharing.properties import SharingPlan
    from streaming.sharing.runner import PlanRun

    run = PlanRun(SharingPlan.model_validate({"schema": SCHEMA, "queries": [query(5)], "aggregates": AGGREGATES}))
    run.feed((i + 1, json.dumps(op)) for i, op in enumerate(OPS))
    return {aid: values for aid, values in run.values.items()}


def published_values(redis_client):
    from streaming.events import AggregateValue

    out = defaultdict(list)
    for value in stream_events(redis_client, AggregateValue):
        out[value.aggregate].append((value.window_end, value.value))
    return dict(out)


@pytest.mark.parametrize("cut", [None, 8, 17, 25])
def test_aggregate_values_equal_run_plan_across_restarts_exactly_once(redis_client, cut):
    bus.write_plan(redis_client, 1, plan_with_aggregates(1))
    rows = parsed(redis_client, LINES)
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    if cut is None:
        ev.apply_batch(0, rows[:12])
        ev.apply_batch(1, rows[12:])
    else:
        ev.apply_batch(0, rows[:cut])
        for row in rows[cut:cut + 4]:  # applied and persisted, then the process dies before publishing
            if row.op is not None:
                ev.session.apply_op(row)
            ev.session.applied_seq = row.seq
        ev._persist()
        restarted = GroupEvaluator(redis_client, 1)
        restarted.start()
        restarted.apply_batch(1, rows[cut - 2:])  # Spark replays from before the crash
    expected = {aid: values for aid, values in run_plan_values().items() if values}
    assert published_values(redis_client) == expected
    assert expected[1] and expected[4]  # the example has values to check


def test_an_edited_clock_guard_reaches_the_evaluator_at_its_next_batch(redis_client):
    """Ingest judged these ops by the guard it had; the evaluator judges them again by the plan's, with seqs."""
    jump = ins("Product", 1000, pid=7, title="texas dress", price=1.0)
    ops = OPS + [jump, ins("Order", 44, oid=10, cid=1, pid=6, note="")]
    lines = [stamp(i, json.dumps(op, separators=(",", ":"))) for i, op in enumerate(ops)]
    rows = parsed(redis_client, lines)
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    ev.apply_batch(0, rows[:20])
    guarded = plan(2, query(5), stream=plan_doc(2)["stream"] | {"clock": {"max_jump": 100.0}})
    bus.write_plan(redis_client, 1, guarded)
    ev.apply_batch(1, rows[20:])
    dead = stream_events(redis_client, DeadLetter)
    assert [(d.seq, d.reason) for d in dead[3:]] == [
        (len(OPS), "ts 1000 jumps 957 s past the stream clock 43 (at most 100 s: its max_clock_jump setting)")]
    expected, expected_live = reference(ops[:len(OPS)] + [{"op": "unknown"}] + ops[len(OPS) + 1:])
    assert published(redis_client, 5) == (expected, expected_live)
    assert ev.session.event_time == 44


def test_a_poison_op_is_a_dead_letter_with_its_reason_and_the_stream_goes_on(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    redis_client.hset(bus.Keys.stream_poison(2), "16", "poison op, set aside: it stalled the evaluator, 2 times in a row")
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    ev.apply_batch(0, parsed(redis_client, LINES))
    assert ev.session.applied_seq == ev.saved_seq == len(LINES) - 1 and ev.session.applying_seq is None and ev.progress_at is not None
    poisoned = [d for d in stream_events(redis_client, DeadLetter) if d.seq == 16]
    assert [(d.reason, d.line) for d in poisoned] == [
        ("poison op, set aside: it stalled the evaluator, 2 times in a row", LINES[16])]
    expected, expected_live = reference(OPS, keep=lambda op: op != parse_op(OPS[16], Schema.from_dict(SCHEMA)))
    assert published(redis_client, 5) == (expected, expected_live)
    assert 16 not in expected and reference(OPS)[0].get(16)  # applied, the op would have made results


def test_an_error_applying_an_op_names_that_op_before_it_ends_the_process(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    rows = parsed(redis_client, LINES[:5])
    # an insert without its values (the parser never makes one) reaches the engine: a bug, not a reject
    broken = replace(rows[3], op=rows[3].op._replace(values=None))
    with pytest.raises(Exception) as raised:
        ev.apply_batch(0, rows[:3] + [broken] + rows[4:], guarded=True)
    failed = json.loads(redis_client.get(bus.Keys.failed_op(1)))
    assert failed == {"seq": 3, "error": f"{type(raised.value).__name__}: {raised.value}"[:500]}
    assert ev.session.applying_seq is None and ev.saved_seq == -1  # nothing of the batch was saved


def test_a_guarded_replay_leaves_no_op_named_once_it_is_through(redis_client):
    bus.write_plan(redis_client, 1, plan(1, query(5)))
    ev = GroupEvaluator(redis_client, 1)
    ev.start()
    redis_client.set(bus.Keys.failed_op(1), json.dumps({"seq": 0, "error": "killed while applying it"}))
    ev.apply_batch(-1, parsed(redis_client, LINES), guarded=True)
    assert ev.saved_seq == len(LINES) - 1 and not redis_client.exists(bus.Keys.failed_op(1))
