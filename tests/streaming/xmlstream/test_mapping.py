"""Items mapped to relation tuples: nested repeating elements become a child relation with a foreign key,
and a keyword query runs on the mapped ops unchanged."""

from __future__ import annotations

import json

import pytest
from lxml import etree

from streaming.cli import main
from streaming.xmlstream.dtd import StreamDTD
from streaming.xmlstream.items import parse_items
from streaming.xmlstream.mapping import ItemMapper, ItemMapping, MappingError

ORDERS_DTD = """<!ELEMENT orders (order*)>
<!ELEMENT order (id, customer, state, placed, lines)>
<!ELEMENT id (#PCDATA)>
<!ELEMENT customer (#PCDATA)>
<!ELEMENT state (#PCDATA)>
<!ELEMENT placed (#PCDATA)>
<!ELEMENT lines (line*)>
<!ELEMENT line (product, qty)>
<!ELEMENT product (#PCDATA)>
<!ELEMENT qty (#PCDATA)>
"""
MAPPING = {
    "time": "placed",
    "relations": [
        {"name": "Order", "path": "", "key": "oid",
         "attributes": {"oid": {"path": "id", "type": "int"}, "customer": {"path": "customer"},
                        "state": {"path": "state"}}},
        {"name": "Line", "path": "lines/line", "key": "lid", "parent": "Order", "foreign_key": "oid",
         "attributes": {"product": {"path": "product"}, "qty": {"path": "qty", "type": "int"}}},
    ],
}
DTD = StreamDTD.from_text(ORDERS_DTD)


def order(oid: int, state: str, placed: float, *lines: tuple[str, int]) -> str:
    body = "".join(f"<line><product>{p}</product><qty>{q}</qty></line>" for p, q in lines)
    return (f"<order><id>{oid}</id><customer>c{oid}</customer><state>{state}</state><placed>{placed}</placed>"
            f"<lines>{body}</lines></order>")


def test_schema_has_a_child_relation_with_a_foreign_key():
    schema = ItemMapping.model_validate(MAPPING).schema("orders")
    line = schema["relations"][1]
    assert line["attributes"] == {"lid": "int", "product": "text", "qty": "int", "oid": "int"}
    assert line["foreign_keys"] == [{"name": "oid", "column": "oid", "references": "Order"}]


def test_ops_parents_first_with_generated_child_keys():
    mapper = ItemMapper(ItemMapping.model_validate(MAPPING), DTD, next_keys={"Line": 10})
    item = etree.fromstring(order(7, "texas", 3.5, ("red dress", 2), ("hat", 1)))
    ops = mapper.ops(item, arrival=99.0)
    assert ops == [
        {"op": "insert", "relation": "Order", "tuple": {"oid": 7, "customer": "c7", "state": "texas"}, "ts": 3.5},
        {"op": "insert", "relation": "Line", "tuple": {"product": "red dress", "qty": 2, "lid": 10, "oid": 7}, "ts": 3.5},
        {"op": "insert", "relation": "Line", "tuple": {"product": "hat", "qty": 1, "lid": 11, "oid": 7}, "ts": 3.5},
    ]
    assert mapper.next_keys == {"Line": 12}


def test_a_bad_value_names_the_place():
    mapper = ItemMapper(ItemMapping.model_validate(MAPPING), DTD)
    with pytest.raises(MappingError, match=r"Line.qty \(qty\): 'two' is not a int"):
        mapper.ops(etree.fromstring(order(1, "ohio", 1.0, ("hat", "two"))), 0.0)


@pytest.mark.parametrize("change,words", [
    ({"time": "lines"}, "not an element holding text"),
    ({"relations": [{"name": "Line", "path": "lines/line", "key": "lid", "attributes": {}}]}, "needs a parent"),
    ({"relations": [MAPPING["relations"][0], {**MAPPING["relations"][1], "parent": "Nope"}]}, "unknown relation"),
    ({"relations": [MAPPING["relations"][0], {**MAPPING["relations"][1], "foreign_key": "qty",
                                               }]}, "already an attribute"),
])
def test_mapping_checked_against_the_dtd(change, words):
    with pytest.raises(MappingError, match=words):
        ItemMapping.model_validate({**MAPPING, **change}).check(DTD)


def test_keyword_query_runs_on_mapped_items(tmp_path, capsys):
    body = "<orders>" + "".join([
        order(1, "ohio", 1.0, ("red dress", 1)),
        order(2, "texas", 2.0, ("hat", 1), ("blue dress", 3)),
        order(3, "texas", 3.0, ("shoes", 2)),
    ]) + "</orders>"
    mapping = ItemMapping.model_validate(MAPPING)
    mapper = ItemMapper(mapping, DTD)
    parsed = parse_items(body, DTD)
    ops = [op for item in parsed.items for op in mapper.ops(item.element, arrival=0.0)]
    (tmp_path / "schema.json").write_text(json.dumps(mapping.schema("orders")))
    (tmp_path / "ops.ndjson").write_text("\n".join(json.dumps(op) for op in ops) + "\n")
    out = tmp_path / "events.ndjson"
    assert main(["run", "--schema", str(tmp_path / "schema.json"), "--keywords", "dress texas", "--tmax", "2",
                 "--ops", str(tmp_path / "ops.ndjson"), "--out", str(out)]) == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(e["type"], sorted(map(tuple, e["tuples"]))) for e in events] == [
        ("add", [("Line", 2), ("Order", 2)])]
