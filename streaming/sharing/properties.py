"""Query properties: what a saved query needs from its stream (paper 002's APT, for our queries).

A plan (what an evaluator runs, or ``run-plan`` reads) lists keyword queries,
filter subscriptions (no keywords) and aggregate subscriptions as typed
entries (:class:`QueryEntry`, :class:`AggregateEntry`, pydantic with
``extra="forbid"``). Against a schema each becomes frozen *properties*:

* :class:`QueryProperties` — relations and attributes it needs (keys, FK
  columns, searchable text, predicate attributes), per-relation selection
  (attribute -> :class:`~streaming.sharing.intervals.IntervalSet`, a
  conjunction), window, Tmax, keyword set and output kind (``results`` of a
  keyword query, ``tuples`` of a filter subscription);
* :class:`AggregateProperties` — source (a relation with its pre-selection,
  or a query's results), aggregate, attribute, window (Δ, μ, kind), having.

Matching and merging (:mod:`streaming.sharing.matching`) work on these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..asc.predicates import Predicate, PredicateError, parse_predicate
from ..clock import ClockGuard
from ..keywords import parse_keywords
from ..schema import Schema
from .intervals import IntervalSet
from .windows import AGGREGATES, WINDOW_KINDS

__all__ = [
    "PREDICATE_OPS",
    "PredicateEntry",
    "QueryEntry",
    "RelationSource",
    "QuerySource",
    "AggregateEntry",
    "SharingPlan",
    "StreamEntry",
    "SubscriptionEntry",
    "Handoff",
    "EvaluatorPlan",
    "Selection",
    "QueryProperties",
    "AggregateProperties",
    "query_properties",
    "aggregate_properties",
    "parse_having",
]

PREDICATE_OPS = ("=", "!=", "<", "<=", ">", ">=", "between")


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PredicateEntry(_Entry):
    """``relation.attribute op value`` (``between``: ``value`` is ``[low, high]``)."""

    relation: str
    attribute: str
    op: Literal["=", "!=", "<", "<=", ">", ">=", "between"]
    value: Any


class QueryEntry(_Entry):
    """A keyword query (``keywords`` non-empty) or a filter subscription (no keywords)."""

    id: int
    keywords: list[str] = Field(default_factory=list)
    tmax: int = Field(default=5, ge=1, le=10)
    window_seconds: float | None = Field(default=None, gt=0)
    predicates: list[PredicateEntry] = Field(default_factory=list)


class RelationSource(_Entry):
    relation: str


class QuerySource(_Entry):
    query: int


class AggregateEntry(_Entry):
    """An aggregate subscription: ``aggregate(attribute)`` over a window of a source, every step."""

    id: int
    source: RelationSource | QuerySource
    aggregate: Literal["count", "sum", "avg", "min", "max"]
    attribute: str | None = None
    window: int = Field(gt=0)
    step: int = Field(gt=0)
    window_kind: Literal["time", "count"] = "time"
    having: str | None = None
    predicates: list[PredicateEntry] = Field(default_factory=list)

    @field_validator("having")
    @classmethod
    def _having_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_having(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "AggregateEntry":
        if self.aggregate != "count" and not self.attribute:
            raise ValueError(f"aggregate {self.id}: {self.aggregate} needs an attribute")
        if self.predicates and isinstance(self.source, QuerySource):
            raise ValueError(f"aggregate {self.id}: pre-selection predicates go with a relation source "
                             "(a query source is already selected by its query)")
        return self


class SharingPlan(_Entry):
    """What ``run-plan`` reads: a schema, queries and aggregate subscriptions (registration order)."""

    schema_: dict[str, Any] = Field(alias="schema")
    queries: list[QueryEntry] = Field(default_factory=list)
    aggregates: list[AggregateEntry] = Field(default_factory=list)
    clock: ClockGuard = Field(default_factory=ClockGuard)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _unique_ids(self) -> "SharingPlan":
        for kind, ids in (("query", [q.id for q in self.queries]), ("aggregate", [a.id for a in self.aggregates])):
            seen: set[int] = set()
            for i in ids:
                if i in seen:
                    raise ValueError(f"{kind} id {i} is given twice")
                seen.add(i)
        return self


class StreamEntry(_Entry):
    """The stream an evaluator reads: its id, name, schema document and source; ``dtd`` for an XML stream;
    ``clock`` its guard against absurd timestamps."""

    id: int
    name: str
    schema_: dict[str, Any] = Field(alias="schema")
    source: dict[str, Any]
    dtd: str | None = None
    clock: ClockGuard = Field(default_factory=ClockGuard)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class SubscriptionEntry(_Entry):
    """A WXQuery subscription of an XML stream: its id and text (compiled by the evaluator against the DTD)."""

    id: int
    text: str = Field(min_length=1)


class Handoff(_Entry):
    """Queries whose sharing class moves between two evaluators of a stream (``docs/scaling.md``).

    ``joining``: queries this evaluator takes over from evaluator
    ``source``; it builds their class from its own store and publishes only
    the changes of later ops, and holds those until ``source`` has published
    through the seq they joined at (``source`` publishes the earlier ones;
    one ahead of it would otherwise publish a later change first, and the
    publish script would drop the earlier ones). ``leaving``: queries it
    hands over; they leave with no remove of their live results.
    """

    joining: list[int] = Field(default_factory=list)
    leaving: list[int] = Field(default_factory=list)
    source: int | None = None


class EvaluatorPlan(_Entry):
    """What an evaluator re-reads at each batch boundary (written by the web tier with a new version).

    ``narrow`` is bumped by the operator action that narrows every class of
    the stream now (``manage.py narrow_stream``). A stream may run on
    several evaluators, each with the queries of the sharing classes placed
    on it: ``others`` are the stream's queries placed elsewhere (they set the
    store's retention, so every evaluator of the stream keeps the same
    tuples and judges every op alike, and they are part of the needs a
    pre-processor derives the stream with); ``primary`` is the one evaluator
    that runs the stream-wide work (WXQuery subscriptions and the dead
    letters of the raw stream); ``handoff`` says which queries arrive or
    leave by a move rather than by a plan change. ``frozen`` are the
    stream's disabled queries: one that leaves the plan by being disabled
    keeps its published results as they were (a deleted one gets a remove
    for each), and gets them reconciled with the engine's when enabled again.
    """

    version: int
    evaluator: int
    stream: StreamEntry
    queries: list[QueryEntry] = Field(default_factory=list)
    aggregates: list[AggregateEntry] = Field(default_factory=list)
    subscriptions: list[SubscriptionEntry] = Field(default_factory=list)
    narrow: int = 0
    others: list[QueryEntry] = Field(default_factory=list)
    primary: bool = True
    handoff: Handoff = Field(default_factory=Handoff)
    frozen: list[int] = Field(default_factory=list)

    @model_validator(mode="after")
    def _xml_subscriptions(self) -> "EvaluatorPlan":
        if self.subscriptions and not self.stream.dtd:
            raise ValueError("WXQuery subscriptions need an XML stream (stream.dtd)")
        ids = [s.id for s in self.subscriptions]
        if len(set(ids)) != len(ids):
            raise ValueError("a subscription id is given twice")
        if self.subscriptions and not self.primary:
            raise ValueError("WXQuery subscriptions run on the stream's primary evaluator")
        own = {q.id for q in self.queries}
        if own & {q.id for q in self.others}:
            raise ValueError("a query is both run here and listed among the others")
        if not set(self.handoff.joining) <= own:
            raise ValueError("a joining query must be one of the plan's queries")
        if own & set(self.handoff.leaving):
            raise ValueError("a leaving query must not be one of the plan's queries")
        if own & set(self.frozen):
            raise ValueError("a frozen (disabled) query must not be one of the plan's queries")
        return self


# ---------------------------------------------------------------------------------------------
# properties

#: per relation, a conjunction: attribute -> the values it may take
Selection = Mapping[str, Mapping[str, IntervalSet]]


@dataclass(frozen=True)
class QueryProperties:
    """What one query needs from the stream and which results it takes (frozen).

    ``relations`` are the relations whose tuples may take part (every relation
    for a keyword query; those with predicates for a filter subscription);
    ``selection[r]`` restricts the tuples of ``r`` (absent: all of them).
    """

    id: int
    keywords: frozenset[str]
    tmax: int
    window: float | None
    relations: frozenset[str]
    selection: Selection
    attributes: Mapping[str, frozenset[str]]
    predicates: tuple[Predicate, ...] = field(compare=False)
    output: Literal["results", "tuples"] = "results"

    @property
    def is_filter(self) -> bool:
        return not self.keywords


@dataclass(frozen=True)
class AggregateProperties:
    """One aggregate subscription against a schema (frozen)."""

    id: int
    source_relation: str | None
    source_query: int | None
    aggregate: str
    attribute: str | None
    value_relation: str | None
    window: tuple[int, int]
    kind: str
    having: tuple[str, Any] | None
    selection: Mapping[str, IntervalSet]
    predicates: tuple[Predicate, ...] = field(compare=False)
    output: Literal["values"] = "values"

    @property
    def share_key(self) -> tuple[Any, ...]:
        """What must be equal for two subscriptions to share windows: source, aggregate, pre-selection."""
        return (self.source_relation, self.source_query, self.aggregate, self.value_relation, self.attribute,
                self.kind, tuple(sorted((a, s) for a, s in self.selection.items())))


def _parse_predicates(entries: list[PredicateEntry], schema: Schema, where: str) -> tuple[Predicate, ...]:
    out = []
    for i, p in enumerate(entries):
        place = f"{where} predicate[{i}]"
        if p.relation not in schema.relations:
            raise PredicateError(f"{place}.relation: unknown relation {p.relation!r}")
        rel = schema.relations[p.relation]
        out.append(parse_predicate(p.model_dump(), rel.attributes, rel.name, place))
    return tuple(out)


def _selection(predicates: tuple[Predicate, ...]) -> dict[str, dict[str, IntervalSet]]:
    selection: dict[str, dict[str, IntervalSet]] = {}
    for p in predicates:
        assert p.relation is not None
        attrs = selection.setdefault(p.relation, {})
        values = IntervalSet.from_comparison(p.op, p.value)
        attrs[p.attribute] = attrs[p.attribute].intersection(values) if p.attribute in attrs else values
    return selection


def _structural_attributes(schema: Schema, relation: str) -> set[str]:
    rel = schema.relations[relation]
    return {rel.key, *(fk.column for fk in rel.foreign_keys)}


def query_properties(entry: QueryEntry, schema: Schema) -> QueryProperties:
    """The properties of one query; raises ``ValueError`` naming the bad place."""
    where = f"query {entry.id}"
    if not entry.keywords and not entry.predicates:
        raise ValueError(f"{where}: a query without keywords needs predicates (a filter subscription)")
    keywords = frozenset(parse_keywords(entry.keywords)) if entry.keywords else frozenset()
    predicates = _parse_predicates(entry.predicates, schema, where)
    selection = _selection(predicates)
    if keywords:
        relations = frozenset(schema.relations)
        attributes = {r: frozenset(_structural_attributes(schema, r) | set(schema.relations[r].searchable)
                                   | set(selection.get(r, {}))) for r in relations}
        output: Literal["results", "tuples"] = "results"
    else:
        relations = frozenset(selection)
        attributes = {r: frozenset(schema.relations[r].attributes) for r in relations}
        output = "tuples"
    return QueryProperties(entry.id, keywords, entry.tmax, entry.window_seconds, relations,
                           {r: dict(a) for r, a in selection.items()}, attributes, predicates, output)


def parse_having(text: str) -> tuple[str, float]:
    """``">= 100"`` -> ``(">=", 100.0)``; raises ``ValueError`` for anything else."""
    parts = text.split()
    if len(parts) != 2 or parts[0] not in ("=", "!=", "<", "<=", ">", ">="):
        raise ValueError(f"having {text!r}: expected 'OP number' with OP one of = != < <= > >=")
    try:
        return parts[0], float(parts[1])
    except ValueError:
        raise ValueError(f"having {text!r}: {parts[1]!r} is not a number") from None


def aggregate_properties(entry: AggregateEntry, schema: Schema,
                         queries: Mapping[int, QueryProperties]) -> AggregateProperties:
    """The properties of one aggregate subscription; raises ``ValueError`` naming the bad place."""
    where = f"aggregate {entry.id}"
    if entry.window_kind not in WINDOW_KINDS or entry.aggregate not in AGGREGATES:
        raise ValueError(f"{where}: unknown window kind or aggregate")
    predicates = _parse_predicates(entry.predicates, schema, where)
    if isinstance(entry.source, RelationSource):
        relation = entry.source.relation
        if relation not in schema.relations:
            raise ValueError(f"{where}.source: unknown relation {relation!r}")
        for p in predicates:
            if p.relation != relation:
                raise ValueError(f"{where}: a pre-selection predicate on {p.relation} for a source of {relation}")
        value_relation, attribute = relation, entry.attribute
        source_relation, source_query = relation, None
    else:
        if entry.source.query not in queries:
            raise ValueError(f"{where}.source: query {entry.source.query} is not in the plan")
        source_relation, source_query = None, entry.source.query
        value_relation, attribute = None, None
        if entry.attribute:
            value_relation, _, attribute = entry.attribute.rpartition(".")
            if not value_relation:
                raise ValueError(f"{where}.attribute: a query source needs 'Relation.attribute', "
                                 f"got {entry.attribute!r}")
    if attribute is not None:
        assert value_relation is not None
        rel = schema.relations.get(value_relation)
        if rel is None:
            raise ValueError(f"{where}.attribute: unknown relation {value_relation!r}")
        typ = rel.attributes.get(attribute)
        if typ is None:
            raise ValueError(f"{where}.attribute: unknown attribute {attribute!r} of {value_relation}")
        if entry.aggregate != "count" and typ not in ("int", "float", "timestamp"):
            raise ValueError(f"{where}.attribute: {entry.aggregate} needs a number, "
                             f"{value_relation}.{attribute} is {typ}")
    having = parse_having(entry.having) if entry.having else None
    selection = _selection(predicates).get(source_relation or "", {})
    return AggregateProperties(entry.id, source_relation, source_query, entry.aggregate, attribute,
                               value_relation, (entry.window, entry.step), entry.window_kind, having,
                               dict(selection), predicates)
