"""Matching, merging (widening) and narrowing of sharing classes (paper 002, Sect. 4).

A *sharing class* is evaluated once for all its member queries with its
*class properties*: keyword set, Tmax, window, a selection hull per relation
and the attributes it needs. The paper's operations, for our queries:

* :func:`matches` — the class's evaluation already serves the query
  unchanged (containment): same keyword set and output kind, the query's
  relations and attributes are the class's, its predicates imply the
  class's (every attribute the class restricts, the query restricts to a
  subset), its window and Tmax are at most the class's;
* :func:`merge` — widening: union of relations and attributes, the hull of
  the selections per relation (on each attribute both restrict, the union of
  their value sets; an attribute only one restricts is not restricted),
  the largest window (none if either has none) and the largest Tmax;
* :func:`narrow` — the merge of the remaining members, for when a member has
  left (applied on demand: see :func:`should_narrow`).

Soundness: a merged class admits every tuple and every result each input
admitted, so each member's exact results are a filter of the class's
(``streaming.sharing.delivery``). Aggregate subscriptions match when their
source, aggregate and pre-selection are equal and the class window serves
theirs (:func:`~streaming.sharing.windows.serves`); widening relaxes the
window (:func:`~streaming.sharing.windows.relax_window`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from .intervals import IntervalSet
from .properties import AggregateProperties, QueryProperties, Selection
from .windows import relax_window, serves

__all__ = [
    "ClassProperties",
    "AggregateClassProperties",
    "matches",
    "merge",
    "narrow",
    "aggregate_matches",
    "aggregate_merge",
    "NarrowingRule",
    "should_narrow",
    "registration_classes",
    "registration_aggregate_classes",
]


@dataclass(frozen=True)
class ClassProperties:
    """The properties a sharing class is evaluated with."""

    keywords: frozenset[str]
    output: str
    tmax: int
    window: float | None
    relations: frozenset[str]
    selection: Selection
    attributes: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, query: QueryProperties) -> "ClassProperties":
        """The properties of a class created for ``query`` alone."""
        return cls(query.keywords, query.output, query.tmax, query.window, query.relations,
                   {r: dict(s) for r, s in query.selection.items()}, dict(query.attributes))

    def admits(self, relation: str, values: Mapping[str, Any]) -> bool:
        """Whether a tuple of ``relation`` passes the class's selection."""
        if relation not in self.relations:
            return False
        for attr, allowed in self.selection.get(relation, {}).items():
            value = values.get(attr)
            if value is None or value not in allowed:
                return False
        return True

    def to_json(self) -> dict[str, Any]:
        """For dashboards and stats: the hull as predicate disjunctions per attribute."""
        return {
            "keywords": sorted(self.keywords),
            "output": self.output,
            "tmax": self.tmax,
            "window_seconds": self.window,
            "relations": sorted(self.relations),
            "selection": {r: {a: str(s) for a, s in sorted(attrs.items())}
                          for r, attrs in sorted(self.selection.items()) if attrs},
            "attributes": {r: sorted(a) for r, a in sorted(self.attributes.items())},
        }


def _window_within(inner: float | None, outer: float | None) -> bool:
    return outer is None or (inner is not None and inner <= outer)


def _implies(query_sel: Mapping[str, IntervalSet], class_sel: Mapping[str, IntervalSet]) -> bool:
    return all(attr in query_sel and allowed.contains(query_sel[attr]) for attr, allowed in class_sel.items())


def matches(group: ClassProperties, query: QueryProperties) -> bool:
    """Whether the class serves ``query`` unchanged (its results are a filter of the class's)."""
    if group.keywords != query.keywords or group.output != query.output:
        return False
    if not query.relations <= group.relations:
        return False
    for relation in query.relations:
        if not _implies(query.selection.get(relation, {}), group.selection.get(relation, {})):
            return False
        if not query.attributes.get(relation, frozenset()) <= group.attributes.get(relation, frozenset()):
            return False
    if not _window_within(query.window, group.window):
        return False
    return query.output != "results" or query.tmax <= group.tmax


def _hull(a: Mapping[str, IntervalSet], b: Mapping[str, IntervalSet]) -> dict[str, IntervalSet]:
    """Per attribute restricted by both, the union; an attribute only one restricts is free."""
    out = {}
    for attr in a.keys() & b.keys():
        union = a[attr].union(b[attr])
        if not union.is_everything:
            out[attr] = union
    return out


def merge(group: ClassProperties, query: QueryProperties | ClassProperties) -> ClassProperties:
    """Widen ``group`` so it also serves ``query``; raises ``ValueError`` for another keyword set."""
    if group.keywords != query.keywords or group.output != query.output:
        raise ValueError("only classes of one keyword set and output kind merge")
    relations = group.relations | query.relations
    selection: dict[str, dict[str, IntervalSet]] = {}
    for relation in relations:
        if relation in group.relations and relation in query.relations:
            hull = _hull(group.selection.get(relation, {}), query.selection.get(relation, {}))
        elif relation in group.relations:
            hull = dict(group.selection.get(relation, {}))
        else:
            hull = dict(query.selection.get(relation, {}))
        if hull:
            selection[relation] = hull
    attributes = {r: group.attributes.get(r, frozenset()) | query.attributes.get(r, frozenset()) for r in relations}
    window = None if group.window is None or query.window is None else max(group.window, query.window)
    return ClassProperties(group.keywords, group.output, max(group.tmax, query.tmax), window, relations,
                           selection, attributes)


def narrow(members: Sequence[QueryProperties]) -> ClassProperties:
    """The properties of a class serving exactly ``members`` (the merge of their own)."""
    if not members:
        raise ValueError("a class without members has no properties")
    out = ClassProperties.of(members[0])
    for query in members[1:]:
        out = merge(out, query)
    return out


@dataclass(frozen=True)
class AggregateClassProperties:
    """A shared window of aggregate subscriptions: what they share and the relaxed window."""

    share_key: tuple[Any, ...]
    kind: str
    window: tuple[int, int]

    @classmethod
    def of(cls, sub: AggregateProperties) -> "AggregateClassProperties":
        return cls(sub.share_key, sub.kind, relax_window([sub.window]))


def aggregate_matches(group: AggregateClassProperties, sub: AggregateProperties) -> bool:
    """Same source, aggregate and pre-selection, and the class window serves the subscriber's."""
    return group.share_key == sub.share_key and serves(group.window, sub.window)


def aggregate_merge(group: AggregateClassProperties, sub: AggregateProperties) -> AggregateClassProperties:
    """Widen by relaxing the class window to one the subscriber's can also be combined from."""
    if group.share_key != sub.share_key:
        raise ValueError("only subscriptions of one source, aggregate and pre-selection share a window")
    return replace(group, window=relax_window([group.window, sub.window]))


@dataclass(frozen=True)
class NarrowingRule:
    """When a class wider than its members is narrowed (re-evaluated with their merge).

    Narrowing re-evaluates the class over the stored window, so it is done
    only when it pays: after at least ``min_results`` results since the
    class was (re)built, when at least ``waste`` of them reached no member
    (work spent on the departed members' needs), or at once when the members'
    Tmax dropped by ``tmax_drop`` or more (the lattice shrinks by orders of
    magnitude with Tmax).
    """

    min_results: int = 200
    waste: float = 0.5
    tmax_drop: int = 2


def should_narrow(current: ClassProperties, narrowed: ClassProperties, produced: int, undelivered: int,
                  rule: NarrowingRule = NarrowingRule()) -> bool:
    """Apply :class:`NarrowingRule` to a class with ``produced`` results since its build."""
    if narrowed == current:
        return False
    if current.output == "results" and current.tmax - narrowed.tmax >= rule.tmax_drop:
        return True
    return produced >= rule.min_results and undelivered >= rule.waste * produced


def _register(items: Iterable[Any], mode: str, of: Callable[[Any], Any], serves: Callable[[Any, Any], bool],
              widen: Callable[[Any, Any], Any], key: Callable[[Any], Any]) -> list[tuple[Any, list[Any]]]:
    """Items registered one after another: each joins the first class that serves it, or (``widen``)
    widens the class of its key, or starts a class of its own. A class serves only items of its own
    key, so each item is tried against the classes of its key alone."""
    classes: list[tuple[Any, list[Any]]] = []
    of_key: dict[Any, list[int]] = {}  # positions in ``classes`` of each key's classes, in order
    for item in items:
        positions = of_key.setdefault(key(item), [])
        for i in positions:
            props, members = classes[i]
            if mode != "none" and serves(props, item):
                members.append(item)
                break
            if mode == "widen":
                classes[i] = (widen(props, item), members + [item])
                break
        else:
            positions.append(len(classes))
            classes.append((of(item), [item]))
    return classes


def registration_classes(queries: Iterable[QueryProperties], mode: str
                         ) -> list[tuple[ClassProperties, list[QueryProperties]]]:
    """Sharing classes and their members for queries registered one after another."""
    return _register(queries, mode, ClassProperties.of, matches, merge, lambda x: (x.keywords, x.output))


def registration_aggregate_classes(subs: Iterable[AggregateProperties], mode: str
                                   ) -> list[tuple[AggregateClassProperties, list[AggregateProperties]]]:
    """Shared windows and their subscribers for aggregate subscriptions registered one after another."""
    return _register(subs, mode, AggregateClassProperties.of, aggregate_matches, aggregate_merge,
                     lambda x: x.share_key)
