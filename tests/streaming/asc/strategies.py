"""Hypothesis strategies shared by the ASC tests: random query sets and tuples."""

from __future__ import annotations

from hypothesis import strategies as st

ATTRS = ["a0", "a1", "a2", "a3", "a4"]
VALUES = st.integers(min_value=0, max_value=12)


@st.composite
def predicates(draw, attrs=ATTRS):
    attr = draw(st.sampled_from(attrs))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "between"]))
    if op == "between":
        lo = draw(VALUES)
        return {"attribute": attr, "op": op, "value": [lo, lo + draw(st.integers(0, 6))]}
    return {"attribute": attr, "op": op, "value": draw(VALUES)}


@st.composite
def query_sets(draw, max_queries=70):
    """Up to ``max_queries`` queries (beyond 64 exercises multi-word bitmaps)."""
    k = draw(st.integers(min_value=1, max_value=max_queries))
    preds = st.lists(predicates(), min_size=0, max_size=4)
    return {f"q{j}": draw(preds) for j in range(k)}


def tuples(attrs=ATTRS):
    """Tuples over ``attrs``; an attribute may be absent (null)."""
    return st.dictionaries(st.sampled_from(attrs), VALUES, min_size=len(attrs) - 1).map(dict)
