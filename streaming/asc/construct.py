"""Attribute selection constructs (Def. 1 and Sect. 4.1 of Lee & Lee) and their index.

For every p-attribute (an attribute used by at least one predicate) an
:class:`Asc` splits the domain at its m distinct constants c1 < ... < cm into
2m+1 disjoint regions ``(-inf, c1), {c1}, (c1, c2), ..., {cm}, (cm, inf)``
numbered 0..2m (constant ck is region 2k-1, counting k from 1), and stores for
each region the query-result bitmap (bit j = 1 unless a tuple in the region
fails query j) and the candidate-arrow bitmap (bit i = 1 when ASC i could
still fail a query left alive by this region). Bitmaps are Python ints, so any
number of queries fits. One extra region, 2m+1, holds null values: it fails
every query that uses the attribute.

Every predicate is constant over a region, so region results are computed
from region positions alone (no sample value is needed; text works too).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..schema import coerce_value
from .predicates import Predicate, PredicateError, parse_queries

__all__ = ["Asc", "AscIndex", "region_of"]


def region_of(constants: tuple[Any, ...], value: Any) -> int:
    """The region number of ``value`` among sorted ``constants`` (null → 2m+1)."""
    if value is None:
        return 2 * len(constants) + 1
    k = bisect_left(constants, value)
    if k < len(constants) and constants[k] == value:
        return 2 * k + 1
    return 2 * k


def _failing(p: Predicate, pos: Mapping[Any, int], last: int) -> list[tuple[int, int]]:
    """The regions ``0..last`` whose values fail ``p``, as at most two ranges (constants at 2k+1)."""
    if p.op == "between":
        low, high = 2 * pos[p.value[0]] + 1, 2 * pos[p.value[1]] + 1
        return [(0, low - 1), (high + 1, last)]
    c = 2 * pos[p.value] + 1
    return {"=": [(0, c - 1), (c + 1, last)], "!=": [(c, c)], "<": [(c, last)], "<=": [(c + 1, last)],
            ">": [(0, c)], ">=": [(0, c - 1)]}[p.op]


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Ranges of region numbers merged where they overlap or touch."""
    out: list[tuple[int, int]] = []
    for first, final in sorted(spans):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], final))
        else:
            out.append((first, final))
    return out


@dataclass(frozen=True)
class Asc:
    """The construct of one p-attribute.

    ``qrb[r]`` and ``cab[r]`` for regions 0..2m+1 (the last is the null
    region); ``qub`` has bit j set when query j has a predicate here.
    """

    attribute: str
    type: str
    position: int
    constants: tuple[Any, ...]
    qub: int
    qrb: tuple[int, ...]
    cab: tuple[int, ...]

    @property
    def regions(self) -> int:
        """Number of regions including the null region (2m+2)."""
        return len(self.qrb)

    def region(self, value: Any) -> int:
        """Region number of a canonical value (binary search)."""
        return region_of(self.constants, value)


class AscIndex:
    """The ASCs of one relation's query set, in first-use order of attributes.

    Build it with :meth:`build` from ``{query_id: [predicate objects]}``;
    query j is the j-th id of that mapping and owns bit j of every bitmap.
    """

    def __init__(self, predicates: Mapping[str, list[Predicate]], relation: str | None = None):
        self.relation = relation
        self.predicates = dict(predicates)
        self.query_ids: tuple[str, ...] = tuple(self.predicates)
        self.all_queries = (1 << len(self.query_ids)) - 1
        by_attr: dict[str, list[tuple[int, Predicate]]] = {}
        for j, qid in enumerate(self.query_ids):
            for p in self.predicates[qid]:
                by_attr.setdefault(p.attribute, []).append((j, p))
        self.types = {a: ps[0][1].type for a, ps in by_attr.items()}
        self.ascs: tuple[Asc, ...] = tuple(self._construct(i, a, ps) for i, (a, ps) in enumerate(by_attr.items()))
        self.position = {a.attribute: a.position for a in self.ascs}
        self.ascs = tuple(self._with_cab(a) for a in self.ascs)

    @classmethod
    def build(cls, queries: Mapping[str, Iterable[Any]], types: Mapping[str, str] | None = None,
              relation: str | None = None) -> "AscIndex":
        """Parse predicate objects and construct the index; raises ``PredicateError``."""
        return cls(parse_queries(queries, types, relation), relation)

    def _construct(self, i: int, attr: str, preds: list[tuple[int, Predicate]]) -> Asc:
        consts: set[Any] = set()
        for _, p in preds:
            consts.update(p.value if p.op == "between" else (p.value,))
        constants = tuple(sorted(consts))
        pos = {c: k for k, c in enumerate(constants)}
        qub = 0
        for j, _ in preds:
            qub |= 1 << j
        # sweep the regions once: each predicate fails on at most two ranges of them, and a query on
        # the union of its predicates' ranges (merged, so each query's ranges are disjoint)
        last = 2 * len(constants)
        ranges: dict[int, list[tuple[int, int]]] = {}
        for j, p in preds:
            ranges.setdefault(j, []).extend(r for r in _failing(p, pos, last) if r[0] <= r[1])
        starts: dict[int, int] = {}
        ends: dict[int, int] = {}
        for j, spans in ranges.items():
            for first, final in _merged(spans):
                starts[first] = starts.get(first, 0) | 1 << j
                ends[final] = ends.get(final, 0) | 1 << j
        qrb = []
        fail = 0
        for r in range(last + 1):
            fail |= starts.get(r, 0)
            qrb.append(self.all_queries & ~fail)
            fail &= ~ends.get(r, 0)
        qrb.append(self.all_queries & ~qub)
        return Asc(attr, preds[0][1].type, i, constants, qub, tuple(qrb), ())

    def _with_cab(self, a: Asc) -> Asc:
        cab = []
        for bits in a.qrb:
            mask = 0
            for b in self.ascs:
                if b.position != a.position and bits & b.qub:
                    mask |= 1 << b.position
            cab.append(mask)
        return Asc(a.attribute, a.type, a.position, a.constants, a.qub, a.qrb, tuple(cab))

    def __len__(self) -> int:
        return len(self.ascs)

    def __repr__(self) -> str:
        return f"AscIndex({len(self.query_ids)} queries, {len(self.ascs)} ASCs)"

    def canonical(self, values: Mapping[str, Any]) -> list[Any]:
        """A tuple's p-attribute values in ASC order, checked against their types.

        Raises ``ValueRejected`` naming the attribute; absent values are null.
        """
        out = []
        for a in self.ascs:
            v = values.get(a.attribute)
            out.append(None if v is None else coerce_value(v, a.type, a.attribute))
        return out

    def regions(self, values: Mapping[str, Any]) -> list[int]:
        """The region of a tuple in every ASC (a full evaluation; used for samples)."""
        return [a.region(v) for a, v in zip(self.ascs, self.canonical(values))]

    def query_names(self, bitmap: int) -> list[str]:
        """Ids of the queries whose bits are set, in query order."""
        return [q for j, q in enumerate(self.query_ids) if bitmap >> j & 1]

    def to_json(self) -> dict[str, Any]:
        """The index's definition (what :meth:`from_json` rebuilds it from)."""
        return {"relation": self.relation, "types": dict(self.types),
                "queries": {q: [p.to_json() for p in ps] for q, ps in self.predicates.items()}}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "AscIndex":
        """Rebuild an index from :meth:`to_json` (on an executor, say)."""
        if not isinstance(doc, Mapping) or "queries" not in doc:
            raise PredicateError("index: expected an object with 'queries'")
        parsed = parse_queries(doc["queries"], doc.get("types"), doc.get("relation"))
        return cls(parsed, doc.get("relation"))
