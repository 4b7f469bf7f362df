"""Selection predicates of APTs: disjunctions of conjunctions of comparisons, with exact implication.

An atom compares the value of one element path with a constant
(``/photons/photon/en >= 1.3``), or the difference of two paths with a
constant (``x/en - y/en >= 0.5``: the join conditions of Section 5). A
predicate is a disjunction of conjunctions (DNF) of atoms. Seen as a set of
points, a conjunction is a *box* (one :class:`IntervalSet` per dimension, a
dimension being a path, or a difference of paths, compared as numbers or as
strings) and a predicate a union of boxes, so:

* implication (paper Sect. 4.2, "the predicate in the query APT must imply
  the predicate of the stream APT") is box-in-union containment, decided
  exactly by subtracting boxes;
* relaxation (widening) is the union of the boxes;
* negation (the ``else`` branch of a conditional, rule 7) is the complement.

>>> p = parse_dnf([[("/s/i/en", ">=", 1.3), ("/s/i/ra", "between", (130.5, 135.5))]])
>>> q = parse_dnf([[("/s/i/ra", ">=", 120.0), ("/s/i/ra", "<=", 138.0)]])
>>> implies(p, q), implies(q, p)
(True, False)
>>> str(relax(p, q))
'(/s/i/ra >= 120.0 and /s/i/ra <= 138.0)'
"""

from __future__ import annotations

import operator
from itertools import product
from typing import Any, Callable, Iterable, Literal, Mapping

from pydantic import BaseModel, ConfigDict

from ..sharing.intervals import Interval, IntervalSet

__all__ = [
    "Atom",
    "DNF",
    "Dim",
    "TRUE",
    "FALSE",
    "parse_dnf",
    "conjoin",
    "disjoin",
    "negate",
    "implies",
    "equivalent",
    "relax",
    "normalize",
    "evaluate",
    "complement",
    "atom_holds",
]

Op = Literal["=", "!=", "<", "<=", ">", ">="]
Dim = tuple[str, str | None, str]
"""A dimension: (path, subtracted path or None, ``"number"`` or ``"string"``)."""

_EVERYTHING = IntervalSet.everything()
_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Atom(BaseModel):
    """``path op value``, or ``path - minus op value`` when ``minus`` is set (numbers only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    op: Op
    value: float | str
    minus: str | None = None

    @property
    def dim(self) -> Dim:
        return (self.path, self.minus, "string" if isinstance(self.value, str) else "number")

    def render(self, name: Callable[[str], str] = str) -> str:
        """The atom as WXQuery text, each path written by ``name``."""
        if isinstance(self.value, str):
            value = '"' + self.value + '"'
        else:
            value = repr(float(self.value))
        if self.minus is None:
            return f"{name(self.path)} {self.op} {value}"
        shift = float(self.value)
        tail = "" if shift == 0 else (f" + {shift!r}" if shift > 0 else f" - {-shift!r}")
        return f"{name(self.path)} {self.op} {name(self.minus)}{tail}"

    def __str__(self) -> str:
        return self.render()


class DNF(BaseModel):
    """A disjunction of conjunctions of atoms: ``()`` is false, ``((),)`` is true."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    any_of: tuple[tuple[Atom, ...], ...]

    @property
    def is_true(self) -> bool:
        return any(not conj for conj in self.any_of)

    @property
    def is_false(self) -> bool:
        return not self.any_of

    def paths(self) -> set[str]:
        """Every path the predicate reads."""
        out: set[str] = set()
        for conj in self.any_of:
            for atom in conj:
                out.add(atom.path)
                if atom.minus is not None:
                    out.add(atom.minus)
        return out

    def render(self, name: Callable[[str], str] = str) -> str:
        if self.is_true:
            return "true()"
        if self.is_false:
            return "false()"
        parts = [" and ".join(a.render(name) for a in conj) for conj in self.any_of]
        if len(parts) == 1:
            return parts[0] if len(self.any_of[0]) == 1 else f"({parts[0]})"
        return " or ".join(f"({p})" for p in parts)

    def __str__(self) -> str:
        return self.render()


TRUE = DNF(any_of=((),))
FALSE = DNF(any_of=())


def parse_dnf(disjuncts: Iterable[Iterable[tuple[str, str, Any]]]) -> DNF:
    """Build a predicate from ``[[(path, op, value), ...], ...]`` (``between`` takes a pair)."""
    conjs = []
    for conj in disjuncts:
        atoms: list[Atom] = []
        for path, op, value in conj:
            if op == "between":
                atoms += [Atom(path=path, op=">=", value=value[0]), Atom(path=path, op="<=", value=value[1])]
            else:
                atoms.append(Atom(path=path, op=op, value=value))
        conjs.append(tuple(atoms))
    return DNF(any_of=tuple(conjs))


# -- boxes -------------------------------------------------------------------------------

Box = dict[Dim, IntervalSet]


def complement(values: IntervalSet) -> IntervalSet:
    """The values not in ``values`` (of the same kind)."""
    gaps: list[Interval] = []
    lo: Any = None
    lo_closed = False
    open_below = True
    for iv in values.intervals:
        if iv.lo is not None:
            gaps.append(Interval(lo, lo_closed if not open_below else False, iv.lo, not iv.lo_closed))
        open_below = False
        if iv.hi is None:
            return IntervalSet(gaps)
        lo, lo_closed = iv.hi, not iv.hi_closed
    gaps.append(Interval(lo, lo_closed if not open_below else False, None, False))
    return IntervalSet(gaps)


def _atom_box(atom: Atom) -> Box:
    value: Any = atom.value if isinstance(atom.value, str) else float(atom.value)
    return {atom.dim: IntervalSet.from_comparison(atom.op, value)}


def _meet(a: Box, b: Box) -> Box | None:
    out = dict(a)
    for dim, values in b.items():
        both = out[dim].intersection(values) if dim in out else values
        if both.is_empty:
            return None
        out[dim] = both
    return out


def _boxes(p: DNF) -> list[Box]:
    boxes: list[Box] = []
    for conj in p.any_of:
        box: Box | None = {}
        for atom in conj:
            box = _meet(box, _atom_box(atom)) if box is not None else None
        if box is not None:
            boxes.append({d: v for d, v in box.items() if not v.is_everything})
    return boxes


def _minus(box: Box, cut: Box) -> list[Box]:
    """Disjoint boxes covering ``box`` minus ``cut``."""
    out: list[Box] = []
    current = dict(box)
    for dim, values in cut.items():
        have = current.get(dim, _EVERYTHING)
        outside = have.intersection(complement(values))
        if not outside.is_empty:
            out.append({**current, dim: outside})
        inside = have.intersection(values)
        if inside.is_empty:
            return out
        current[dim] = inside
    return out


def _covered(box: Box, cover: list[Box]) -> bool:
    pieces = [box]
    for cut in cover:
        pieces = [rest for piece in pieces for rest in _minus(piece, cut)]
        if not pieces:
            return True
    return not pieces


def _box_within(a: Box, b: Box) -> bool:
    return all(dim in a and values.contains(a[dim]) for dim, values in b.items())


def _from_boxes(boxes: list[Box]) -> DNF:
    """Boxes back to atoms: drop boxes inside another, order everything deterministically."""
    kept: list[Box] = []
    for i, box in enumerate(boxes):
        if any(_box_within(box, other) and (not _box_within(other, box) or j < i)
               for j, other in enumerate(boxes) if j != i):
            continue
        kept.append(box)
    conjs: set[tuple[Atom, ...]] = set()
    for box in kept:
        options = []
        for (path, minus, _kind), values in sorted(box.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            alternatives = []
            for terms in values.to_comparisons():
                atoms = []
                for op, value in terms:
                    if op == "between":
                        atoms += [Atom(path=path, minus=minus, op=">=", value=value[0]),
                                  Atom(path=path, minus=minus, op="<=", value=value[1])]
                    else:
                        atoms.append(Atom(path=path, minus=minus, op=op, value=value))
                alternatives.append(tuple(atoms))
            options.append(alternatives)
        for choice in product(*options):
            conjs.add(tuple(a for part in choice for a in part))
    if any(not c for c in conjs):
        return TRUE
    return DNF(any_of=tuple(sorted(conjs, key=lambda c: [(a.path, a.minus or "", a.op, str(a.value)) for a in c])))


# -- the algebra -------------------------------------------------------------------------

def normalize(p: DNF) -> DNF:
    """An equivalent predicate in canonical form (empty conjunctions and subsumed ones removed)."""
    return _from_boxes(_boxes(p))


def conjoin(*ps: DNF) -> DNF:
    """``p1 and p2 and ...``."""
    boxes: list[Box] = [{}]
    for p in ps:
        boxes = [m for a in boxes for b in _boxes(p) if (m := _meet(a, b)) is not None]
    return _from_boxes(boxes)


def disjoin(*ps: DNF) -> DNF:
    """``p1 or p2 or ...``."""
    return _from_boxes([b for p in ps for b in _boxes(p)])


relax = disjoin


def negate(p: DNF) -> DNF:
    """``not p`` (each conjunction's complement is a union of one-dimension boxes)."""
    result: list[Box] = [{}]
    for box in _boxes(p):
        outside = [{dim: complement(values)} for dim, values in box.items()]
        result = [m for a in result for b in outside if (m := _meet(a, b)) is not None]
        result = _boxes(_from_boxes(result))
    return _from_boxes(result)


def implies(p: DNF, q: DNF) -> bool:
    """Whether every point satisfying ``p`` satisfies ``q``."""
    cover = _boxes(q)
    return all(_covered(box, cover) for box in _boxes(p))


def equivalent(p: DNF, q: DNF) -> bool:
    return implies(p, q) and implies(q, p)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def atom_holds(atom: Atom, value_of: Callable[[Dim], Any]) -> bool:
    """Whether one comparison holds (a missing value fails it)."""
    value = value_of(atom.dim)
    return value is not None and _COMPARE[atom.op](value, atom.value)


def evaluate(p: DNF, value_of: Mapping[Dim, Any] | Callable[[Dim], Any]) -> bool:
    """Whether ``p`` holds for the values of its dimensions (a missing value fails every atom)."""
    get = value_of if callable(value_of) else value_of.get
    return any(all(atom_holds(a, get) for a in conj) for conj in p.any_of)
