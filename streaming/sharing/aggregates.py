"""Aggregate subscriptions at run time: one shared window per group of subscribers.

An :class:`AggregateClass` serves subscriptions with the same source (the
inserts of a relation that pass a pre-selection, or the results a query
gains), aggregate and attribute, whatever their windows: one
:class:`~streaming.sharing.windows.SharedWindowAggregator` over the class's
relaxed window (RelaxWindow) computes every subscriber's values from shared
partials (SELECTWINDOWS), and each value passing the subscriber's ``having``
goes to the sink as ``(subscription id, window end, value)``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ..evaluate.results import Result
from .classes import compile_selection
from .matching import AggregateClassProperties
from .properties import AggregateProperties
from .windows import Emission, SharedWindowAggregator, WindowSubscriber

__all__ = ["AggregateClass"]


class AggregateClass:
    """Subscribers sharing one relaxed window; ``pending`` is the engine's wake-up time for it."""

    def __init__(self, props: AggregateClassProperties, members: Sequence[AggregateProperties],
                 sink: Callable[[Any, float, Any], None]):
        first = members[0]
        self.props = props
        self.members = list(members)
        self.sink = sink
        self.source_relation = first.source_relation
        self.source_query = first.source_query
        self.attribute = first.attribute
        self.value_relation = first.value_relation
        self.preselection = compile_selection(first.selection)
        subscribers = [WindowSubscriber(m.id, m.window[0], m.window[1], m.aggregate, m.having) for m in members]
        self.aggregator = SharedWindowAggregator(first.kind, subscribers, relaxed=props.window)
        self.pending: float | None = None
        self.alive = True

    def _emit(self, emissions: list[Emission]) -> float | None:
        for e in emissions:
            self.sink(e.key, e.window_end, e.value)
        return self.aggregator.next_close

    def start(self, now: float) -> float | None:
        """The stream's clock starts (or the class joins a running stream) at ``now``."""
        return self._emit(self.aggregator.advance(now))

    def close(self, now: float) -> float | None:
        """Event time reached ``now``: emit the windows that closed; the next closing time."""
        return self._emit(self.aggregator.advance(now))

    def offer(self, ts: float, values: Mapping[str, Any]) -> float | None:
        """An inserted tuple of the source relation (taken if it passes the pre-selection)."""
        if self.preselection is not None and not self.preselection(values):
            return self.aggregator.next_close
        if self.attribute is None:
            return self._emit(self.aggregator.add(ts, None))
        value = values.get(self.attribute)
        if value is None:
            return self.aggregator.next_close
        return self._emit(self.aggregator.add(ts, value))

    def offer_result(self, now: float, result: Result, rows: Mapping[str, Mapping[Any, Any]]) -> float | None:
        """A result the source query gained at ``now``: one item, or one per tuple of the value relation."""
        if self.attribute is None:
            return self._emit(self.aggregator.add(now, None))
        emitted: list[Emission] = []
        for relation, key in result.tuples:
            if relation == self.value_relation:
                value = rows[relation][key].values.get(self.attribute)
                if value is not None:
                    emitted += self.aggregator.add(now, value)
        return self._emit(emitted)

    @property
    def signature(self) -> str:
        """What a saved state belongs to: the shared window, the source and the subscribers."""
        return repr((self.props.share_key, self.props.window, [(m.id, m.window, m.aggregate, m.having)
                                                              for m in self.members]))

    def stats(self) -> dict[str, Any]:
        return {**self.aggregator.stats(), "subscribers": [m.id for m in self.members],
                "source_relation": self.source_relation, "source_query": self.source_query}
