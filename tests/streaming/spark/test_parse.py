"""The executor stage without Spark: Arrow in, Arrow out, back to the same ParsedOp the driver would make."""

import pyarrow as pa

from streaming.workloads.ecommerce import SCHEMA_DOC as SHOP_SCHEMA
from streaming.parsed import parse_stored_line
from streaming.schema import Schema
from streaming.sources import stamp
from streaming.spark.parse import PARSED_ARROW, collect_ops, make_parser

LINES = [
    stamp(0, '{"op":"insert","relation":"Customer","tuple":{"cid":1,"name":"Ann","state":"Texas"},"ts":0}'),
    stamp(1, '{"op":"insert","relation":"Product","tuple":{"pid":"x"},"ts":1}'),
    stamp(2, '{"op":"delete","relation":"Order","key":4,"ts":2}'),
    '{"op":"insert"}',
    "",
    stamp(3, '{"op":"insert","relation":"Product","tuple":{"pid":2,"title":"Summer DRESS","price":40},"ts":3}'),
]


def test_arrow_stage_round_trips_to_the_driver_parse():
    parser = make_parser(SHOP_SCHEMA, ["texas", "dress", "hat"])
    batches = list(parser(iter([pa.RecordBatch.from_pydict({"value": LINES[:3]}),
                                pa.RecordBatch.from_pydict({"value": LINES[3:]})])))
    assert all(b.schema == PARSED_ARROW for b in batches)
    got, stats = collect_ops(pa.Table.from_batches(batches))
    assert stats == []
    schema = Schema.from_dict(SHOP_SCHEMA)
    expected = [parse_stored_line(line, schema, frozenset({"texas", "dress", "hat"})) for line in LINES if line]
    assert got == expected
    assert [p.hits for p in got] == [("texas",), (), (), (), ("dress",)]
    assert got[1].reason == "Product.pid: expected int, got 'x'" and got[3].seq is None
    assert got[4].op.values == {"pid": 2, "title": "Summer DRESS", "price": 40.0}


def test_selection_constructs_run_on_the_inserts_of_covered_relations():
    from streaming.asc_selection import GroupSelection

    schema = Schema.from_dict(SHOP_SCHEMA)
    price = {"relation": "Product", "attribute": "price", "op": ">=", "value": 40}
    selection = GroupSelection(schema, {0: [price], 1: []}, kind="macro", period=2)
    lines = LINES + [stamp(4, '{"op":"insert","relation":"Product","tuple":{"pid":3,"title":"hat","price":12.5},"ts":4}'),
                     stamp(5, '{"op":"insert","relation":"Product","tuple":{"pid":4,"title":"cap"},"ts":5}')]
    parser = make_parser(SHOP_SCHEMA, ["dress"], selection.executor_plan())
    got, stats = collect_ops(pa.Table.from_batches(list(parser(iter([pa.RecordBatch.from_pydict({"value": lines})])))))
    by_seq = {p.seq: p.queries for p in got}
    assert by_seq[0] is None and by_seq[2] is None  # Customer has no predicates; deletes are not selected
    # bitmaps over the plan's queries (bit 0: the price predicate, bit 1: none); a null price fails it
    assert (by_seq[3], by_seq[4], by_seq[5]) == (0b11, 0b10, 0b10)
    assert [(rel, s["tuples"], s["dropped"]) for rel, s in stats] == [("Product", 3, 0)]
