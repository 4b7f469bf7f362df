"""Op parsing: shape, relation, types; every bad op is an OpRejected with a reason."""

import pytest

from streaming.ops import Op, OpRejected, op_to_dict, parse_op
from streaming.schema import Schema

SCHEMA = Schema.from_dict({
    "name": "s",
    "relations": [
        {"name": "Customer", "key": "cid", "attributes": {"cid": "int", "name": "text"}},
        {"name": "Order", "key": "oid", "attributes": {"oid": "int", "cid": "int", "note": "text"},
         "foreign_keys": [{"name": "cid", "column": "cid", "references": "Customer"}]},
    ],
})


def test_insert_line_is_normalised():
    op = parse_op('{"op":"insert","relation":"Order","tuple":{"oid":9,"cid":5.0},"ts":12}', SCHEMA)
    assert op == Op("insert", "Order", 9, {"oid": 9, "cid": 5, "note": None}, 12.0)


def test_delete_object():
    assert parse_op({"op": "delete", "relation": "Order", "key": 9, "ts": 1.5}, SCHEMA) == Op("delete", "Order", 9, None, 1.5)


def test_round_trip():
    op = parse_op({"op": "insert", "relation": "Customer", "tuple": {"cid": 1, "name": "Ann"}, "ts": 0}, SCHEMA)
    assert parse_op(op_to_dict(op), SCHEMA) == op


@pytest.mark.parametrize("line, reason", [
    ("{not json", "malformed JSON"),
    ("[1, 2]", "JSON object"),
    ('{"op":"upsert","relation":"Order","ts":1}', "op must be"),
    ('{"op":"insert","relation":"Order","ts":1}', "missing field 'tuple'"),
    ('{"op":"delete","relation":"Order","key":1,"ts":1,"x":2}', "unknown field 'x'"),
    ('{"op":"delete","relation":"Shipment","key":1,"ts":1}', "unknown relation 'Shipment'"),
    ('{"op":"delete","relation":"Order","key":"a","ts":1}', "expected int"),
    ('{"op":"delete","relation":"Order","key":null,"ts":1}', "key is required"),
    ('{"op":"insert","relation":"Order","tuple":{"oid":1,"zzz":1},"ts":1}', "unknown attribute 'zzz'"),
    ('{"op":"insert","relation":"Order","tuple":{"cid":1},"ts":1}', "key is required"),
    ('{"op":"insert","relation":"Order","tuple":{"oid":1},"ts":"now"}', "ts must be"),
    ('{"op":"insert","relation":"Order","tuple":{"oid":1},"ts":true}', "ts must be"),
    (b"\xff\xfe", "UTF-8"),
])
def test_rejections_name_the_reason(line, reason):
    with pytest.raises(OpRejected, match=reason):
        parse_op(line, SCHEMA)
