"""Predicate algebra against brute force: implication, union, negation and evaluation agree on sample points."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.wxquery.predicates import (
    DNF,
    FALSE,
    TRUE,
    Atom,
    complement,
    conjoin,
    disjoin,
    equivalent,
    evaluate,
    implies,
    negate,
    normalize,
    parse_dnf,
)
from streaming.sharing.intervals import IntervalSet

PATHS = ["a", "b"]
VALUES = [0.0, 1.0, 2.0, 3.0]
GRID = [-0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]


def atoms():
    return st.builds(lambda p, op, v: Atom(path=p, op=op, value=v), st.sampled_from(PATHS),
                     st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), st.sampled_from(VALUES))


predicates = st.lists(st.lists(atoms(), max_size=3).map(tuple), max_size=3).map(lambda c: DNF(any_of=tuple(c)))


def points():
    return [dict(zip(PATHS, p)) for p in itertools.product(GRID, repeat=len(PATHS))]


def holds(p: DNF, point: dict[str, float]) -> bool:
    return evaluate(p, lambda dim: point[dim[0]])


@settings(max_examples=300, deadline=None)
@given(predicates, predicates)
def test_algebra_matches_points(p, q):
    # the grid has a point in every region the constants 0..3 cut the plane into, so it decides implication
    pts = points()
    assert implies(p, q) == all(holds(q, x) for x in pts if holds(p, x))
    for x in pts:
        assert holds(disjoin(p, q), x) == (holds(p, x) or holds(q, x))
        assert holds(conjoin(p, q), x) == (holds(p, x) and holds(q, x))
        assert holds(negate(p), x) == (not holds(p, x))
        assert holds(normalize(p), x) == holds(p, x)
    assert equivalent(p, normalize(p))


def test_constants():
    assert TRUE.is_true and FALSE.is_false and implies(FALSE, TRUE) and not implies(TRUE, FALSE)
    assert str(parse_dnf([[("x", "between", (1.0, 2.0))]])) == "(x >= 1.0 and x <= 2.0)"


@given(st.lists(st.tuples(st.sampled_from(["<", "<=", ">", ">=", "=", "!="]), st.sampled_from(VALUES)), max_size=3))
def test_complement(parts):
    s = IntervalSet.empty()
    for op, v in parts:
        s = s.union(IntervalSet.from_comparison(op, v))
    c = complement(s)
    for x in GRID:
        assert (x in c) != (x in s)
    assert complement(c) == s


def test_strings_and_differences():
    p = parse_dnf([[("name", "<", "m")]])
    assert implies(parse_dnf([[("name", "=", "apple")]]), p)
    join5 = DNF(any_of=((Atom(path="x", minus="y", op=">=", value=0.5),),))
    join6 = DNF(any_of=((Atom(path="x", minus="y", op=">=", value=0.0),),))
    assert implies(join5, join6) and not implies(join6, join5)
    assert str(join5) == "x >= y + 0.5"
