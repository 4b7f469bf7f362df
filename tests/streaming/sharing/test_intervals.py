"""IntervalSet: union, intersection and containment agree with membership of sample values."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streaming.sharing.intervals import IntervalSet

OPS = ["=", "!=", "<", "<=", ">", ">="]
comparison = st.one_of(
    st.tuples(st.sampled_from(OPS), st.integers(-5, 5)),
    st.tuples(st.just("between"), st.tuples(st.integers(-5, 0), st.integers(0, 5))),
)
interval_set = st.lists(comparison, max_size=3).map(
    lambda cs: IntervalSet.empty() if not cs else _union(IntervalSet.from_comparison(op, v) for op, v in cs)
)
PROBES = [x / 2 for x in range(-14, 15)]


def _union(sets):
    out = IntervalSet.empty()
    for s in sets:
        out = out.union(s)
    return out


def _members(s):
    return {x for x in PROBES if x in s}


@given(interval_set, interval_set)
def test_union_and_intersection_are_the_set_operations(a, b):
    assert _members(a.union(b)) == _members(a) | _members(b)
    assert _members(a.intersection(b)) == _members(a) & _members(b)


@given(interval_set, interval_set)
def test_contains_is_implication(a, b):
    if a.contains(b):
        assert _members(b) <= _members(a)
    if _members(b) - _members(a):
        assert not a.contains(b)


@given(interval_set)
def test_normal_form_is_canonical_and_round_trips_through_comparisons(a):
    rebuilt = _union(
        _intersect(IntervalSet.from_comparison(op, v) for op, v in conj) for conj in a.to_comparisons()
    )
    assert rebuilt == a and hash(rebuilt) == hash(a)


def _intersect(sets):
    out = IntervalSet.everything()
    for s in sets:
        out = out.intersection(s)
    return out


def test_examples():
    price = IntervalSet.from_comparison(">=", 40).union(IntervalSet.from_comparison("between", (10, 20)))
    assert str(price) == "[10, 20] | [40, +inf)"
    assert price.contains(IntervalSet.from_comparison("=", 15))
    assert not price.contains(IntervalSet.from_comparison(">", 15))
    ne = IntervalSet.from_comparison("!=", 3)
    assert ne.union(IntervalSet.from_comparison("=", 3)).is_everything
    assert IntervalSet.from_comparison("<", 3).intersection(IntervalSet.from_comparison(">", 3)).is_empty
    assert IntervalSet.from_comparison("=", "Texas").contains(IntervalSet.from_comparison("=", "Texas"))
    assert "Ohio" not in IntervalSet.from_comparison("=", "Texas")
