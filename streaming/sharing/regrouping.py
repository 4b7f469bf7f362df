"""How a plan change regroups the queries into sharing classes, worked out before any class is rebuilt.

The live classes keep their index, properties and members. A query that
leaves (or changes) leaves its class; a joining query is placed, in
registration order, by the sharing mode: in the first class of its keyword
set and output that serves it unchanged (:func:`~streaming.sharing.matching.matches`),
or, widening, in the first such class merged with it; else in a new class
at the lowest free index. A class whose members changed keeps its properties
until :func:`~streaming.sharing.matching.should_narrow` says to narrow it.
The store keeps tuples for the widest window of the classes left
(:meth:`Regrouping.retention`).
"""

from __future__ import annotations

import bisect
from typing import Iterable, Sequence

from .classes import ClassRuntime
from .matching import ClassProperties, NarrowingRule, matches, merge, narrow, should_narrow
from .properties import QueryProperties

__all__ = ["SHARING_MODES", "Regrouping"]

SHARING_MODES = ("match", "widen")


class Regrouping:
    """One plan change's sharing classes: ``groups`` maps each class index to its properties and its
    members by query bit; ``touched`` are the classes whose members or properties changed.

    Start it from the live classes, then :meth:`leave`, :meth:`join` and
    :meth:`narrow_classes`, in this order. A class every member left stays
    in ``groups`` with no members (its index is not reused in this change).
    """

    def __init__(self, classes: Iterable[ClassRuntime], mode: str):
        self.mode = mode
        self._current = {c.index: c for c in classes}
        self.groups: dict[int, tuple[ClassProperties, dict[int, QueryProperties]]] = {
            index: (c.props, dict(c.members)) for index, c in self._current.items()}
        self.touched: set[int] = set()

    def leave(self, index: int, bit: int) -> None:
        """The query of ``bit`` leaves the class ``index``."""
        del self.groups[index][1][bit]
        self.touched.add(index)

    def join(self, queries: Iterable[tuple[int, QueryProperties]]) -> None:
        """Place joining queries, each given as ``(bit, properties)``, in registration order."""
        of_key: dict[tuple, list[int]] = {}  # the classes that can take a query of (keywords, output), in order
        for index in sorted(self.groups):
            props = self.groups[index][0]
            of_key.setdefault((props.keywords, props.output), []).append(index)
        for bit, q in queries:
            self.touched.add(self._place(bit, q, of_key))

    def _place(self, bit: int, q: QueryProperties, of_key: dict[tuple, list[int]]) -> int:
        """Put a joining query in the first class that serves it (or, widening, the class of its
        keyword set); else in a new class. Returns the class index. ``of_key`` lists the classes of
        each (keywords, output) in index order (only those can serve a query of it); a new class joins it."""
        groups = self.groups
        indexes = of_key.setdefault((q.keywords, q.output), [])
        for index in indexes:
            props, members = groups[index]
            if matches(props, q):
                members[bit] = q
                return index
            if self.mode == "widen":
                members[bit] = q
                groups[index] = (merge(props, q), members)
                return index
        index = min(set(range(len(groups) + 1)) - set(groups))
        groups[index] = (ClassProperties.of(q), {bit: q})
        bisect.insort(indexes, index)
        return index

    def narrow_classes(self, rule: NarrowingRule, now: bool) -> None:
        """Narrow each touched live class the rule says to, judged by what its delivery produced since
        it was built; ``now``: every live class with members, to the merge of its members."""
        groups = self.groups
        for index in sorted(self.touched):
            props, members = groups[index]
            current = self._current.get(index)
            if current is None or not members:
                continue
            narrowed = narrow(list(members.values()))
            if now or should_narrow(props, narrowed, current.delivery.produced, current.delivery.undelivered, rule):
                groups[index] = (narrowed, members)
        if now:
            for index in sorted(self._current):
                members = groups[index][1]
                if members:
                    groups[index] = (narrow(list(members.values())), members)
                    self.touched.add(index)

    def retention(self, others: Sequence[QueryProperties] = ()) -> float | None:
        """The store's retention: the widest window of the classes with members and of ``others`` (the
        stream's queries evaluated elsewhere); None if one of them has no window, or there are none."""
        windows = [props.window for props, members in self.groups.values() if members]
        windows += [q.window for q in others]
        if not windows or any(w is None for w in windows):
            return None
        return max(w for w in windows if w is not None)
