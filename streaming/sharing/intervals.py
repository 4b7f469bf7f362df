"""Sets of values as unions of disjoint intervals: the algebra behind predicate matching and widening.

A selection predicate on one attribute (``price >= 40``, ``state = 'Texas'``,
``qty between [1, 5]``) admits a set of values; so does the widened predicate
of a sharing class (the union of its members' sets, paper 002 Sect. 4.2:
"relaxing the selection predicate ... by forming the union"). Matching asks
whether a query's set lies inside a class's (implication: ``contains``), and
merging forms the union. :class:`IntervalSet` is that algebra over any totally
ordered values of one kind (numbers, or strings), with open and closed ends
and unbounded sides.

>>> a = IntervalSet.from_comparison(">=", 40)
>>> b = IntervalSet.from_comparison("between", (10, 20))
>>> a.union(b)
IntervalSet('[10, 20] | [40, +inf)')
>>> a.union(b).contains(IntervalSet.from_comparison(">", 45))
True
>>> 30 in a.union(b)
False
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["Interval", "IntervalSet"]


@dataclass(frozen=True, slots=True)
class Interval:
    """One interval; ``lo``/``hi`` None is unbounded on that side (then the end is open)."""

    lo: Any
    lo_closed: bool
    hi: Any
    hi_closed: bool

    def __contains__(self, value: Any) -> bool:
        lo, hi = self.lo, self.hi
        if lo is not None and (value < lo or (value == lo and not self.lo_closed)):
            return False
        if hi is not None and (value > hi or (value == hi and not self.hi_closed)):
            return False
        return True

    def __str__(self) -> str:
        left = "(-inf" if self.lo is None else f"{'[' if self.lo_closed else '('}{self.lo!r}"
        right = "+inf)" if self.hi is None else f"{self.hi!r}{']' if self.hi_closed else ')'}"
        return f"{left}, {right}"


def _empty(iv: Interval) -> bool:
    if iv.lo is None or iv.hi is None:
        return False
    return iv.lo > iv.hi or (iv.lo == iv.hi and not (iv.lo_closed and iv.hi_closed))


def _starts_before(a: Interval, b: Interval) -> bool:
    """Whether ``a`` starts strictly before ``b`` (sort key for normalisation)."""
    if a.lo is None:
        return b.lo is not None
    if b.lo is None:
        return False
    return a.lo < b.lo or (a.lo == b.lo and a.lo_closed and not b.lo_closed)


def _touches(a: Interval, b: Interval) -> bool:
    """Whether ``b`` (starting no earlier than ``a``) overlaps or abuts ``a`` so they join into one."""
    if a.hi is None or b.lo is None:
        return True
    return b.lo < a.hi or (b.lo == a.hi and (a.hi_closed or b.lo_closed))


def _max_hi(a: Interval, b: Interval) -> tuple[Any, bool]:
    if a.hi is None or b.hi is None:
        return None, False
    if a.hi > b.hi:
        return a.hi, a.hi_closed
    if b.hi > a.hi:
        return b.hi, b.hi_closed
    return a.hi, a.hi_closed or b.hi_closed


class IntervalSet:
    """An immutable union of disjoint, non-touching intervals, kept sorted."""

    __slots__ = ("intervals",)

    def __init__(self, intervals: Iterable[Interval] = ()):
        items = sorted((iv for iv in intervals if not _empty(iv)), key=_SortKey)
        merged: list[Interval] = []
        for iv in items:
            if merged and _touches(merged[-1], iv):
                last = merged[-1]
                hi, hi_closed = _max_hi(last, iv)
                merged[-1] = Interval(last.lo, last.lo_closed, hi, hi_closed)
            else:
                merged.append(iv)
        self.intervals: tuple[Interval, ...] = tuple(merged)

    # -- construction ----------------------------------------------------------

    @classmethod
    def everything(cls) -> "IntervalSet":
        return cls((Interval(None, False, None, False),))

    @classmethod
    def empty(cls) -> "IntervalSet":
        return cls(())

    @classmethod
    def from_comparison(cls, op: str, value: Any) -> "IntervalSet":
        """The values ``v`` with ``v op value`` (``between``: ``value`` is ``(lo, hi)``, inclusive)."""
        if op == "=":
            return cls((Interval(value, True, value, True),))
        if op == "!=":
            return cls((Interval(None, False, value, False), Interval(value, False, None, False)))
        if op == "<":
            return cls((Interval(None, False, value, False),))
        if op == "<=":
            return cls((Interval(None, False, value, True),))
        if op == ">":
            return cls((Interval(value, False, None, False),))
        if op == ">=":
            return cls((Interval(value, True, None, False),))
        if op == "between":
            lo, hi = value
            return cls((Interval(lo, True, hi, True),))
        raise ValueError(f"unknown comparison {op!r}")

    # -- algebra ---------------------------------------------------------------

    def union(self, other: "IntervalSet") -> "IntervalSet":
        return IntervalSet(self.intervals + other.intervals)

    def intersection(self, other: "IntervalSet") -> "IntervalSet":
        out: list[Interval] = []
        for a in self.intervals:
            for b in other.intervals:
                lo, lo_closed = _max_lo(a, b)
                hi, hi_closed = _min_hi(a, b)
                out.append(Interval(lo, lo_closed, hi, hi_closed))
        return IntervalSet(out)

    def contains(self, other: "IntervalSet") -> bool:
        """Whether every value of ``other`` is in this set (``other`` implies ``self``)."""
        return other.intersection(self) == other

    def __contains__(self, value: Any) -> bool:
        return any(value in iv for iv in self.intervals)

    @property
    def is_everything(self) -> bool:
        return len(self.intervals) == 1 and self.intervals[0].lo is None and self.intervals[0].hi is None

    @property
    def is_empty(self) -> bool:
        return not self.intervals

    # -- comparison and display --------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IntervalSet) and self.intervals == other.intervals

    def __hash__(self) -> int:
        return hash(self.intervals)

    def __repr__(self) -> str:
        return f"IntervalSet({str(self)!r})"

    def __str__(self) -> str:
        return " | ".join(map(str, self.intervals)) if self.intervals else "{}"

    def to_comparisons(self) -> list[list[tuple[str, Any]]]:
        """The set as a disjunction of conjunctions of comparisons (``[]``: empty, ``[[]]``: everything)."""
        out: list[list[tuple[str, Any]]] = []
        for iv in self.intervals:
            if iv.lo is not None and iv.hi is not None and iv.lo == iv.hi:
                out.append([("=", iv.lo)])
                continue
            if iv.lo is not None and iv.hi is not None and iv.lo_closed and iv.hi_closed:
                out.append([("between", (iv.lo, iv.hi))])
                continue
            terms: list[tuple[str, Any]] = []
            if iv.lo is not None:
                terms.append((">=" if iv.lo_closed else ">", iv.lo))
            if iv.hi is not None:
                terms.append(("<=" if iv.hi_closed else "<", iv.hi))
            out.append(terms)
        return out


class _SortKey:
    """Orders intervals by their start (unbounded first, closed before open at a tie)."""

    __slots__ = ("iv",)

    def __init__(self, iv: Interval):
        self.iv = iv

    def __lt__(self, other: "_SortKey") -> bool:
        return _starts_before(self.iv, other.iv)


def _max_lo(a: Interval, b: Interval) -> tuple[Any, bool]:
    if a.lo is None:
        return b.lo, b.lo_closed
    if b.lo is None:
        return a.lo, a.lo_closed
    if a.lo > b.lo:
        return a.lo, a.lo_closed
    if b.lo > a.lo:
        return b.lo, b.lo_closed
    return a.lo, a.lo_closed and b.lo_closed


def _min_hi(a: Interval, b: Interval) -> tuple[Any, bool]:
    if a.hi is None:
        return b.hi, b.hi_closed
    if b.hi is None:
        return a.hi, a.hi_closed
    if a.hi < b.hi:
        return a.hi, a.hi_closed
    if b.hi < a.hi:
        return b.hi, b.hi_closed
    return a.hi, a.hi_closed and b.hi_closed
