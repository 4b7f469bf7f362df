"""Workload generators: the synthetic stream follows Table 3; every stream is valid for its schema."""

from __future__ import annotations

import json

import pytest

from streaming.cli import main as cli_main
from streaming.engine import KeywordEngine
from streaming.ops import op_to_dict, parse_op
from streaming.workloads import dblp, ecommerce, synthetic, tpch


def test_synthetic_schema_is_a_tree_of_degree_at_most_four():
    schema = synthetic.build(relations=25, seconds=0, seed=3).schema()
    assert len(schema.relations) == 25 and len(schema.foreign_keys) == 24
    degree = {name: len(schema.neighbours(name)) for name in schema.relations}
    assert max(degree.values()) <= 4 and min(degree.values()) >= 1
    parent = {name: name for name in schema.relations}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for fk in schema.foreign_keys:
        a, b = find(fk.holder), find(fk.target)
        assert a != b  # no cycle: |E| = |V| - 1 and connected means a tree
        parent[a] = b


def test_synthetic_stream_follows_the_parameters():
    work = synthetic.build(relations=6, seconds=400, kwf=0.05, sel=50, seed=7)
    ops = list(work.ops())
    assert ops == list(work.ops())  # deterministic
    assert len(ops) == 6 * 400 and all(op.kind == "insert" for op in ops)
    assert [op.ts for op in ops[:7]] == [0.0] * 6 + [1.0]
    schema = work.schema()
    last_key: dict[str, int] = {}
    hits = 0
    for op in ops:
        assert op.key == last_key.get(op.relation, 0) + 1
        for fk in schema.relations[op.relation].foreign_keys:
            value, newest = op.values[fk.column], last_key.get(fk.target, 0)
            if newest:
                assert newest - 50 < value <= newest
            else:
                assert value is None
        hits += "alpha" in op.values["text"].split()
        last_key[op.relation] = op.key
    assert 0.03 < hits / len(ops) < 0.07


def test_synthetic_seed_changes_the_stream():
    a = list(synthetic.build(relations=5, seconds=30, seed=1).ops())
    b = list(synthetic.build(relations=5, seconds=30, seed=2).ops())
    assert a != b


@pytest.mark.parametrize("work", [ecommerce.build(ops=5000, seed=2), dblp.build(papers=300, seed=2)],
                         ids=["ecommerce", "dblp"])
def test_streams_are_accepted_by_the_engine_and_find_results(work):
    schema = work.schema()
    query = work.query
    engine = KeywordEngine(schema, query["keywords"], query["tmax"], query["window_seconds"])
    changes = 0
    for op in work.ops():
        changes += len(engine.apply(parse_op(json.dumps(op_to_dict(op)), schema)))
    assert engine.rejected == 0
    assert changes > 0


def test_workload_command_writes_three_files(tmp_path, capsys):
    assert cli_main(["workload", "ecommerce", "--ops", "50", "--out-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["ops"]["insert"] > 0
    assert {p.name for p in tmp_path.iterdir()} == {"schema.json", "ops.ndjson", "query.json"}
    assert len((tmp_path / "ops.ndjson").read_text().splitlines()) == 50


def test_tpch_stream_inserts_referenced_tuples_first(tmp_path):
    work = tpch.build(scale_factor=0.001, max_orders=40, work_dir=str(tmp_path))
    schema = work.schema()
    seen: set = set()
    last_ts = -1.0
    for op in work.ops():
        assert op.ts >= last_ts
        last_ts = op.ts
        for fk in schema.relations[op.relation].foreign_keys:
            assert (fk.target, op.values[fk.column]) in seen
        seen.add((op.relation, op.key))
    assert sum(1 for r, _ in seen if r == "orders") == 40
