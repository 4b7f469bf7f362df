"""What one viewer may see of a stream's events (the stream feed, docs/feeds.md).

A stream's events are written once for everyone who follows the stream, and
some of them name queries, aggregate subscriptions and WXQuery subscriptions
of several users. Staff see every event whole. Any other viewer gets each
event cut down to what :mod:`.access` lets them see:

* ``aggregate.value``: only the values of aggregate subscriptions they may see;
* ``sharing.report``: only the classes holding one of their queries, each
  naming only their queries as members (``members_total`` says how many there
  are) and without the selection and attributes, which are the hull of every
  member's predicates; only the aggregate classes one of their aggregate
  subscriptions rides on, naming only those (and the source query if theirs);
* ``evaluator.status`` and ``batch.metrics``: the errors and per-query state of
  their own queries and subscriptions only;
* ``deadletter``: the reason, without the raw line;
* ``asc.dropping``, ``asc.rearrangement``: whole (statistics of relations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from streaming.events import AggregateValue, BatchMetrics, DeadLetter, EvaluatorStatus, SharingReport

from .access import User, may_see_dead_letter_lines, visible_aggregates, visible_queries, visible_subscriptions

__all__ = ["Audience", "audience_of"]

# The class properties that are the hull of every member's predicates (other users' ones among them).
_PREDICATE_HULL = ("selection", "attributes")


def _keep(mapping: dict[str, Any], ids: frozenset[int]) -> dict[str, Any]:
    return {key: value for key, value in mapping.items() if key.isdigit() and int(key) in ids}


@dataclass(frozen=True)
class Audience:
    """The ids one viewer may see on one stream; ``None`` sets: everything (staff)."""

    queries: frozenset[int] | None
    aggregates: frozenset[int] | None
    subscriptions: frozenset[int] | None
    lines: bool

    @classmethod
    def everyone(cls) -> "Audience":
        """An audience that sees every event whole (staff)."""
        return cls(None, None, None, True)

    def view(self, event: BaseModel) -> BaseModel | None:
        """The event as this viewer may see it (None: not at all)."""
        if isinstance(event, DeadLetter) and not self.lines:
            event = event.model_copy(update={"line": None})
        if self.queries is None or self.aggregates is None or self.subscriptions is None:
            return event
        if isinstance(event, AggregateValue):
            return event if event.aggregate in self.aggregates else None
        if isinstance(event, EvaluatorStatus):
            return event.model_copy(update={"query_errors": _keep(event.query_errors, self.queries)})
        if isinstance(event, BatchMetrics):
            return event.model_copy(update={"state": self._state(event.state)})
        if isinstance(event, SharingReport):
            return self._report(event)
        return event

    def _state(self, state: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        assert self.queries is not None and self.aggregates is not None and self.subscriptions is not None
        out = _keep(state, self.queries)
        stream = dict(state.get("stream", {}))
        stream["query_errors"] = _keep(stream.get("query_errors", {}), self.queries)
        stream["aggregate_errors"] = _keep(stream.get("aggregate_errors", {}), self.aggregates)
        if "wxquery" in stream:
            stream["wxquery"] = {**stream["wxquery"], "errors": _keep(stream["wxquery"].get("errors", {}),
                                                                     self.subscriptions)}
        out["stream"] = stream
        return out

    def _report(self, report: SharingReport) -> SharingReport | None:
        assert self.queries is not None and self.aggregates is not None
        classes = []
        for cls in report.classes:
            mine = [m for m in cls.get("members", []) if m in self.queries]
            if mine:
                properties = {k: v for k, v in cls.get("properties", {}).items() if k not in _PREDICATE_HULL}
                classes.append({**cls, "members": mine, "members_total": len(cls["members"]), "properties": properties})
        aggregates = []
        for cls in report.aggregate_classes:
            mine = [s for s in cls.get("subscribers", []) if s in self.aggregates]
            if mine:
                source = cls.get("source_query")
                aggregates.append({**cls, "subscribers": mine, "subscribers_total": len(cls["subscribers"]),
                                   "source_query": source if source in self.queries else None})
        if not classes and not aggregates:
            return None
        return report.model_copy(update={"classes": classes, "aggregate_classes": aggregates})


def audience_of(user: User, stream_id: int) -> Audience:
    """What ``user`` may see of stream ``stream_id``'s events (a database read)."""
    if may_see_dead_letter_lines(user):  # staff
        return Audience.everyone()
    return Audience(
        queries=frozenset(visible_queries(user).filter(stream_id=stream_id).values_list("pk", flat=True)),
        aggregates=frozenset(visible_aggregates(user).filter(stream_id=stream_id).values_list("pk", flat=True)),
        subscriptions=frozenset(visible_subscriptions(user).filter(stream_id=stream_id).values_list("pk", flat=True)),
        lines=False,
    )
