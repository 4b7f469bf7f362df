"""Sharing classes at run time: one evaluation per class over the stream's shared store.

A :class:`KeywordClass` runs one CN lattice (CNEvalDynamic) for all member
queries of one keyword set, with the class's merged Tmax, window and
selection hull; a :class:`FilterClass` serves the filter subscriptions
(queries without keywords: each admitted tuple is a result). Both read the
stream's :class:`~streaming.window.LiveStore` through a *view*: tuples
inserted inside the class's window that pass its selection. Their results go
to the members through a :class:`~streaming.sharing.delivery.Delivery`.

Two kinds of event-time work are scheduled on the engine's timer (so an op
costs nothing per class unless a class has something due): a member tuple
leaving a class window narrower than the store's retention, and a result
leaving a member window narrower than the class's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from time import perf_counter
from typing import Any, Callable, Mapping

from ..evaluate.dynamic import DynamicEvaluator
from ..evaluate.plan import LatticePlan
from ..evaluate.results import Result
from ..evaluate.static import evaluate_static
from ..lattice import Lattice
from ..schema import Schema
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
    """What keyword and filter classes share: properties, view, delivery, membership bit.

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
        # the class window is narrower than the store's: tuples outside it are hidden and members expire
        self.narrow_window = props.window is not None and (retention is None or props.window < retention)
        self.selection = {r: compile_selection(s) for r, s in props.selection.items()}
        self.delivery = self._delivery(sink)

    def _delivery(self, sink: Sink) -> Delivery:
        generation = self.generation

        def schedule(due: float, window: float, result: Result) -> None:
            self.timer(due, ("window", self, generation, window, result))

        return Delivery(self.members, self.props.window, self.props.tmax, self.store, sink, schedule)

    def set_members(self, members: Mapping[int, QueryProperties], sink: Sink) -> None:
        """New member set with unchanged properties (a query joined by matching, or left): re-filter."""
        self.members = dict(members)
        self.generation += 1
        self.delivery = self._delivery(sink)
        self.delivery.reset(self.live_results(), self.clock.now)

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

    def _joined(self, relation: str, key: Any, row: LiveTuple) -> None:
        """A tuple entered the class: schedule its leaving the class window."""
        self.timer(row.ts + self.props.window, ("expire", self, relation, key, row.serial))

    # -- ops -------------------------------------------------------------------------

    def insert(self, relation: str, key: Any, row: LiveTuple) -> None:
        started = perf_counter()
        now = self.clock.now
        for result in self._insert(relation, key, row):
            self.delivery.add(result, now)
        self.busy += perf_counter() - started

    def delete(self, relation: str, key: Any, row: LiveTuple) -> None:
        started = perf_counter()
        for result in self._delete(relation, key, row):
            self.delivery.remove(result)
        self.busy += perf_counter() - started

    def expire(self, relation: str, key: Any, row: LiveTuple) -> None:
        """The tuple left the class window (still in the store for wider classes)."""
        if row.classes & self.bit:
            self.delete(relation, key, row)

    @abstractmethod
    def build(self) -> None:
        """Evaluate the view's stored tuples at once and hand the results to the members."""

    @abstractmethod
    def _insert(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        """Evaluate an inserted tuple of the view; the new results."""

    @abstractmethod
    def _delete(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        """Withdraw a tuple leaving the view; the results that end."""

    @abstractmethod
    def live_results(self) -> list[Result]:
        """The class's live results, sorted."""

    def detach(self) -> None:
        """Clear this class's bit from every tuple and ignore its timers (dropped or replaced)."""
        self.alive = False
        bit = self.bit
        for rows in self.store.rows.values():
            for row in rows.values():
                row.classes &= ~bit

    def stats(self) -> dict[str, Any]:
        return {"class": self.index, "members": sorted(q.id for q in self.members.values()),
                "properties": self.props.to_json(), "busy_seconds": round(self.busy, 6),
                **self.delivery.stats()}


class KeywordClass(ClassRuntime):
    """One lattice for the member queries of one keyword set."""

    def __init__(self, index: int, props: ClassProperties, members: Mapping[int, QueryProperties],
                 store: LiveStore, clock: Clock, retention: float | None, sink: Sink,
                 timer: Callable[..., None], schema: Schema, vocabulary: Mapping[str, int],
                 lattices: Callable[[int, int], Lattice]):
        super().__init__(index, props, members, store, clock, retention, sink, timer)
        keywords = sorted(props.keywords)
        self.keywords = keywords
        lattice = lattices(len(keywords), props.tmax)
        self.plan = LatticePlan(lattice, schema, bits=[vocabulary[k] for k in keywords])
        self.keyword_bits = self.plan.keyword_bits
        self.evaluator = DynamicEvaluator(self.plan, store, admits=self.view(), class_bit=self.bit,
                                          on_join=self._joined if self.narrow_window else None)

    def build(self) -> None:
        """CNEvalStatic over the view's stored tuples, then hand out the results."""
        evaluate_static(self.evaluator)
        members = self.evaluator.member
        if self.narrow_window:
            rows = self.store.rows
            for relation, keys in members.items():
                for key in keys:
                    self._joined(relation, key, rows[relation][key])
        self.delivery.reset(self.live_results(), self.clock.now)

    def insert(self, relation: str, key: Any, row: LiveTuple) -> None:
        added = self.evaluator.insert(relation, key, row)
        if added:
            now, deliver = self.clock.now, self.delivery.add
            for result in added:
                deliver(result, now)

    def _insert(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        return self.evaluator.insert(relation, key, row)

    def _delete(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        return self.evaluator.delete(relation, key, row)

    def live_results(self) -> list[Result]:
        return self.evaluator.snapshot()

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "lattice_nodes": self.plan.size, **self.evaluator.stats()}


class FilterClass(ClassRuntime):
    """Filter subscriptions: every tuple in the view of a member relation is a result on its own."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.results: dict[tuple[str, Any], Result] = {}

    def build(self) -> None:
        view = self.view()
        for relation, rows in self.store.rows.items():
            for key, row in rows.items():
                if relation in self.props.relations and (view is None or view(relation, row)):
                    self._insert(relation, key, row)
        self.delivery.reset(self.live_results(), self.clock.now)

    def _insert(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        ref = (relation, key)
        result = Result((ref,), ())
        self.results[ref] = result
        row.classes |= self.bit
        if self.narrow_window:
            self._joined(relation, key, row)
        return [result]

    def _delete(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        result = self.results.pop((relation, key), None)
        row.classes &= ~self.bit
        return [] if result is None else [result]

    def live_results(self) -> list[Result]:
        return sorted(self.results.values(), key=lambda r: r.tuples)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "live_results": len(self.results)}
