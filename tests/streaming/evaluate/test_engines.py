"""Targeted cases for the three evaluators: self-loops, parallel FKs, static state equals dynamic state."""

from __future__ import annotations

import pytest

from streaming.engine import KeywordEngine
from streaming.evaluate.dynamic import DynamicEvaluator
from streaming.evaluate.static import evaluate_static
from streaming.ops import Op, OpRejected
from streaming.schema import Schema
from tests.streaming.bruteforce import enumerate_results

ENGINES = ["dynamic", "static-dynamic", "mesh"]

SELF = Schema.from_dict({"name": "self", "relations": [
    {"name": "R", "key": "id", "attributes": {"id": "int", "t": "text", "up": "int"},
     "foreign_keys": [{"name": "up", "column": "up", "references": "R"}]}]})

PARALLEL = Schema.from_dict({"name": "par", "relations": [
    {"name": "P", "key": "id", "attributes": {"id": "int", "t": "text"}},
    {"name": "G", "key": "id", "attributes": {"id": "int", "a": "int", "b": "int", "t": "text"},
     "foreign_keys": [{"name": "a", "column": "a", "references": "P"},
                      {"name": "b", "column": "b", "references": "P"}]}]})


def ins(rel, ts, **values):
    key = values["id"]
    return Op("insert", rel, key, values, float(ts))


def keys(results):
    return {(r.tuples, r.edges) for r in results}


def run(schema, keywords, tmax, ops, engine):
    eng = KeywordEngine(schema, keywords, tmax, None, engine)
    if engine == "static-dynamic":
        eng.load(ops)
    else:
        for op in ops:
            eng.apply(op)
    return eng


@pytest.mark.parametrize("engine", ENGINES)
def test_self_loop_tuple_is_never_bound_twice(engine):
    # s references itself; x and y reference s. The CN R{x} -> R{} -> R{} <- R{y}
    # would bind s twice: only the size-3 tree x -> s <- y is a result.
    ops = [ins("R", 0, id=1, t="", up=1), ins("R", 1, id=2, t="x", up=1), ins("R", 2, id=3, t="y", up=1)]
    eng = run(SELF, "x y", 4, ops, engine)
    want = enumerate_results(SELF, ["x", "y"], 4, {("R", op.key): op.values for op in ops})
    assert keys(eng.snapshot()) == want
    assert len(want) == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_parallel_fks_are_different_results(engine):
    ops = [ins("P", 0, id=1, t="x"), ins("P", 1, id=2, t="y"), ins("G", 2, id=1, a=1, b=2, t=""),
           ins("G", 3, id=2, a=2, b=1, t=""), ins("G", 4, id=3, a=1, b=1, t="y")]
    eng = run(PARALLEL, "x y", 3, ops, engine)
    want = enumerate_results(PARALLEL, ["x", "y"], 3, {(op.relation, op.key): op.values for op in ops})
    assert keys(eng.snapshot()) == want
    assert len(want) == 4  # G1 via (a,b), G2 via (b,a), G3{y} -> P1{x} via a and via b


@pytest.mark.parametrize("engine", ENGINES)
def test_delete_removes_every_result_of_the_tuple_and_fk_target_joins_later(engine):
    eng = KeywordEngine(PARALLEL, "x y", 3, None, engine)
    assert eng.apply(ins("G", 0, id=1, a=1, b=2, t="")) == []
    assert eng.apply(ins("P", 1, id=1, t="x")) == []
    added = eng.apply(ins("P", 2, id=2, t="y"))
    assert [c.type for c in added] == ["add"]
    removed = eng.apply(Op("delete", "G", 1, None, 3.0))
    assert [c.type for c in removed] == ["remove"] and eng.snapshot() == []


def test_static_state_equals_dynamic_state():
    ops = [ins("R", i, id=i, t=["x", "", "y", "", "x y"][i % 5], up=(i * 7) % 6) for i in range(12)]
    dyn = run(SELF, "x y", 4, ops, "dynamic")
    fresh = DynamicEvaluator(dyn.plan, dyn.store)
    evaluate_static(fresh)
    assert fresh.sub == dyn.evaluator.sub
    assert fresh.missing == dyn.evaluator.missing
    assert keys(fresh.snapshot()) == keys(dyn.snapshot())


def test_every_evaluator_a_stream_engine_drives_is_one_and_static_dynamic_loads_in_bulk():
    from streaming.evaluate.filtering import FilterEngine
    from streaming.evaluate.protocol import BulkEvaluator, Evaluator
    from streaming.query_alone import verdict_store

    ops = [ins("R", i, id=i, t=["x", "", "y", "", "x y"][i % 5], up=(i * 7) % 6) for i in range(12)]
    engines = {engine: KeywordEngine(SELF, "x y", 4, None, engine) for engine in ENGINES}
    for engine in (*engines.values(), FilterEngine(SELF, ["R"], None), verdict_store(SELF, None)):
        assert isinstance(engine.evaluator, Evaluator)
    assert isinstance(engines["dynamic"].evaluator, BulkEvaluator)
    assert not isinstance(engines["mesh"].evaluator, BulkEvaluator)
    assert [name for name, engine in engines.items() if engine.bulk_evaluator is not None] == ["static-dynamic"]
    bulk = engines["static-dynamic"]
    bulk.load(ops)
    assert bulk.evaluator.stats()["subrelation_tuples"] > 0
    assert keys(bulk.snapshot()) == keys(run(SELF, "x y", 4, ops, "dynamic").snapshot())


def test_mesh_joins_in_initcngen_preorder_and_shares_prefixes():
    from streaming.evaluate.mesh import left_deep_order

    # C{0b01} - O{} - P{0b10}, plus a free G hanging off P: pre-order from the keyword-0 node
    labels = [("O", 0), ("C", 1), ("P", 2), ("G", 0)]
    edges = [(0, 1, "cid", "cid"), (0, 2, "pid", "pid"), (3, 2, "pid", "pid")]
    assert left_deep_order(labels, edges) == [1, 0, 2, 3]
    eng = KeywordEngine(PARALLEL, "x y", 4, None, "mesh")
    total_steps = sum(eng.plan.node_size[r] for r in eng.plan.roots)
    assert len(eng.evaluator.operators) < total_steps


def test_load_rejects_without_callback_raise_and_keep_what_was_loaded():
    eng = KeywordEngine(PARALLEL, "x y", 3, None, "static-dynamic")
    ops = [ins("P", 0, id=1, t="x y"), ins("P", 1, id=1, t="x"), ins("P", 2, id=2, t="y")]
    with pytest.raises(OpRejected, match="already live"):
        eng.load(ops)
    assert [r.tuples for r in eng.snapshot()] == [(("P", 1),)]
    assert eng.tuple_values("P", 1) == {"id": 1, "t": "x y"}
    assert eng.tuple_values("P", 2) is None
    with pytest.raises(RuntimeError):
        eng.load(ops)


def test_stats_describe_lattice_tuples_and_lists():
    eng = run(PARALLEL, "x y", 3, [ins("P", 0, id=1, t="x"), ins("G", 1, id=1, a=1, b=None, t="y")], "dynamic")
    stats = eng.stats()
    assert stats["lattice_nodes"] == eng.plan.size and stats["live_results"] == 1
    assert stats["live_tuples"] == {"P": 1, "G": 1}
    assert stats["live_tuples_by_subrelation"] == {"G{y}": 1, "P{x}": 1}
    assert stats["rlist"] + stats["wlist"] + stats["slist"] == eng.plan.size


@pytest.mark.parametrize("bad", [Op("upsert", "P", 1, None, 1.0), Op("delete", "Nope", 1, None, 1.0),
                                 Op("insert", "P", 1, {"id": 1, "t": "x"}, 0.5)])
def test_apply_rejects_without_touching_state(bad):
    eng = KeywordEngine(PARALLEL, "x y", 3, 10.0, "dynamic")
    eng.apply(ins("P", 1, id=1, t="x y"))
    before = (eng.snapshot(), eng.store.counts(), eng.last_ts, eng.applied)
    with pytest.raises(OpRejected):
        eng.apply(bad)
    assert (eng.snapshot(), eng.store.counts(), eng.last_ts, eng.applied) == before
    assert eng.rejected == 1


def test_insert_of_a_key_expiring_at_that_time_replaces_it():
    eng = KeywordEngine(PARALLEL, "x y", 3, 10.0, "dynamic")
    eng.apply(ins("P", 0, id=1, t="x y"))
    changes = eng.apply(ins("P", 10, id=1, t="x y"))
    assert [c.type for c in changes] == ["remove", "add"]
    with pytest.raises(OpRejected, match="no live tuple"):
        eng.apply(Op("delete", "P", 1, None, 20.0))
