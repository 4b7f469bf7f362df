"""Sharing classes at run time: the queries served by one evaluation, and what each of them gets.

A :class:`KeywordClass` is the member queries of one keyword set; the
stream's shared lattice (:class:`~streaming.evaluate.shared.SharedLatticeEvaluator`)
evaluates every keyword set of the stream at once over the shared store, and
each class takes its keyword set's results of at most its Tmax tuples. A
:class:`FilterClass` serves the filter subscriptions (queries without
keywords: each admitted tuple is a result) through a *view* of the store:
tuples inserted inside the class's window that pass its selection. Every
class hands its results to its members through a
:class:`~streaming.sharing.delivery.Delivery` (each member's own Tmax,
window and predicates).

Two kinds of event-time work are scheduled on the engine's timers
(:class:`~streaming.sharing.timers.EventTimers`), so an op costs nothing per
class unless a class has something due: a tuple leaving a filter class's
window narrower than the store's retention, and a result leaving a member
window narrower than the class's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from time import perf_counter
from typing import Any, Callable, Mapping

from ..evaluate.results import Result
from ..evaluate.shared import SharedLatticeEvaluator
from ..window import LiveStore, LiveTuple
from .delivery import Delivery, Sink
from .intervals import IntervalSet
from .matching import ClassProperties
from .properties import QueryProperties

__all__ = ["Clock", "ClassRuntime", "KeywordClass", "FilterClass", "compile_selection"]


class Clock:
    """The stream's event time, read by class views (one attribute shared by all classes)."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = float("-inf")


def compile_selection(selection: Mapping[str, IntervalSet]) -> Callable[[dict], bool] | None:
    """A fast test of one relation's conjunctive selection (None: everything passes)."""
    tests: list[tuple[str, Any, bool, Any, bool]] = []
    sets: list[tuple[str, IntervalSet]] = []
    for attr, allowed in selection.items():
        if len(allowed.intervals) == 1:
            iv = allowed.intervals[0]
            tests.append((attr, iv.lo, iv.lo_closed, iv.hi, iv.hi_closed))
        else:
            sets.append((attr, allowed))
    if not tests and not sets:
        return None

    def passes(values: dict) -> bool:
        for attr, lo, lo_closed, hi, hi_closed in tests:
            v = values.get(attr)
            if v is None:
                return False
            if lo is not None and (v < lo or (v == lo and not lo_closed)):
                return False
            if hi is not None and (v > hi or (v == hi and not hi_closed)):
                return False
        for attr, allowed in sets:
            v = values.get(attr)
            if v is None or v not in allowed:
                return False
        return True

    return passes


class ClassRuntime(ABC):
    """What keyword and filter classes share: properties, members, delivery, membership bit.

    ``alive`` turns False when the engine drops or replaces the class, so
    its pending timers are ignored; ``generation`` counts member-set changes
    (a result-window timer of an older delivery is ignored).
    """

    def __init__(self, index: int, props: ClassProperties, members: Mapping[int, QueryProperties],
                 store: LiveStore, clock: Clock, retention: float | None, sink: Sink,
                 timer: Callable[..., None]):
        self.index = index
        self.bit = 1 << index
        self.props = props
        self.members = dict(members)
        self.store = store
        self.clock = clock
        self.timer = timer
        self.retention = retention
        self.alive = True
        self.generation = 0
        self.busy = 0.0  # seconds spent evaluating ops (the measured work placement estimates cost from)
        self.delivery = self._delivery(sink)

    def _delivery(self, sink: Sink) -> Delivery:
        generation = self.generation

        def schedule(due: float, window: float, result: Result) -> None:
            self.timer(due, ("window", self, generation, window, result))

        return Delivery(self.members, self.delivery_window(), self.props.tmax, self.store, sink, schedule)

    @abstractmethod
    def delivery_window(self) -> float | None:
        """The window of the tuples the class's results are made of (members narrower than it are
        filtered by their own)."""

    def set_members(self, members: Mapping[int, QueryProperties], sink: Sink) -> None:
        """New member set with unchanged properties (a query joined by matching, or left): re-filter."""
        self.members = dict(members)
        self.generation += 1
        self.delivery = self._delivery(sink)
        self.delivery.reset(self.live_results(), self.clock.now)

    @abstractmethod
    def build(self) -> None:
        """Hand the class's results over the stored tuples to the members (a new or rebuilt class)."""

    @abstractmethod
    def live_results(self) -> list[Result]:
        """The class's live results, sorted."""

    def detach(self) -> None:
        """Ignore this class's timers from now on (it was dropped or replaced)."""
        self.alive = False

    def stats(self) -> dict[str, Any]:
        return {"class": self.index, "members": sorted(q.id for q in self.members.values()),
                "properties": self.props.to_json(), "busy_seconds": round(self.busy, 6),
                **self.delivery.stats()}


class KeywordClass(ClassRuntime):
    """The member queries of one keyword set, served by the stream's shared lattice.

    The lattice evaluates the class's keyword set (id ``kid``) once for every
    class of it, over every stored tuple: a keyword class has no view of its
    own, and its members' windows and predicates are applied by its delivery
    (a member's results are the MTJNTs whose tuples all lie in its window and
    pass its predicates, docs/sharing.md). The class takes the results of at
    most its Tmax tuples.
    """

    def __init__(self, index: int, props: ClassProperties, members: Mapping[int, QueryProperties],
                 store: LiveStore, clock: Clock, retention: float | None, sink: Sink,
                 timer: Callable[..., None], network: SharedLatticeEvaluator, kid: int):
        self.network = network
        self.kid = kid
        super().__init__(index, props, members, store, clock, retention, sink, timer)

    def delivery_window(self) -> float | None:
        return self.retention

    @property
    def keyword_bits(self) -> int:
        """The class's keywords as bits of the stream's vocabulary."""
        return self.network.plan.keyword_bits[self.kid]

    def build(self) -> None:
        self.delivery.reset(self.live_results(), self.clock.now)

    def takes(self, result: Result) -> bool:
        """Whether a result of the keyword set is one of the class's (at most its Tmax tuples)."""
        return len(result.tuples) <= self.props.tmax

    def live_results(self) -> list[Result]:
        tmax = self.props.tmax
        return sorted((r for r in self.network.results.of.get(self.kid, ()) if len(r.tuples) <= tmax),
                      key=lambda r: (r.tuples, r.edges))

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "lattice_nodes": len(self.network.plan.nodes_of(self.kid))}


class FilterClass(ClassRuntime):
    """Filter subscriptions: every tuple in the view of a member relation is a result on its own."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        props, retention = self.props, self.retention
        # the class window is narrower than the store's: tuples outside it are hidden and leave on a timer
        self.narrow_window = props.window is not None and (retention is None or props.window < retention)
        self.selection = {r: compile_selection(s) for r, s in props.selection.items()}
        self.results: dict[tuple[str, Any], Result] = {}

    def delivery_window(self) -> float | None:
        return self.props.window

    def detach(self) -> None:
        """Also clear the class's bit from every tuple."""
        super().detach()
        bit = self.bit
        for rows in self.store.rows.values():
            for row in rows.values():
                row.classes &= ~bit

    # -- the view ------------------------------------------------------------------

    def admits_new(self, relation: str, row: LiveTuple) -> bool:
        """Whether an inserted tuple is in the class's view (it is inside every window)."""
        if relation not in self.props.relations:
            return False
        test = self.selection.get(relation)
        return test is None or test(row.values)

    def view(self) -> Callable[[str, LiveTuple], bool] | None:
        """The test hiding stored tuples outside the class window or selection (None: all visible)."""
        selection, clock, window = self.selection, self.clock, self.props.window
        relations = self.props.relations
        narrow = self.narrow_window
        if not narrow and not any(selection.values()) and len(relations) == len(self.store.rows):
            return None

        def admits(relation: str, row: LiveTuple) -> bool:
            if narrow and row.ts + window <= clock.now:
                return False
            if relation not in relations:
                return False
            test = selection.get(relation)
            return test is None or test(row.values)

        return admits

    # -- ops -------------------------------------------------------------------------

    def insert(self, relation: str, key: Any, row: LiveTuple) -> None:
        started = perf_counter()
        self.delivery.add(self._take(relation, key, row), self.clock.now)
        self.busy += perf_counter() - started

    def delete(self, relation: str, key: Any, row: LiveTuple) -> None:
        started = perf_counter()
        result = self.results.pop((relation, key), None)
        row.classes &= ~self.bit
        if result is not None:
            self.delivery.remove(result)
        self.busy += perf_counter() - started

    def expire(self, relation: str, key: Any, row: LiveTuple) -> None:
        """The tuple left the class window (still in the store for wider classes)."""
        if row.classes & self.bit:
            self.delete(relation, key, row)

    def build(self) -> None:
        view = self.view()
        for relation, rows in self.store.rows.items():
            for key, row in rows.items():
                if relation in self.props.relations and (view is None or view(relation, row)):
                    self._take(relation, key, row)
        self.delivery.reset(self.live_results(), self.clock.now)

    def _take(self, relation: str, key: Any, row: LiveTuple) -> Result:
        ref = (relation, key)
        result = Result((ref,), ())
        self.results[ref] = result
        row.classes |= self.bit
        if self.narrow_window:
            self.timer(row.ts + self.props.window, ("expire", self, relation, key, row.serial))
        return result

    def live_results(self) -> list[Result]:
        return sorted(self.results.values(), key=lambda r: r.tuples)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "live_results": len(self.results)}
