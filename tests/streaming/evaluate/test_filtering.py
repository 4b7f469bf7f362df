"""FilterEngine against a naive model of the op stream after every op, and its agreement with KeywordEngine.

The model keeps a dict of live tuples and applies docs/ops.md's rules
literally (reject late ops, unknown kinds and relations with no change; else
move the clock and expire ``s + W <= t``, then reject inserts of a live key
and deletes of a missing key); a filter subscription's live set is then
every live tuple of its relations.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.engine import KeywordEngine
from streaming.evaluate.filtering import FilterEngine
from streaming.evaluate.results import Result
from streaming.ops import Op, OpRejected
from streaming.schema import Schema

SCHEMA = Schema.from_dict({"name": "three", "relations": [
    {"name": "A", "key": "id", "attributes": {"id": "int", "v": "int", "t": "text"}},
    {"name": "B", "key": "id", "attributes": {"id": "int", "a": "int", "t": "text"},
     "foreign_keys": [{"name": "a", "column": "a", "references": "A"}]},
    {"name": "C", "key": "id", "attributes": {"id": "int", "b": "int"},
     "foreign_keys": [{"name": "b", "column": "b", "references": "B"}]},
]})


class NaiveFilter:
    """The reference: live tuples in a dict, stream rules spelled out, no index and no queue."""

    def __init__(self, relations: set[str], window: float | None):
        self.relations, self.window = relations, window
        self.live: dict[tuple[str, int], float] = {}
        self.last_ts: float | None = None

    def alive_at(self, now: float) -> dict[tuple[str, int], float]:
        return {k: s for k, s in self.live.items() if self.window is None or s + self.window > now}

    def apply(self, op: Op) -> bool:
        """Apply ``op``; False if the stream rules reject it (a reject by key after its time moved the clock)."""
        if op.relation not in SCHEMA.relations or op.kind not in ("insert", "delete"):
            return False
        if self.last_ts is not None and op.ts < self.last_ts:
            return False
        self.live, self.last_ts = self.alive_at(op.ts), op.ts
        ident = (op.relation, op.key)
        if (op.kind == "insert") == (ident in self.live):
            return False
        if op.kind == "insert":
            self.live[ident] = op.ts
        else:
            del self.live[ident]
        return True

    def advance(self, now: float) -> bool:
        """Let time reach ``now`` with no op; False (and no change) for a late time."""
        if self.last_ts is not None and now < self.last_ts:
            return False
        self.live, self.last_ts = self.alive_at(now), now
        return True

    def results(self) -> set[tuple]:
        return {((ident,), ()) for ident in self.live if ident[0] in self.relations}


@st.composite
def op_streams(draw) -> list[Op]:
    ops, ts = [], 0.0
    for _ in range(draw(st.integers(1, 40))):
        ts += draw(st.sampled_from([0, 0, 1, 1, 2, 3, -1]))
        relation = draw(st.sampled_from(["A", "A", "B", "C", "Nope"]))
        key = draw(st.integers(0, 3))
        kind = draw(st.sampled_from(["insert", "insert", "insert", "delete", "delete", "upsert"]))
        ref = draw(st.sampled_from([None, 0, 1]))
        values = {"A": {"id": key, "v": draw(st.integers(0, 9)), "t": "x"}, "B": {"id": key, "a": ref, "t": "x"},
                  "C": {"id": key, "b": ref}, "Nope": {"id": key}}[relation]
        ops.append(Op(kind, relation, key, values if kind != "delete" else None, ts))
    return ops


def as_keys(results: list[Result]) -> set[tuple]:
    return {(r.tuples, r.edges) for r in results}


def frozen(engine) -> tuple:
    return as_keys(engine.snapshot()), engine.store.counts(), engine.last_ts, len(engine.window)


@settings(max_examples=200, deadline=None)
@given(ops=op_streams(), relations=st.sampled_from([{"A"}, {"B"}, {"A", "C"}]),
       window=st.sampled_from([None, 1.0, 2.5, 4.0]))
def test_live_set_equals_the_naive_model_after_every_op(ops, relations, window):
    engine = FilterEngine(SCHEMA, relations, window)
    model = NaiveFilter(relations, window)
    replayed: set[tuple] = set()
    for i, op in enumerate(ops):
        accepted = model.apply(op)
        try:
            changes = engine.apply(op)
        except OpRejected as exc:
            assert not accepted, (i, op)
            changes = exc.changes
        else:
            assert accepted, (i, op)
        for change in changes:
            key = (change.result.tuples, change.result.edges)
            assert len(key[0]) == 1 and key[1] == () and key[0][0][0] in relations
            if change.type == "add":
                assert key not in replayed
                replayed.add(key)
            else:
                assert change.type == "remove" and key in replayed
                replayed.discard(key)
        assert as_keys(engine.snapshot()) == model.results() == replayed, (i, op)
        assert engine.evaluator.stats()["live_results"] == len(replayed)
        assert engine.last_ts == model.last_ts
    assert engine.applied + engine.rejected == len(ops)


@settings(max_examples=100, deadline=None)
@given(ops=op_streams(), window=st.sampled_from([1.0, 2.5]), skipped=st.sets(st.integers(0, 39)))
def test_advancing_time_without_an_op_expires_like_the_model(ops, window, skipped):
    """The group evaluator advances an engine's time for each op the query does not take."""
    engine = FilterEngine(SCHEMA, ["A", "B"], window)
    model = NaiveFilter({"A", "B"}, window)
    for i, op in enumerate(ops):
        before = frozen(engine)
        if i in skipped:
            accepted = model.advance(op.ts)
            try:
                changes = engine.advance(op.ts)
            except OpRejected:
                assert not accepted and frozen(engine) == before
                continue
            assert accepted and all(c.type == "remove" for c in changes)
            assert engine.last_ts == op.ts
        else:
            accepted = model.apply(op)
            try:
                engine.apply(op)
            except OpRejected:
                assert not accepted
            else:
                assert accepted
        assert as_keys(engine.snapshot()) == model.results(), (i, op)


@settings(max_examples=100, deadline=None)
@given(ops=op_streams(), window=st.sampled_from([None, 2.0]), cut=st.integers(0, 40))
def test_load_then_apply_equals_applying_everything(ops, window, cut):
    whole = FilterEngine(SCHEMA, ["A", "B"], window)
    for op in ops:
        try:
            whole.apply(op)
        except OpRejected:
            pass
    loaded = FilterEngine(SCHEMA, ["A", "B"], window)
    reasons: list[str] = []
    loaded.load(ops[:cut], on_reject=lambda i, op, reason: reasons.append(reason))
    for op in ops[cut:]:
        try:
            loaded.apply(op)
        except OpRejected:
            pass
    assert as_keys(loaded.snapshot()) == as_keys(whole.snapshot())
    assert (loaded.applied, loaded.rejected) == (whole.applied, whole.rejected)
    model = NaiveFilter(set(), window)
    assert len(reasons) == sum(1 for op in ops[:cut] if not model.apply(op))


@settings(max_examples=100, deadline=None)
@given(ops=op_streams(), window=st.sampled_from([None, 1.0, 3.0]))
def test_rejects_exactly_what_a_keyword_engine_rejects(ops, window):
    filtering = FilterEngine(SCHEMA, ["A"], window)
    keyword = KeywordEngine(SCHEMA, ["x"], 2, window)
    for op in ops:
        verdicts = []
        for engine in (filtering, keyword):
            try:
                engine.apply(op)
                verdicts.append(None)
            except OpRejected as exc:
                verdicts.append(str(exc))
        assert verdicts[0] == verdicts[1], op
    assert filtering.store.counts() == keyword.store.counts()


def test_expiry_removes_results_oldest_first_and_stats_describe_the_subscription():
    engine = FilterEngine(SCHEMA, ["A", "C"], 10.0)
    assert [c.type for c in engine.apply(Op("insert", "A", 1, {"id": 1, "v": 3, "t": ""}, 0.0))] == ["add"]
    assert engine.apply(Op("insert", "B", 1, {"id": 1, "a": 1, "t": ""}, 1.0)) == []
    engine.apply(Op("insert", "C", 7, {"id": 7, "b": 1}, 2.0))
    changes = engine.apply(Op("insert", "A", 2, {"id": 2, "v": 3, "t": ""}, 12.0))
    assert [(c.type, c.result.tuples) for c in changes] == [
        ("remove", (("A", 1),)), ("remove", (("C", 7),)), ("add", (("A", 2),))]
    assert engine.tuple_values("A", 2) == {"id": 2, "v": 3, "t": ""} and engine.tuple_values("A", 1) is None
    stats = engine.stats()
    assert stats["engine"] == "filter" and stats["keywords"] == [] and stats["relations"] == ["A", "C"]
    assert stats["live_results"] == 1 and stats["live_tuples"] == {"A": 1, "B": 0, "C": 0}
    assert stats["ops_applied"] == 4 and stats["window_seconds"] == 10.0


def test_relations_are_checked():
    with pytest.raises(ValueError, match="without keywords needs predicates"):
        FilterEngine(SCHEMA, [])
    with pytest.raises(ValueError, match="unknown relation 'Z'"):
        FilterEngine(SCHEMA, ["A", "Z"])
