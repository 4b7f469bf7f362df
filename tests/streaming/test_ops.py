"""Op parsing: shape, relation, types; every bad op is an OpRejected with a reason."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.ops import Op, OpDecoder, OpRejected, op_to_dict, parse_op
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


# every type, with a timestamp relation (the fast decoder leaves those to the general checks)
TYPED = Schema.from_dict({"name": "typed", "relations": [
    {"name": "Item", "key": "id", "attributes": {"id": "int", "price": "float", "t": "text", "ok": "bool"}},
    {"name": "Tag", "key": "name", "attributes": {"name": "text", "at": "timestamp"}},
]})
JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                        st.sampled_from([1.0, -0.0, 1e308, 2**63, 2**63 - 1, -(2**63) - 1, -(2**63)]),
                        st.text(max_size=5), st.sampled_from(["2024-01-01T00:00:00", "x"]))


VALID = {"id": st.integers(-2**63, 2**63 - 1), "price": st.one_of(st.none(), st.integers(-10, 10), st.floats(allow_nan=False, allow_infinity=False)),
         "t": st.one_of(st.none(), st.text(max_size=5)), "ok": st.one_of(st.none(), st.booleans())}


@st.composite
def op_objects(draw) -> dict:
    """A right op of Item, then a few random changes: any field missing, unknown, or of any JSON type."""
    if draw(st.booleans()):
        tuple_ = {a: draw(v) for a, v in VALID.items() if a == "id" or draw(st.booleans())}
        obj = {"op": "insert", "relation": "Item", "tuple": tuple_, "ts": draw(st.integers(0, 10**9))}
    else:
        obj = {"op": "delete", "relation": "Item", "key": draw(VALID["id"]), "ts": draw(st.floats(0, 1e9))}
    for _ in range(draw(st.integers(0, 2))):
        field = draw(st.sampled_from(["op", "relation", "ts", "key", "tuple", "extra", "id", "price", "t", "ok",
                                      "name", "at", "zzz"]))
        change = draw(st.sampled_from(["drop", "set"]))
        inside = field in ("id", "price", "t", "ok", "name", "at", "zzz") and isinstance(obj.get("tuple"), dict)
        target = obj["tuple"] if inside else obj
        if change == "drop":
            target.pop(field, None)
        elif field == "relation":
            target[field] = draw(st.sampled_from(["Item", "Tag", "Nope", 3]))
        elif field == "op":
            target[field] = draw(st.sampled_from(["insert", "delete", "upsert", None]))
        else:
            target[field] = draw(JSON_VALUES)
    return obj


def typed(op: Op) -> tuple:
    """An op with the type of every value (1 and 1.0 are equal, but not the same value here)."""
    values = None if op.values is None else [(k, type(v), v) for k, v in op.values.items()]
    return (op.kind, op.relation, type(op.key), op.key, values, type(op.ts), op.ts)


@settings(max_examples=500, deadline=None)
@given(obj=op_objects())
def test_the_fast_decoder_takes_only_what_the_checks_take_and_gives_the_same_op(obj):
    line = json.dumps(obj)
    try:
        expected = typed(parse_op(json.loads(line), TYPED))
    except OpRejected:
        expected = None
    fast = OpDecoder(TYPED).decode(line)
    assert fast is None or typed(fast) == expected
    try:
        assert typed(parse_op(line, TYPED)) == expected
    except OpRejected:
        assert expected is None
