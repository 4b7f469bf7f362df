"""Matching, merging and narrowing (paper 002, Sect. 4) are sound: merged classes recover every member."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.schema import Schema
from streaming.sharing.matching import (
    ClassProperties,
    NarrowingRule,
    matches,
    merge,
    narrow,
    registration_classes,
    should_narrow,
)
from streaming.sharing.properties import QueryEntry, query_properties
from tests.streaming.sharing.strategies import predicates, schema_docs

SCHEMA_DOC = {"name": "s", "relations": [
    {"name": "A", "key": "id", "attributes": {"id": "int", "t": "text", "v": "int", "w": "float"}},
    {"name": "B", "key": "id", "attributes": {"id": "int", "t": "text", "v": "int", "a": "int"},
     "foreign_keys": [{"name": "a", "column": "a", "references": "A"}]},
]}
SCHEMA = Schema.from_dict(SCHEMA_DOC)


def props(qid, keywords=("x",), tmax=3, window=None, preds=()):
    return query_properties(QueryEntry(id=qid, keywords=list(keywords), tmax=tmax, window_seconds=window,
                                       predicates=list(preds)), SCHEMA)


def pred(relation, attribute, op, value):
    return {"relation": relation, "attribute": attribute, "op": op, "value": value}


def test_a_narrower_query_matches_without_widening_and_the_reverse_widens():
    wide_q = props(1, tmax=5, window=60.0, preds=[pred("A", "v", ">=", 10), pred("A", "w", "<", 2.0)])
    narrow_q = props(2, tmax=3, window=30.0, preds=[pred("A", "v", ">=", 20), pred("A", "w", "<", 1.5)])
    assert matches(ClassProperties.of(wide_q), narrow_q)
    assert not matches(ClassProperties.of(narrow_q), wide_q)
    merged = merge(ClassProperties.of(narrow_q), wide_q)
    assert merged == ClassProperties.of(wide_q)  # q1 with q2 merges to q2's properties (Sect. 4.4)
    # an attribute the class does not carry must be added (the paper's missing path: no match)
    assert not matches(ClassProperties.of(props(3, preds=[pred("A", "v", ">=", 10)])), narrow_q)
    widened = merge(ClassProperties.of(props(3, preds=[pred("A", "v", ">=", 10)])), narrow_q)
    assert "w" in widened.attributes["A"] and "w" not in widened.selection["A"]


def test_hull_is_the_union_of_intervals_and_a_free_attribute_drops_the_restriction():
    a = ClassProperties.of(props(1, preds=[pred("A", "v", "between", [0, 5])]))
    b = props(2, preds=[pred("A", "v", "between", [10, 20])])
    assert str(merge(a, b).selection["A"]["v"]) == "[0, 5] | [10, 20]"
    assert "A" not in merge(a, props(3)).selection  # no predicate on A: every tuple of A
    assert merge(a, props(4, window=None)).window is None


def test_other_keyword_sets_and_outputs_neither_match_nor_merge():
    base = ClassProperties.of(props(1, keywords=("x", "y")))
    assert not matches(base, props(2, keywords=("x",)))
    filter_q = props(3, keywords=(), preds=[pred("A", "v", ">", 1)])
    assert filter_q.output == "tuples" and not matches(base, filter_q)
    try:
        merge(base, props(4, keywords=("y",)))
    except ValueError as exc:
        assert "keyword set" in str(exc)
    else:
        raise AssertionError("merge of two keyword sets")


def test_filter_subscriptions_take_only_the_relations_they_filter():
    a = ClassProperties.of(props(1, keywords=(), preds=[pred("A", "v", ">", 1)]))
    assert a.relations == {"A"} and a.admits("A", {"v": 2}) and not a.admits("B", {"v": 2})
    both = merge(a, props(2, keywords=(), preds=[pred("B", "v", "<", 3)]))
    assert both.relations == {"A", "B"} and both.admits("B", {"v": 2}) and not both.admits("A", {"v": 0})


def test_narrowing_rule():
    members = [props(1, tmax=3), props(2, tmax=3)]
    current = merge(ClassProperties.of(members[0]), props(9, tmax=6))
    narrowed = narrow(members)
    assert narrowed.tmax == 3
    assert should_narrow(current, narrowed, produced=0, undelivered=0)  # Tmax dropped by 3: at once
    slightly = merge(ClassProperties.of(members[0]), props(9, tmax=4))
    rule = NarrowingRule(min_results=100, waste=0.5)
    assert not should_narrow(slightly, narrowed, 50, 50, rule)  # too few results to judge
    assert not should_narrow(slightly, narrowed, 400, 100, rule)  # 25 % wasted: keep
    assert should_narrow(slightly, narrowed, 400, 250, rule)
    assert not should_narrow(narrowed, narrowed, 400, 400, rule)


def test_registration_in_order_shares_with_and_without_widening():
    # the paper's situation: each later query needs more than the previous ones
    qs = [props(i, tmax=2 + i, window=10.0 * (i + 1), preds=[pred("A", "v", ">=", 10 - i)]) for i in range(4)]
    assert len(registration_classes(qs, "match")) == 4
    assert len(registration_classes(qs, "widen")) == 1
    assert len(registration_classes(list(reversed(qs)), "match")) == 1


values = st.fixed_dictionaries({"v": st.one_of(st.none(), st.integers(0, 5))})


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_merge_admits_everything_each_member_admits(data):
    doc = data.draw(schema_docs())
    schema = Schema.from_dict(doc)
    queries = []
    for qid in range(data.draw(st.integers(1, 5))):
        preds = data.draw(predicates(doc, max_size=3))
        queries.append(query_properties(QueryEntry(
            id=qid, keywords=["x"], tmax=data.draw(st.integers(1, 5)),
            window_seconds=data.draw(st.sampled_from([None, 1.0, 2.0])), predicates=preds), schema))
    merged = narrow(queries)
    for q in queries:
        assert matches(merged, q)
        assert q.tmax <= merged.tmax
        assert merged.window is None or (q.window is not None and q.window <= merged.window)
    rng = random.Random(data.draw(st.integers(0, 1000)))
    for _ in range(30):
        relation = rng.choice(sorted(schema.relations))
        row = {"v": rng.choice([None, 0, 1, 2, 3, 4, 5])}
        admitted_by_some = any(all(row["v"] is not None and row["v"] in s for s in q.selection.get(relation, {}).values())
                               for q in queries)
        if admitted_by_some:
            assert merged.admits(relation, row)
