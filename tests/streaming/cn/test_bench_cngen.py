"""The CN-generation benchmark's schema generator and one measured point."""

from __future__ import annotations

from streaming.bench.cngen import measure_point, tree_schema


def test_tree_schema_is_a_tree_with_bounded_degree():
    schema = tree_schema(25, seed=3)
    assert len(schema.relations) == 25 and len(schema.foreign_keys) == 24
    degree = {name: len(schema.neighbours(name)) for name in schema.relations}
    assert max(degree.values()) <= 4
    # connected: walk from R0
    seen, stack = {"R0"}, ["R0"]
    while stack:
        for _, other in schema.neighbours(stack.pop()):
            if other not in seen:
                seen.add(other)
                stack.append(other)
    assert len(seen) == 25
    assert tree_schema(25, seed=3).to_dict() == schema.to_dict()


def test_extra_edges():
    assert len(tree_schema(15, extra_edges=6, seed=1).foreign_keys) == 20


def test_measure_point_checks_agreement():
    point = measure_point(tree_schema(8, seed=2), 2, 4, repeat=1, baseline=True)
    assert point["cns"] > 0 and point["initntgen_s"] >= 0
    assert {"initcngen_s", "initcngen_eager_s", "speedup", "speedup_warm", "speedup_nodes", "speedup_objects"} <= set(point)
    assert point["lattice_nodes"] >= point["cns"]
