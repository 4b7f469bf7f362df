"""A running shared engine that changes its plan keeps every query exactly where a fresh engine would be.

Queries join (riding on a running class or widening it), leave (their class
keeps its properties until narrowed) and change mid-stream. After the change
and after every later op, each query's live set equals that of a fresh engine
given the new plan and the same stored tuples, and the changes the running
engine reports replay to its live sets.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.ops import OpRejected, parse_op
from streaming.schema import Schema
from streaming.sharing.engine import SharedEngine
from streaming.sharing.properties import QueryEntry, query_properties
from tests.streaming.sharing.strategies import plan_windows, plan_words, plans, schema_docs, streams


def keys(results):
    return {(r.tuples, r.edges) for r in results}


def fresh_engine(schema, mode, queries, source: SharedEngine) -> SharedEngine:
    engine = SharedEngine(schema, mode)
    engine.set_plan(queries)
    stored = sorted(((row.ts, row.serial, rel, key, row) for rel, rows in source.store.rows.items()
                     for key, row in rows.items()), key=lambda x: (x[0], x[1]))
    from streaming.ops import Op
    engine.restore([Op("insert", rel, key, row.values, ts) for ts, _, rel, key, row in stored], source.last_ts)
    return engine


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_plan_changes_mid_stream_equal_a_fresh_engine(data):
    doc = data.draw(schema_docs())
    schema = Schema.from_dict(doc)
    first = data.draw(plans(doc, min_queries=1, max_queries=6))["queries"]
    second = data.draw(plans(doc, min_queries=1, max_queries=6))["queries"]
    for q in second:  # half of them keep an id of the first plan: some unchanged, some edited
        q["id"] = q["id"] if data.draw(st.booleans()) else q["id"] + 1000
    keep = [q for q in first if data.draw(st.booleans())]
    second = keep + [q for q in second if q["id"] not in {k["id"] for k in keep}]
    mode = data.draw(st.sampled_from(["match", "widen"]))
    narrow_now = data.draw(st.booleans())
    both = {"queries": first + second}
    ops = data.draw(streams(doc, windows=plan_windows(both), words=plan_words(both)))
    cut = data.draw(st.integers(0, len(ops)))

    props = lambda qs: [query_properties(QueryEntry.model_validate(q), schema) for q in qs]
    live: dict[int, set] = {}

    def sink(qid, kind, result):
        key = (result.tuples, result.edges)
        if kind == "add":
            assert key not in live.setdefault(qid, set())
            live[qid].add(key)
        else:
            live[qid].remove(key)

    def deliver(receivers, kind, result):
        for qid in engine.query_ids(receivers):
            sink(qid, kind, result)

    engine = SharedEngine(schema, mode, delivery_sink=deliver)
    engine.set_plan(props(first))
    for obj in ops[:cut]:
        try:
            engine.apply(parse_op(obj, schema))
        except OpRejected:
            pass
    rebuilt = engine.set_plan(props(second), narrow_now=narrow_now)
    for qid in rebuilt:
        live[qid] = keys(engine.results(qid))
    reference = fresh_engine(schema, mode, props(second), engine)
    for q in second:
        assert keys(engine.results(q["id"])) == keys(reference.results(q["id"])) == live.get(q["id"], set()), q
    for obj in ops[cut:]:
        for e in (engine, reference):
            try:
                e.apply(parse_op(obj, schema))
            except OpRejected:
                pass
        for q in second:
            assert keys(engine.results(q["id"])) == keys(reference.results(q["id"])) == live.get(q["id"], set()), q
