"""The layered schema drawing: placement and routing invariants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwmonitor.dashboard.schema_graph import draw_schema
from streaming.schema import Schema

DEMO = Path(__file__).resolve().parents[3] / "kwmonitor" / "streams" / "demo" / "schema.json"


def schema(*relations: dict) -> Schema:
    return Schema.from_dict({"name": "s", "relations": list(relations)})


def rel(name: str, *fks: tuple[str, str]) -> dict:
    attributes = {"id": "int", "label": "text", **{column: "int" for column, _ in fks}}
    return {
        "name": name, "key": "id", "attributes": attributes,
        "foreign_keys": [{"name": column, "column": column, "references": target} for column, target in fks],
    }


def overlaps(a, b) -> bool:
    return a.x < b.x + b.width and b.x < a.x + a.width and a.y < b.y + b.height and b.y < a.y + a.height


def test_referenced_relations_sit_above_their_holders():
    drawing = draw_schema(Schema.from_dict(json.loads(DEMO.read_text())))
    boxes = {b.name: b for b in drawing.boxes}
    for holder, target in [("Order", "Customer"), ("Order", "Product"), ("Group", "Product")]:
        assert boxes[target].y + boxes[target].height < boxes[holder].y
    assert len(drawing.arrows) == 4


def test_parallel_foreign_keys_get_distinct_paths_and_labels():
    drawing = draw_schema(schema(rel("P"), rel("G", ("a", "P"), ("b", "P"))))
    a, b = drawing.arrows
    assert a.d != b.d and (a.label_x, a.label_y) != (b.label_x, b.label_y)


@pytest.mark.parametrize(
    "relations",
    [
        [rel("A", ("parent", "A"))],  # self-reference
        [rel("A", ("b", "B")), rel("B", ("c", "C")), rel("C", ("a", "A"))],  # a cycle
        [rel(f"R{i}", *((f"f{j}", f"R{j}") for j in range(i))) for i in range(6)],  # dense DAG
    ],
)
def test_any_schema_is_drawn_inside_the_canvas_without_overlapping_boxes(relations):
    drawing = draw_schema(schema(*relations))
    assert len(drawing.boxes) == len(relations)
    assert len(drawing.arrows) == sum(len(r["foreign_keys"]) for r in relations)
    for box in drawing.boxes:
        assert 0 <= box.x and box.x + box.width <= drawing.width
        assert 0 <= box.y and box.y + box.height <= drawing.height
        assert all(not overlaps(box, other) for other in drawing.boxes if other is not box)
