"""Aggregate subscriptions in a plan: every mode gives every subscription the values of a per-window
recomputation over its source (the inserts of a relation, or a query's new results)."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.asc.predicates import parse_predicate, query_holds
from streaming.ops import OpRejected, parse_op
from streaming.schema import Schema
from streaming.query_alone import verdict_store
from streaming.sharing.properties import SharingPlan
from streaming.sharing.runner import MODES, PlanRun
from streaming.sharing.windows import Partial, having_holds
from tests.streaming.sharing.strategies import plan_windows, plan_words, plans, predicates, schema_docs, streams


@st.composite
def aggregates(draw, schema_doc: dict, queries: list[dict]) -> list[dict]:
    out = []
    for aid in range(1, draw(st.integers(1, 6)) + 1):
        kind = draw(st.sampled_from(["time", "count"]))
        step = draw(st.sampled_from([1, 2, 3, 4, 6]))
        window = step * draw(st.integers(1, 3))
        aggregate = draw(st.sampled_from(["count", "sum", "avg", "min", "max"]))
        having = draw(st.sampled_from([None, None, ">= 1", "< 3"]))
        if queries and draw(st.booleans()):
            source = {"query": draw(st.sampled_from([q["id"] for q in queries]))}
            attribute = None if aggregate == "count" and draw(st.booleans()) else f"{draw(st.sampled_from(['R0', 'R1']))}.v"
            preds = []
        else:
            relation = draw(st.sampled_from(["R0", "R1"]))
            source = {"relation": relation}
            attribute = None if aggregate == "count" and draw(st.booleans()) else "v"
            preds = [p for p in draw(predicates(schema_doc, max_size=1)) if p["relation"] == relation]
        out.append({"id": aid, "source": source, "aggregate": aggregate, "attribute": attribute, "window": window,
                    "step": step, "window_kind": kind, "having": having, "predicates": preds})
    return out


def reference(schema: Schema, plan_doc: dict, ops: list[dict], query_adds: dict[int, list]) -> dict[int, list]:
    """Each subscription's (window end, value) recomputed window by window from its items."""
    windows = plan_windows(plan_doc)
    widest = None if not windows or None in windows else max(windows)
    stream = verdict_store(schema, widest)
    accepted, moves = [], []  # the ops the stream accepts; the times its clock moved to
    for obj in ops:
        op = parse_op(obj, schema)
        try:
            stream.apply(op)
        except OpRejected:
            pass
        else:
            accepted.append(op)
        if stream.last_ts is not None and (not moves or moves[-1] != stream.last_ts):
            moves.append(stream.last_ts)
    out: dict[int, list] = {}
    for a in plan_doc["aggregates"]:
        items = []  # (position, value)
        if "relation" in a["source"]:
            rel = a["source"]["relation"]
            preds = [parse_predicate(p, schema.relations[rel].attributes, rel) for p in a["predicates"]]
            for op in accepted:
                if op.kind == "insert" and op.relation == rel and query_holds(preds, op.values):
                    value = op.values.get(a["attribute"]) if a["attribute"] else None
                    if a["attribute"] and value is None:
                        continue
                    items.append((op.ts, value))
        else:
            vrel, _, attr = (a["attribute"] or "").rpartition(".")
            for ts, tuples in query_adds[a["source"]["query"]]:
                if not a["attribute"]:
                    items.append((ts, None))
                    continue
                for relation, values in tuples:
                    if relation == vrel and values.get(attr) is not None:
                        items.append((ts, values[attr]))
        having = None if a["having"] is None else (a["having"].split()[0], float(a["having"].split()[1]))
        size, step, got = a["window"], a["step"], []
        if a["window_kind"] == "count":
            ends = [e for e in range(step, len(items) + 1, step) if e >= size]
            windows_of = [(e, [v for _, v in items[e - size:e]]) for e in ends]
        else:  # the windows each clock move closes; of a move's empty ones only the first and the last
            windows_of = []
            for prev, now in zip(moves, moves[1:]):
                closed = [(e, [v for t, v in items if e - size <= t < e])
                          for e in range(math.floor(prev / step) * step + step, math.floor(now / step) * step + 1, step)]
                empty = [i for i, (_, vals) in enumerate(closed) if not vals]
                windows_of += [w for i, w in enumerate(closed) if w[1] or i in (empty[0], empty[-1])]
        for end, vals in windows_of:
            p = Partial()
            for v in vals:
                p.add(v)
            value = p.value(a["aggregate"])
            if having_holds(having, value):
                got.append((end, value))
        out[a["id"]] = got
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_aggregates_equal_a_recomputation_per_window_in_every_mode(data):
    schema_doc = data.draw(schema_docs())
    plan_doc = data.draw(plans(schema_doc, min_queries=1, max_queries=4))
    plan_doc["aggregates"] = data.draw(aggregates(schema_doc, plan_doc["queries"]))
    ops = data.draw(streams(schema_doc, windows=plan_windows(plan_doc), words=plan_words(plan_doc)))
    schema = Schema.from_dict(schema_doc)
    plan = SharingPlan.model_validate(plan_doc)
    lines = [(i + 1, json.dumps(o)) for i, o in enumerate(ops)]
    runs = {}
    for mode in MODES:
        run = PlanRun(plan, mode)
        run.feed(lines)
        runs[mode] = run
    assert runs["none"].values == runs["match"].values == runs["widen"].values
    base = runs["none"]
    ts_of = {}
    for seq, obj in enumerate(ops):
        ts_of[seq] = obj["ts"]
    rows_at_add = {}
    for q in plan_doc["queries"]:
        adds = []
        for seq, kind, result in base.changes[q["id"]]:
            if kind == "add":
                adds.append((ts_of[seq], [(rel, values_of(ops, seq, rel, key)) for rel, key in result.tuples]))
        rows_at_add[q["id"]] = adds
    assert base.values == reference(schema, plan_doc, ops, rows_at_add)


def values_of(ops: list[dict], seq: int, relation: str, key) -> dict:
    """The values of the latest insert of (relation, key) at or before op ``seq``."""
    for obj in reversed(ops[:seq + 1]):
        if obj["op"] == "insert" and obj["relation"] == relation and obj["tuple"]["id"] == key:
            return obj["tuple"]
    raise AssertionError(f"no insert of {relation} {key}")


def test_subscriptions_of_one_source_share_a_relaxed_window():
    doc = {"name": "s", "relations": [{"name": "P", "key": "id", "attributes": {"id": "int", "price": "float"}}]}
    aggs = [{"id": 1, "source": {"relation": "P"}, "aggregate": "avg", "attribute": "price", "window": 45, "step": 30},
            {"id": 2, "source": {"relation": "P"}, "aggregate": "avg", "attribute": "price", "window": 30, "step": 20},
            {"id": 3, "source": {"relation": "P"}, "aggregate": "max", "attribute": "price", "window": 30, "step": 20}]
    plan = SharingPlan.model_validate({"schema": doc, "queries": [], "aggregates": aggs})
    ops = [(i + 1, json.dumps({"op": "insert", "relation": "P", "tuple": {"id": i, "price": i % 7 + 0.5}, "ts": i}))
           for i in range(200)]
    stats = {}
    values = {}
    for mode in MODES:
        run = PlanRun(plan, mode)
        run.feed(ops)
        stats[mode], values[mode] = run.stats(), run.values
    assert values["none"] == values["match"] == values["widen"]
    assert stats["widen"]["aggregate_classes"] == 2  # avg with avg (relaxed to 15/5), max alone
    assert [d["relaxed"] for d in stats["widen"]["aggregate_details"]] == [[15, 5], [30, 10]]
    assert stats["match"]["aggregate_classes"] == 3  # 45/30 does not serve 30/20 unchanged
    assert values["widen"][1][:2] == [(30, sum(i % 7 + 0.5 for i in range(0, 30)) / 30),
                                      (60, sum(i % 7 + 0.5 for i in range(15, 60)) / 45)]
