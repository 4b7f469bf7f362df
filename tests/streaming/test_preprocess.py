"""The pre-processed (derived) stream: an evaluator reading it publishes what one reading the raw stream does."""

from __future__ import annotations

import json

import pytest

from streaming import bus
from streaming.evaluator import GroupEvaluator
from streaming.events import DeadLetter
from streaming.preprocess import Preprocessor, StreamNeeds, decode_record, derived_ops
from streaming.schema import Schema
from streaming.session import StreamSession
from streaming.sharing.properties import EvaluatorPlan
from streaming.sources import stamp

from .test_evaluator import (EXPENSIVE, LINES, OPS, SCHEMA, TEXAN, aggregate, expensive, filter_reference, parsed, plan,
                             published, query, reference)

SHOP = Schema.from_dict(SCHEMA)

pytestmark = pytest.mark.redis

CHEAP = {"relation": "Product", "attribute": "price", "op": "<", "value": 20}


def needs_of(evaluator_plan: EvaluatorPlan):
    return StreamNeeds.of_plan(evaluator_plan)


def run_raw(redis_client, plans, qids):
    """plans: [(first line index, plan)]; the published change streams of ``qids``."""
    ev = GroupEvaluator(redis_client, 1)
    for batch_id, (start, doc) in enumerate(plans):
        end = plans[batch_id + 1][0] if batch_id + 1 < len(plans) else len(LINES)
        bus.write_plan(redis_client, 1, doc)
        if batch_id == 0:
            ev.start()
        ev.apply_batch(batch_id, parsed(redis_client, LINES[start:end]))
    return {q: published(redis_client, q) for q in qids}


def run_derived(redis_client, plans, qids):
    pre = Preprocessor(Schema.from_dict(SCHEMA), needs_of(plans[0][1]))
    vocabularies = {}
    records = []
    for i, (start, doc) in enumerate(plans):
        if i:
            pre.follow(needs_of(doc))
        vocabularies[pre.needs.version] = pre.needs.vocabulary
        end = plans[i + 1][0] if i + 1 < len(plans) else len(LINES)
        records += [pre.derive(line) for line in LINES[start:end]]
    ev = GroupEvaluator(redis_client, 1)
    for batch_id, (start, doc) in enumerate(plans):
        end = plans[batch_id + 1][0] if batch_id + 1 < len(plans) else len(LINES)
        bus.write_plan(redis_client, 1, doc)
        if batch_id == 0:
            ev.start()
        ev.apply_batch(batch_id, derived_ops(records[start:end], vocabularies, SHOP), parsed_with_version=doc.version)
    return {q: published(redis_client, q) for q in qids}, records


def test_derived_stream_gives_the_raw_change_streams_and_drops_what_no_query_uses(redis_client):
    doc = plan(1, query(7, keywords=(), predicates=[EXPENSIVE]),
               query(8, keywords=(), window=5.0, predicates=[EXPENSIVE, TEXAN]))
    raw = run_raw(redis_client, [(0, doc)], (7, 8))
    redis_client.flushdb()
    derived, records = run_derived(redis_client, [(0, doc)], (7, 8))
    assert derived == raw
    assert raw[7] == filter_reference(OPS, expensive)
    kinds = [decode_record(r, {1: ()}, SHOP).kind for r in records]
    # only Products (and Customers of query 8's relations) are kept; Orders and Groups become ticks
    assert kinds.count("insert") < len(OPS) // 2 and "tick" in kinds
    assert sum(map(len, records)) < sum(map(len, LINES))


def test_deletes_reach_consumers_exactly_when_their_insert_was_kept(redis_client):
    doc = plan(1, query(5, keywords=("dress", "texas"), predicates=[CHEAP]))
    lines = LINES
    pre = Preprocessor(Schema.from_dict(SCHEMA), needs_of(doc))
    kinds = {}
    for line in lines:
        r = decode_record(pre.derive(line), {1: ("dress", "texas")}, SHOP)
        kinds[r.seq] = r.kind
    # Order 1 was inserted (kept: Orders are unrestricted) and its delete is forwarded;
    # Group 1's delete too; Customer 3's delete as well: only Products are selected
    assert kinds[21] == "delete" and kinds[18] == "delete" and kinds[27] == "delete"
    raw = run_raw(redis_client, [(0, doc)], (5,))
    redis_client.flushdb()
    derived, _ = run_derived(redis_client, [(0, doc)], (5,))
    assert derived == raw


def test_a_joining_query_widens_at_once_and_no_record_is_misread(redis_client):
    """v1: "dress" over expensive Products; v2 (at line 14) adds "dress texas" over every Product.

    The vocabularies differ ("dress" is bit 0 in v1, bit 1 in v2 after "black"), so a record decoded
    with the wrong version's vocabulary would give other hits and other results.
    """
    price = {"relation": "Product", "attribute": "price", "op": ">=", "value": 40}
    v1 = plan(1, query(5, keywords=("dress",), predicates=[price]))
    v2 = plan(2, query(5, keywords=("dress",), predicates=[price]), query(6, keywords=("beach", "texas")))
    plans = [(0, v1), (14, v2)]
    raw = run_raw(redis_client, plans, (5, 6))
    redis_client.flushdb()
    derived, records = run_derived(redis_client, plans, (5, 6))
    assert derived[5] == raw[5]
    assert {decode_record(r, {1: ("dress",), 2: ("beach", "dress", "texas")}, SHOP).version for r in records} == {1, 2}
    with pytest.raises(KeyError):  # a version the consumer was not told of is refused, never guessed
        decode_record(records[-1], {1: ("dress",)}, SHOP)
    # query 6 joined at line 14: it sees the Products dropped under v1 only from its join on
    kept_before = {(op["relation"], op["tuple"]["pid"]) for op in OPS[:14]
                   if op["op"] == "insert" and op["relation"] == "Product" and op["tuple"]["price"] < 40}

    def keep(op):
        return (op.relation, op.key) not in kept_before

    _, expected_live = reference(OPS, keywords=("beach", "texas"), keep=keep)
    assert derived[6][1] == expected_live and expected_live


def test_a_leaving_query_narrows_at_once_and_the_others_lose_nothing(redis_client):
    """v1: "dress" over expensive Products and "beach texas" over every Product; v2 (at line 14):
    "beach texas" has left, so cheap Products are dropped from then on, while the ones forwarded
    before are still deleted downstream."""
    price = {"relation": "Product", "attribute": "price", "op": ">=", "value": 40}
    v1 = plan(1, query(5, keywords=("dress",), predicates=[price]), query(6, keywords=("beach", "texas")))
    v2 = plan(2, query(5, keywords=("dress",), predicates=[price]))
    plans = [(0, v1), (14, v2)]
    raw = run_raw(redis_client, plans, (5,))
    redis_client.flushdb()
    derived, records = run_derived(redis_client, plans, (5,))
    assert derived[5] == raw[5] and raw[5][0]
    vocabularies = {1: ("beach", "dress", "texas"), 2: ("dress",)}
    decoded = [decode_record(r, vocabularies, SHOP) for r in records]
    cheap = [i for i, op in enumerate(OPS) if op["op"] == "insert" and op["relation"] == "Product"
             and op["tuple"]["price"] < 40]
    assert any(i < 14 for i in cheap) and any(i >= 14 for i in cheap)
    assert all(decoded[i].kind == ("insert" if i < 14 else "tick") for i in cheap)
    # a cheap Product forwarded under v1 is deleted downstream under v2; one dropped under v2 is a tick both ways
    pre = Preprocessor(SHOP, needs_of(v1))
    hat = {"pid": 2, "title": "Sun hat", "price": 15.0}
    lines = [(0, {"op": "insert", "relation": "Product", "tuple": hat, "ts": 0}),
             (1, {"op": "insert", "relation": "Product", "tuple": {**hat, "pid": 7}, "ts": 1}),
             (2, {"op": "delete", "relation": "Product", "key": 2, "ts": 2}),
             (3, {"op": "delete", "relation": "Product", "key": 7, "ts": 3})]
    kinds = []
    for seq, op in lines:
        if seq == 1:
            pre.follow(needs_of(v2))
        kinds.append(decode_record(pre.derive(stamp(seq, json.dumps(op))), vocabularies, SHOP).kind)
    assert kinds == ["insert", "tick", "delete", "tick"]



def test_an_aggregate_over_a_relation_keeps_its_inserts():
    """A relation only an aggregate subscription reads is not dropped: its inserts are what it counts."""
    cheap_filter = plan(1, query(7, keywords=(), predicates=[CHEAP]))
    with_aggregate = plan(1, query(7, keywords=(), predicates=[CHEAP]),
                          aggregates=[aggregate(1, aggregate="count", attribute=None)])
    dear = {"pid": 9, "title": "silk scarf", "price": 500.0}
    assert not needs_of(cheap_filter).admits("Product", dear)
    assert needs_of(with_aggregate).admits("Product", dear)


def test_a_derived_insert_the_engine_refuses_is_a_dead_letter_with_its_stored_line():
    doc = plan(1, query(5))
    pre = Preprocessor(SHOP, needs_of(doc))
    first = stamp(0, '{"op":"insert","relation":"Product","tuple":{"pid":1,"title":"Summer dress","price":40.0},"ts":3.0}')
    again = stamp(1, '{"op":"insert","relation":"Product","tuple":{"pid":1,"title":"Sun hat","price":15.0},"ts":4.0}')
    rows = derived_ops([pre.derive(first), pre.derive(again)], {1: pre.needs.vocabulary}, SHOP)
    assert [row.line for row in rows] == [None, None]  # no line is made for an op that is applied
    session = StreamSession()
    session.adopt(doc)
    (letter,) = session.apply(rows, parsed_with_version=1).events
    assert isinstance(letter, DeadLetter) and letter.seq == 1 and letter.line == again
    assert session.stored == {("Product", 1): (0, 3.0, {"pid": 1, "title": "Summer dress", "price": 40.0})}
