"""Predicate parsing, type checking and the naive reference semantics."""

from __future__ import annotations

import pytest

from streaming.asc.predicates import PredicateError, holds, parse_predicate, parse_queries, query_holds, split_by_relation

TYPES = {"price": "float", "qty": "int", "name": "text", "at": "timestamp", "flag": "bool"}


def test_parse_with_schema_types_and_relation():
    p = parse_predicate({"relation": "Order", "attribute": "price", "op": ">=", "value": 40}, TYPES, "Order")
    assert (p.attribute, p.op, p.value, p.type, p.relation) == ("price", ">=", 40.0, "float", "Order")
    assert p.to_json() == {"relation": "Order", "attribute": "price", "op": ">=", "value": 40.0}


def test_between_is_inclusive_and_ordered():
    p = parse_predicate({"attribute": "qty", "op": "between", "value": [3, 5]}, TYPES)
    assert [holds(p, v) for v in (2, 3, 4, 5, 6, None)] == [False, True, True, True, False, False]
    with pytest.raises(PredicateError, match="empty range"):
        parse_predicate({"attribute": "qty", "op": "between", "value": [5, 3]}, TYPES)


def test_timestamp_values_are_epoch_seconds():
    p = parse_predicate({"attribute": "at", "op": "<", "value": "1970-01-01T00:01:00"}, TYPES)
    assert p.value == 60.0 and holds(p, 59.0) and not holds(p, 60.0)


@pytest.mark.parametrize("doc, message", [
    ("x", "expected an object"),
    ({"attribute": "price", "op": "~", "value": 1}, "op"),
    ({"attribute": "price", "op": "=", "value": "cheap"}, "expected float"),
    ({"attribute": "qty", "op": "=", "value": 1.5}, "expected int"),
    ({"attribute": "nope", "op": "=", "value": 1}, "unknown attribute"),
    ({"attribute": "flag", "op": "=", "value": True}, "cannot carry a predicate"),
    ({"attribute": "price", "op": "="}, "missing"),
    ({"attribute": "price", "op": "=", "value": None}, "null"),
    ({"attribute": "price", "op": "between", "value": 3}, r"\[lo, hi\]"),
    ({"attribute": "price", "op": "=", "value": 1, "extra": 2}, "unknown field"),
    ({"relation": "Customer", "attribute": "price", "op": "=", "value": 1}, "is not 'Order'"),
])
def test_bad_predicates_are_named(doc, message):
    with pytest.raises(PredicateError, match=message):
        parse_predicate(doc, TYPES, "Order")
    assert issubclass(PredicateError, ValueError)


def test_inferred_types_must_agree_per_attribute():
    with pytest.raises(PredicateError, match="float here but text"):
        parse_queries({"q1": [{"attribute": "a", "op": "=", "value": "x"}],
                       "q2": [{"attribute": "a", "op": "<", "value": 3}]})
    with pytest.raises(PredicateError, match="booleans"):
        parse_queries({"q1": [{"attribute": "a", "op": "=", "value": False}]})


def test_query_is_conjunctive_and_null_fails():
    q = parse_queries({"q": [{"attribute": "a", "op": ">", "value": 1}, {"attribute": "b", "op": "!=", "value": "x"}]})["q"]
    assert query_holds(q, {"a": 2, "b": "y"})
    assert not query_holds(q, {"a": 2, "b": "x"})
    assert not query_holds(q, {"a": 2})


def test_split_by_relation_keeps_every_query_everywhere():
    queries = {"q1": [{"relation": "Order", "attribute": "qty", "op": ">", "value": 2}],
               "q2": [{"relation": "Product", "attribute": "price", "op": "<", "value": 9.5}]}
    split = split_by_relation(queries, ["Order", "Product", "Customer"])
    assert split["Order"] == {"q1": queries["q1"], "q2": []}
    assert split["Customer"] == {"q1": [], "q2": []}
    with pytest.raises(PredicateError, match="relation"):
        split_by_relation({"q": [{"attribute": "qty", "op": "=", "value": 1}]}, ["Order"])
