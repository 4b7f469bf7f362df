"""What saving a query would do to its stream: the sharing class it would join, and what it would cost.

The class comes from the engine's own registration rule
(``streaming.sharing.matching.registration_classes``, ``widen`` as the
evaluators run): the query joins the class of its keyword set and output
kind, unchanged when the class already serves it (``matches``), widened when
not, or starts one of its own. The cost is the placement's estimate
(``streaming.placement.unit_costs``): seconds of evaluation per op of the
class, from the work the evaluators measured (their sharing reports), a
query not measured yet counted at the mean of the measured ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from streaming import bus
from streaming.placement import unit_costs, units_of
from streaming.schema import Schema
from streaming.sharing.matching import ClassProperties, matches, registration_classes
from streaming.sharing.properties import QueryEntry, query_properties

from kwmonitor.streams.models import Stream

from .models import KeywordQuery

__all__ = ["Forecast", "forecast", "new_query_id"]


@dataclass(frozen=True)
class Forecast:
    label: str  # the class's keyword set, or "filter subscriptions"
    joins: bool  # an existing class
    widens: bool  # ... which must widen to serve it
    members: list[int] = field(default_factory=list)  # the class's other queries
    cost_before: float | None = None  # seconds of evaluation per op of the class, now (None: no class yet)
    cost_after: float | None = None  # ... with this query
    measured: bool = False  # the costs come from a sharing report (else: one unit per query, unmeasured)
    error: str = ""


def _label(props: ClassProperties | None, keywords: frozenset[str]) -> str:
    words = sorted(props.keywords if props is not None else keywords)
    return "{" + ", ".join(words) + "}" if words else "filter subscriptions"


def forecast(stream: Stream, entry: QueryEntry, client: redis.Redis) -> Forecast:
    """Where ``entry`` (a query of ``stream``, saved or not: its id is its own or a new one) would run."""
    schema = Schema.from_dict(stream.schema.to_document())
    rows = stream.queries.filter(enabled=True).exclude(pk=entry.id).order_by("id").prefetch_related("predicates")
    others = [QueryEntry.model_validate(q.plan_entry()) for q in rows]
    try:
        candidate = query_properties(entry, schema)
    except ValueError as exc:
        return Forecast("", False, False, error=str(exc))
    compiled = []
    for other in others:
        try:
            compiled.append(query_properties(other, schema))
        except ValueError:  # its evaluator reports it; it joins no class
            continue
    key = (candidate.keywords, candidate.output)
    existing = next((props for props, _ in registration_classes(compiled, "widen")
                     if (props.keywords, props.output) == key), None)
    members = next(members for _, members in registration_classes([*compiled, candidate], "widen")
                   if any(m.id == entry.id for m in members))
    try:
        reports = [r.model_dump() for r in bus.read_sharing_reports(client, stream.pk)]
    except redis.RedisError:
        reports = []
    measured = any(r.get("totals", {}).get("ops") for r in reports)
    unit_key = (tuple(sorted(candidate.keywords)), candidate.output)
    before = unit_costs(units_of(others, schema), reports)
    after = unit_costs(units_of([*others, entry], schema), reports)
    return Forecast(
        label=_label(existing, candidate.keywords), joins=existing is not None,
        widens=existing is not None and not matches(existing, candidate),
        members=[m.id for m in members if m.id != entry.id],
        cost_before=before.get(unit_key), cost_after=after.get(unit_key), measured=measured)


def new_query_id() -> int:
    """An id no saved query has, for a query not saved yet (it registers after every saved one)."""
    last = KeywordQuery.objects.order_by("-id").values_list("id", flat=True).first()
    return (last or 0) + 1
