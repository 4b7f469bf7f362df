"""Every query of a plan gets, in every sharing mode, exactly what it gets when it runs alone.

The reference is the single-query engine (``python -m streaming run`` with
``--predicate``: :class:`~streaming.query_alone.SelectedQuery`), itself checked
against the brute-force enumerator. Random schemas have parallel FKs and a
self-reference; random streams have deletes (of live and of missing keys),
late ops, clock jumps and window expiries. The one deliberate difference is
that with sharing an op gets one verdict, against the widest window, so a
re-insert of a key that left a narrow window but not the widest is rejected
for every query (``docs/sharing.md``): the streams have no such re-insert.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.asc.predicates import parse_predicate
from streaming.ops import OpRejected, parse_op
from streaming.schema import Schema
from streaming.query_alone import SelectedQuery
from streaming.sharing.properties import SharingPlan
from streaming.sharing.runner import MODES, PlanRun
from tests.streaming.sharing.strategies import plan_windows, plan_words, plans, schema_docs, streams

ROOT = Path(__file__).resolve().parents[3]


def alone(schema: Schema, query: dict, ops: list[dict]) -> list[tuple[int, str, tuple]]:
    """The query's events run alone: (seq, type, result identity)."""
    preds = [parse_predicate(p, schema.relations[p["relation"]].attributes, p["relation"]) for p in query["predicates"]]
    engine = SelectedQuery(schema, query["keywords"], query["tmax"], query["window_seconds"], preds)
    out = []
    for seq, obj in enumerate(ops):
        try:
            changes = engine.apply(parse_op(obj, schema))
        except OpRejected as exc:
            changes = exc.changes
        out += [(seq, c.type, (c.result.tuples, c.result.edges)) for c in changes]
    return out


def live_after_each_op(events: list[tuple[int, str, tuple]], n_ops: int) -> list[frozenset]:
    """Replay add/remove events: the live set after every op (an add of a live result is an error)."""
    live: set = set()
    out, i = [], 0
    for seq in range(n_ops):
        while i < len(events) and events[i][0] == seq:
            _, kind, key = events[i]
            if kind == "add":
                assert key not in live, ("add of a live result", seq, key)
                live.add(key)
            else:
                assert key in live, ("remove of an absent result", seq, key)
                live.remove(key)
            i += 1
        out.append(frozenset(live))
    assert i == len(events), "events out of seq order"
    return out


def assert_every_mode_equals_each_query_alone(plan_doc: dict, ops: list[dict]) -> None:
    schema = Schema.from_dict(plan_doc["schema"])
    plan = SharingPlan.model_validate(plan_doc)
    lines = [(i + 1, json.dumps(obj)) for i, obj in enumerate(ops)]
    expected = {q["id"]: live_after_each_op(alone(schema, q, ops), len(ops)) for q in plan_doc["queries"]}
    for mode in MODES:
        run = PlanRun(plan, mode)
        run.feed(lines)
        for q in plan_doc["queries"]:
            events = [(seq, kind, (r.tuples, r.edges)) for seq, kind, r in run.changes[q["id"]]]
            assert live_after_each_op(events, len(ops)) == expected[q["id"]], (mode, q)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_mode_gives_every_query_its_single_query_results(data):
    schema_doc = data.draw(schema_docs())
    plan_doc = data.draw(plans(schema_doc))
    ops = data.draw(streams(schema_doc, windows=plan_windows(plan_doc), words=plan_words(plan_doc)))
    assert_every_mode_equals_each_query_alone(plan_doc, ops)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_fifty_queries_over_overlapping_and_disjoint_keyword_sets_each_get_their_own_results(data):
    schema_doc = data.draw(schema_docs())
    plan_doc = data.draw(plans(schema_doc, min_queries=20, max_queries=50))
    ops = data.draw(streams(schema_doc, windows=plan_windows(plan_doc), words=plan_words(plan_doc)))
    assert_every_mode_equals_each_query_alone(plan_doc, ops)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_widening_makes_one_class_per_keyword_set(data):
    schema_doc = data.draw(schema_docs())
    plan_doc = data.draw(plans(schema_doc))
    run = PlanRun(SharingPlan.model_validate(plan_doc), "widen")
    keyword_sets = {frozenset(q["keywords"]) for q in plan_doc["queries"]}
    stats = run.stats()
    assert stats["classes"] == len(keyword_sets)
    assert stats["queries_sharing"] == len(plan_doc["queries"]) - len(keyword_sets)
    assert stats["lattices"] == len(keyword_sets - {frozenset()})


def test_a_key_deleted_and_inserted_again_leaves_a_narrow_window_by_its_new_time():
    """{x} with a 6 s window shares the stream's store with {v, x, y}, whose window is unbounded, so its
    class ends a result by a timer, not by the store expiring the tuple; R0 1, inserted at 0 and deleted
    at 1, is inserted again at 4: the timer its first life set for 6 must not end its second, which
    stays until 10."""
    schema = {"name": "one", "relations": [
        {"name": "R0", "key": "id", "attributes": {"id": "int", "t": "text", "v": "int"}, "foreign_keys": []},
        {"name": "R1", "key": "id", "attributes": {"id": "int", "t": "text", "v": "int"}, "foreign_keys": []}]}
    plan_doc = {"schema": schema, "aggregates": [], "queries": [
        {"id": 1, "keywords": ["x"], "tmax": 1, "window_seconds": 6.0, "predicates": []},
        {"id": 2, "keywords": ["x", "y", "v"], "tmax": 1, "window_seconds": None, "predicates": []}]}
    ops = [{"op": "insert", "relation": "R0", "tuple": {"id": 1, "t": "w x u", "v": 1}, "ts": 0.0},
           {"op": "delete", "relation": "R0", "key": 1, "ts": 1.0},
           {"op": "insert", "relation": "R0", "tuple": {"id": 1, "t": "x y", "v": None}, "ts": 4.0},
           {"op": "delete", "relation": "R1", "key": 1, "ts": 9.0}]
    assert_every_mode_equals_each_query_alone(plan_doc, ops)


def test_the_cli_writes_one_file_per_query_equal_across_modes_and_to_run(tmp_path):
    examples = ROOT / "docs" / "examples" / "ecommerce"
    schema = json.loads((examples / "schema.json").read_text())
    plan = {"schema": schema, "queries": [
        {"id": 1, "keywords": ["dress", "texas"], "tmax": 5, "window_seconds": None, "predicates": []},
        {"id": 2, "keywords": ["dress", "texas"], "tmax": 4, "window_seconds": 30, "predicates": []},
        {"id": 3, "keywords": ["texas", "dress"], "tmax": 3, "window_seconds": None,
         "predicates": [{"relation": "Product", "attribute": "price", "op": ">=", "value": 40}]},
        {"id": 4, "keywords": [], "predicates": [{"relation": "Product", "attribute": "price", "op": "<", "value": 100}]},
    ], "aggregates": [{"id": 9, "source": {"relation": "Product"}, "aggregate": "count", "window": 20, "step": 10}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    outputs = {}
    for mode in MODES:
        out = tmp_path / mode
        proc = subprocess.run([sys.executable, "-m", "streaming", "run-plan", "--plan", str(tmp_path / "plan.json"),
                               "--ops", str(examples / "ops.ndjson"), "--out-dir", str(out), "--sharing", mode],
                              cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.count("\n") == 3  # the example's three bad ops
        outputs[mode] = {p.name: p.read_text() for p in out.glob("*.ndjson")}
        stats = json.loads((out / "stats.json").read_text())
        for field in ("sharing", "classes", "queries_sharing", "lattices", "store_tuples_peak", "cpu_s", "us_per_op",
                      "plan_cpu_s", "output_cpu_s"):
            assert field in stats
    assert outputs["none"] == outputs["match"] == outputs["widen"]
    assert sorted(outputs["widen"]) == ["aggregate-9.ndjson", "query-1.ndjson", "query-2.ndjson",
                                        "query-3.ndjson", "query-4.ndjson"]
    assert outputs["widen"]["query-1.ndjson"] == (examples / "events-dress-texas-tmax5.ndjson").read_text()
    single = subprocess.run([sys.executable, "-m", "streaming", "run", "--schema", str(examples / "schema.json"),
                             "--keywords", "dress texas", "--tmax", "3", "--predicate", "Product.price >= 40",
                             "--ops", str(examples / "ops.ndjson")], cwd=ROOT, capture_output=True, text=True)
    assert single.returncode == 0, single.stderr
    assert outputs["widen"]["query-3.ndjson"] == single.stdout


def test_every_mode_gives_a_rejected_op_its_own_reason():
    """``--sharing none`` names why an op was refused as ``widen`` does (not a bare "rejected by every query")."""
    examples = ROOT / "docs" / "examples" / "ecommerce"
    plan = SharingPlan.model_validate({
        "schema": json.loads((examples / "schema.json").read_text()),
        "queries": [{"id": 1, "keywords": ["dress", "texas"], "tmax": 5, "window_seconds": 3600, "predicates": []},
                    {"id": 2, "keywords": ["wedding", "scarf"], "tmax": 3, "window_seconds": 1800,
                     "predicates": [{"relation": "Product", "attribute": "price", "op": ">=", "value": 40}]}],
        "aggregates": [{"id": 1, "source": {"relation": "Product"}, "aggregate": "avg", "attribute": "price",
                        "window": 600, "step": 60}]})
    lines = list(enumerate((examples / "ops.ndjson").read_text().splitlines(), 1))
    lines.append((len(lines) + 1, '{"op":"insert","relation":"Product","tuple":{"pid":77,"title":"x","price":1},'
                                  '"ts":1e9}'))
    rejects = {}
    for mode in MODES:
        run = PlanRun(plan, mode)
        run.feed(lines)
        rejects[mode] = run.rejects
    assert rejects["none"] == rejects["match"] == rejects["widen"]
    reasons = [reason for _, reason in rejects["none"]]
    assert len(reasons) == 4 and not any("every query" in reason for reason in reasons), reasons
    assert any("already live" in r for r in reasons) and any("no live tuple" in r for r in reasons)
