"""The Pathway comparison's pure-Python half gives each query's results after every op, without Pathway.

``benchmarks/pathway_dataflow.py`` (run in Pathway's own virtualenv, never by
the suite) evaluates a join plan over a changelog. Here the same plan is
evaluated naively over the changelog replayed the way the dataflow reads it:
windows as tagged expiries, or as Pathway's ``forget`` (a row leaves at the
table's first time after the one at which the largest ``ts`` reached its
``ts + W``), sub-relations by vocabulary mask and predicates, nested-loop
joins on the plan's columns, the ``distinct`` filters; the bindings' changes
per op, turned into events by ``benchmarks/pathway_output.py``, must replay to
``SelectedQuery``'s live results (what ``python -m streaming run`` prints)
after every op, for several queries sharing one plan.
"""

from __future__ import annotations

import io
import json
from collections import Counter, defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.pathway_changelog import ChangelogError, data_time, seq_of_time, write_changelog
from benchmarks.pathway_output import OutputError, result_of_binding, write_events
from benchmarks.pathway_plan import PlanError, join_plan
from streaming.asc.predicates import holds, parse_predicate
from streaming.keywords import tuple_tokens
from streaming.ops import OpRejected, parse_op
from streaming.schema import Schema
from streaming.query_alone import SelectedQuery, verdict_store
from streaming.sharing.properties import QueryEntry, SharingPlan, query_properties
from streaming.workloads.ecommerce import SCHEMA_DOC
from tests.streaming.sharing.strategies import KEYWORD_SETS, predicates, schema_docs, streams

Binding = tuple[int, tuple]  # (CN index, bound keys)


def evaluate_plan(joins: dict[str, Any], schema: Schema, live: dict[Any, dict[str, list[tuple[Any, dict]]]]
                  ) -> dict[int, Counter]:
    """Every query's bindings over ``live[window][relation]`` = [(key, values)], as the dataflow joins them."""
    vocabulary = {word: 1 << i for i, word in enumerate(joins["vocabulary"])}

    def vmask(relation: str, values: dict) -> int:
        return sum(vocabulary.get(t, 0) for t in tuple_tokens(schema.relations[relation], values))

    subs: dict[int, list[tuple[tuple, dict]]] = {}
    for i, doc in enumerate(joins["subrelations"]):
        rel = schema.relations[doc["relation"]]
        preds = [parse_predicate(p, rel.attributes, rel.name) for p in doc["predicates"]]
        subs[i] = [((key,), values) for key, values in live.get(doc["window"], {}).get(doc["relation"], [])
                   if vmask(doc["relation"], values) & doc["bits"] == doc["mask"]
                   and all(holds(p, values.get(p.attribute)) for p in preds)]
    nodes: list[list[tuple[tuple, dict]]] = []
    for doc in joins["nodes"]:
        rows = subs[doc["sub"]]
        for child in doc["children"]:
            column, joined = child["column"], []
            for keys, values in rows:
                for child_keys, child_values in nodes[child["node"]]:
                    holder_value, key = ((values[column], child_keys[0]) if child["parent_holds"]
                                         else (child_values[column], keys[0]))
                    if holder_value is not None and holder_value == key:
                        joined.append((keys + child_keys, values))
            rows = joined
        nodes.append([(keys, values) for keys, values in rows
                      if all(keys[a] != keys[b] for a, b in doc["distinct"])])
    return {q["id"]: Counter((i, keys) for i, cn in enumerate(q["cns"]) for keys, _ in nodes[cn["node"]])
            for q in joins["queries"]}


class ChangelogReplay:
    """The live tuples of each window as the dataflow's input table holds them, time by time."""

    def __init__(self, joins: dict[str, Any], mode: str, text: str):
        self.windows, self.mode = joins["windows"], mode
        self.by_time: dict[int, list[dict]] = defaultdict(list)
        for line in text.splitlines():
            row = json.loads(line)
            self.by_time[row["time"]].append(row)
        self.rows: dict[tuple, dict] = {}
        self.forgotten: dict[float, set] = {w: set() for w in self.windows if w is not None}
        self.clock: float | None = None

    def through(self, seq: int) -> dict[Any, dict[str, list[tuple[Any, dict]]]]:
        """Apply the rows of op ``seq``'s times, in time order; the live tuples per window and relation."""
        for time in sorted(t for t in self.by_time if seq_of_time(t) == seq):
            if self.mode == "forget" and self.clock is not None:
                for window, gone in self.forgotten.items():
                    gone.update(ident for ident, row in self.rows.items() if row["ts"] + window <= self.clock)
            for row in self.by_time[time]:
                ident = (row["relation"], row["key"], row["serial"], row["window"])
                if row["diff"] > 0:
                    assert ident not in self.rows
                    self.rows[ident] = row
                else:
                    assert self.rows.pop(ident)["values"] == row["values"]
                self.clock = row["ts"] if self.clock is None else max(self.clock, row["ts"])
        live: dict[Any, dict[str, list]] = {}
        for i, window in enumerate(self.windows):
            for ident, row in self.rows.items():
                if row["relation"] is None:
                    continue
                if self.mode == "expiries" and row["window"] != i:
                    continue
                if self.mode == "forget" and window is not None and ident in self.forgotten[window]:
                    continue
                live.setdefault(window, {}).setdefault(row["relation"], []).append((row["key"], row["values"]))
        return live


@st.composite
def keyword_plans(draw, schema_doc: dict) -> dict:
    queries = []
    for qid in range(1, draw(st.integers(1, 3)) + 1):
        queries.append({"id": qid, "keywords": draw(st.sampled_from(KEYWORD_SETS)), "tmax": draw(st.integers(1, 4)),
                        "window_seconds": draw(st.sampled_from([None, 2.0, 4.0])),
                        "predicates": draw(predicates(schema_doc, max_size=1))})
    return {"schema": schema_doc, "queries": queries}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_plan_over_the_changelog_gives_each_querys_run_after_every_op(data):
    schema_doc = data.draw(schema_docs())
    plan_doc = data.draw(keyword_plans(schema_doc))
    mode = data.draw(st.sampled_from(["expiries", "forget"]))
    windows = tuple(q["window_seconds"] for q in plan_doc["queries"])
    ops = data.draw(streams(schema_doc, max_ops=25, windows=windows))
    if data.draw(st.booleans()):
        ops = with_a_tuple_referencing_itself(ops, data.draw(st.integers(0, len(ops))))
    schema = Schema.from_dict(schema_doc)
    if mode == "forget":  # the dataflow has no reject rules: forget mode takes streams kwmonitor rejects nothing of
        ops = accepted_ops(schema, windows, ops)
    plan = SharingPlan.model_validate(plan_doc)
    joins = join_plan(plan)
    references, expected = {}, defaultdict(list)
    for entry in plan.queries:
        props = query_properties(entry, schema)
        references[entry.id] = SelectedQuery(schema, entry.keywords, entry.tmax, entry.window_seconds, props.predicates)
    for obj in ops:
        for qid, reference in references.items():
            try:
                reference.apply(parse_op(obj, schema))
            except OpRejected:
                assert mode == "expiries"
            expected[qid].append({(r.tuples, r.edges) for r in reference.snapshot()})

    out = io.StringIO()
    write_changelog(schema, [json.dumps(obj) for obj in ops], joins["windows"], mode, out)
    replay = ChangelogReplay(joins, mode, out.getvalue())
    outputs: dict[int, list[str]] = defaultdict(list)
    before: dict[int, Counter] = {q["id"]: Counter() for q in joins["queries"]}
    for seq in range(len(ops)):
        now = evaluate_plan(joins, schema, replay.through(seq))
        for qid, bindings in now.items():
            cns = joins["queries"][[q["id"] for q in joins["queries"]].index(qid)]["cns"]
            assert {_key(result_of_binding(cns[i], list(keys))) for i, keys in bindings} == expected[qid][seq]
            assert max(bindings.values(), default=1) == 1, "one binding per result"
            for (i, keys), diff in (bindings - before[qid]).items():
                outputs[qid].append(json.dumps({"cn": i, "bound": keys, "time": data_time(seq), "diff": diff}))
            for (i, keys), diff in (before[qid] - bindings).items():
                outputs[qid].append(json.dumps({"cn": i, "bound": keys, "time": data_time(seq), "diff": -diff}))
        before = now
    for query in joins["queries"]:
        events = io.StringIO()
        write_events(query["cns"], outputs[query["id"]], seq_of_time, events)
        assert replayed(events.getvalue(), len(ops)) == expected[query["id"]]


def with_a_tuple_referencing_itself(ops: list[dict], at: int) -> list[dict]:
    """R0 tuple 10 references itself and is referenced by two keyword tuples: CNs with two keyword-free
    R0 nodes could bind it twice, which no result may."""
    ts = ops[at - 1]["ts"] if at else 0.0
    extra = [{"id": 10, "t": "", "v": 1, "f0": 10}, {"id": 11, "t": "x", "v": 2, "f0": 10},
             {"id": 12, "t": "y z", "v": 3, "f0": 10}]
    return ops[:at] + [{"op": "insert", "relation": "R0", "tuple": values, "ts": ts} for values in extra] + ops[at:]


def accepted_ops(schema: Schema, windows: tuple, ops: list[dict]) -> list[dict]:
    """The ops of a stream that no query's window rejects, in order."""
    judges = [verdict_store(schema, w) for w in set(windows)]
    kept = []
    for obj in ops:
        op = parse_op(obj, schema)
        try:
            for judge in judges:
                judge.check(op)
        except OpRejected:
            continue
        for judge in judges:
            judge.apply(op)
        kept.append(obj)
    return kept


def _key(result: Any) -> tuple:
    return (result.tuples, result.edges)


def replayed(text: str, ops: int) -> list[set]:
    """The live set after every op of an event file's text."""
    by_seq: dict[int, list[dict]] = defaultdict(list)
    for line in text.splitlines():
        event = json.loads(line)
        by_seq[event["seq"]].append(event)
    live: set = set()
    out = []
    for seq in range(ops):
        for event in by_seq[seq]:
            key = (tuple(tuple(t) for t in event["tuples"]),
                   tuple((tuple(a), tuple(b), fk) for a, b, fk in event["edges"]))
            assert (key in live) == (event["type"] == "remove"), event
            (live.discard if event["type"] == "remove" else live.add)(key)
        out.append(set(live))
    return out


def test_every_cn_of_kwmonitor_is_in_the_plan_and_nodes_are_shared():
    plan = SharingPlan.model_validate({"schema": SCHEMA_DOC, "queries": [
        {"id": 1, "keywords": ["dress", "texas"], "tmax": 5},
        {"id": 2, "keywords": ["dress", "texas"], "tmax": 3},
        {"id": 3, "keywords": ["gift", "texas"], "tmax": 3, "window_seconds": 60.0}]})
    joins = join_plan(plan)
    assert [len(q["cns"]) for q in joins["queries"]] == [80, 26, 26]
    assert joins["vocabulary"] == ["dress", "texas", "gift"]
    assert joins["windows"] == [None, 60.0]
    # query 2's CNs are query 1's smaller ones: the same nodes
    assert {cn["node"] for cn in joins["queries"][1]["cns"]} <= {cn["node"] for cn in joins["queries"][0]["cns"]}
    # Customer{texas} <-cid- Order{} -pid-> Product{dress} -> ... a Group joining two keyword-free Products
    # of one bundle: positions that could bind one tuple are checked
    assert any(node["distinct"] for node in joins["nodes"])


def test_forget_mode_refuses_a_stream_with_an_op_kwmonitor_rejects():
    schema = Schema.from_dict(SCHEMA_DOC)
    lines = [json.dumps({"op": "insert", "relation": "Customer", "tuple": {"cid": 1, "state": "Texas"}, "ts": 0}),
             json.dumps({"op": "delete", "relation": "Customer", "key": 1, "ts": 70})]
    write_changelog(schema, lines, [None], "forget", io.StringIO())
    with pytest.raises(ChangelogError, match="op 1 is rejected"):  # the tuple left the window at 60
        write_changelog(schema, lines, [None, 60.0], "forget", io.StringIO())
    out = io.StringIO()
    assert write_changelog(schema, lines, [None, 60.0], "expiries", out) == {
        "insert": 2, "retract": 2, "tick": 0, "ops": 2}


def test_filter_subscriptions_and_aggregates_are_refused():
    with pytest.raises(PlanError, match="filter subscriptions"):
        join_plan(SharingPlan.model_validate({"schema": SCHEMA_DOC, "queries": [
            {"id": 1, "predicates": [{"relation": "Product", "attribute": "price", "op": "<", "value": 5}]}]}))


def test_an_output_that_is_no_result_is_refused():
    cn = {"tuples": ["Product", "Group", "Product"], "edges": [[1, 0, "pid"], [1, 2, "sid"]]}
    with pytest.raises(OutputError, match="twice"):
        result_of_binding(cn, [3, 1, 3])
    rows = [json.dumps({"cn": 0, "bound": [3, 1, 4], "time": data_time(0), "diff": 1})] * 2
    with pytest.raises(OutputError, match="changes by 2"):
        write_events([cn], rows, seq_of_time, io.StringIO())


def test_a_query_entry_reaches_the_plan_with_its_predicates():
    entry = QueryEntry.model_validate({"id": 4, "keywords": ["dress"], "tmax": 1, "predicates": [
        {"relation": "Product", "attribute": "price", "op": "between", "value": [10, 20]}]})
    joins = join_plan(SharingPlan.model_validate({"schema": SCHEMA_DOC, "queries": [entry.model_dump()]}))
    [sub] = [s for s in joins["subrelations"] if s["relation"] == "Product"]
    assert sub["predicates"] == [{"relation": "Product", "attribute": "price", "op": "between", "value": [10.0, 20.0]}]
    assert (sub["bits"], sub["mask"]) == (1, 1)
