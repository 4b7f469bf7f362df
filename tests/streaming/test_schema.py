"""Schema documents: validation errors name the place; the graph keeps parallel FKs and self-references."""

from __future__ import annotations

import copy

import pytest

from streaming.schema import Schema, SchemaError, ValueRejected, coerce_value, load_schema
from streaming.workloads.tpch_schema import tpch_schema

from tests.examples import ECOMMERCE


def doc():
    return {
        "name": "s",
        "relations": [
            {"name": "P", "key": "id", "attributes": {"id": "int", "t": "text"}},
            {
                "name": "Q",
                "key": "id",
                "attributes": {"id": "int", "a": "int", "b": "int", "up": "int", "note": "text"},
                "foreign_keys": [
                    {"name": "a", "column": "a", "references": "P"},
                    {"name": "b", "column": "b", "references": "P"},
                    {"name": "up", "column": "up", "references": "Q"},
                ],
            },
        ],
    }


def test_parallel_and_self_references():
    schema = Schema.from_dict(doc())
    assert [(fk.holder, fk.target, fk.name) for fk in schema.foreign_keys] == [
        ("Q", "P", "a"),
        ("Q", "P", "b"),
        ("Q", "Q", "up"),
    ]
    assert sorted(fk.name for fk, other in schema.neighbours("P")) == ["a", "b"]
    # the self-reference appears once from each end
    assert [fk.name for fk, other in schema.neighbours("Q") if other == "Q"] == ["up", "up"]
    assert schema.relations["Q"].searchable == ("note",)
    assert Schema.from_dict(schema.to_dict()).to_dict() == schema.to_dict()


@pytest.mark.parametrize(
    "mutate,where",
    [
        (lambda d: d["relations"][1]["foreign_keys"][0].update(references="Nope"), "foreign_keys[0] 'a'.references"),
        (lambda d: d["relations"][1]["foreign_keys"][1].update(column="zz"), "foreign_keys[1] 'b'.column"),
        (lambda d: d["relations"][0].update(key="zz"), "relations[0] 'P'.key"),
        (lambda d: d["relations"][0].pop("key"), "relations[0] 'P'.key"),
        (lambda d: d["relations"][1].update(name="P"), "relations[1] 'P': duplicate"),
        (lambda d: d["relations"][1]["attributes"].update(a="text"), "Q.a is text but P.id is int"),
        (lambda d: d["relations"][1]["foreign_keys"].append(
            {"name": "a", "column": "b", "references": "P"}), "duplicate foreign key"),
        (lambda d: d["relations"][0]["attributes"].update(t="string"), "unknown type 'string'"),
        (lambda d: d.update(relations=[]), "schema.relations"),
    ],
)
def test_errors_name_the_place(mutate, where):
    d = copy.deepcopy(doc())
    mutate(d)
    with pytest.raises(SchemaError) as err:
        Schema.from_dict(d)
    assert where in str(err.value)


def test_load_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SchemaError, match="bad.json: schema: not JSON"):
        load_schema(bad)
    with pytest.raises(SchemaError, match="missing.json"):
        load_schema(tmp_path / "missing.json")


def test_example_and_tpch():
    ecommerce = load_schema(ECOMMERCE)
    assert list(ecommerce.relations) == ["Customer", "Product", "Order", "Group"]
    tpch = tpch_schema()
    assert len(tpch.relations) == 8 and len(tpch.foreign_keys) == 8
    assert {(fk.holder, fk.target) for fk in tpch.foreign_keys} >= {("lineitem", "partsupp"), ("lineitem", "orders")}


def test_tuple_validation():
    q = Schema.from_dict(doc()).relations["Q"]
    assert q.validate_tuple({"id": 1, "a": 2.0})["a"] == 2
    with pytest.raises(ValueRejected, match="unknown attribute"):
        q.validate_tuple({"id": 1, "zz": 1})
    with pytest.raises(ValueRejected, match="key is required"):
        q.validate_tuple({"a": 1})
    with pytest.raises(ValueRejected, match="expected int"):
        q.validate_tuple({"id": True})
    assert coerce_value("1970-01-01T00:00:10", "timestamp", "x") == 10.0
    with pytest.raises(ValueRejected):
        coerce_value(float("nan"), "float", "x")
    assert coerce_value(2**63 - 1, "int", "x") == 2**63 - 1 and coerce_value(-(2**63), "int", "x") == -(2**63)
    with pytest.raises(ValueRejected, match="expected a 64-bit int"):
        coerce_value(2**63, "int", "x")
    with pytest.raises(ValueRejected, match="expected a 64-bit int"):
        coerce_value(-1e19, "int", "x")
