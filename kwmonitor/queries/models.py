"""Saved continuous keyword queries and their selection predicates.

A query belongs to a schema and, to run, to a stream over that schema; its
enabled state and content make up the evaluator's plan (see
``kwmonitor.streams.plans``). A query with predicates and no keywords is a
*filter subscription*: its results are the single tuples that satisfy its
predicates (issue 4, item 1). A query with neither is invalid.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from streaming.keywords import KeywordError, parse_keywords
from streaming.schema import SchemaError, ValueRejected, coerce_value
from streaming.wxquery.apt import Abstraction
from streaming.wxquery.backtranslate import to_wxquery
from streaming.wxquery.live import compile_for_stream
from streaming.wxquery.parser import WXQueryError
from streaming.wxquery.translate import Subscription
from streaming.xmlstream.dtd import DTDError

__all__ = ["TMAX_MIN", "TMAX_MAX", "OPS", "EMPTY_QUERY", "KeywordQuery", "Predicate", "AggregateSubscription",
           "WXQuerySubscription"]

TMAX_MIN, TMAX_MAX = 1, 10
OPS = ("=", "!=", "<", "<=", ">", ">=", "between")
# Operators that make sense on each attribute type (bool has no order).
_TYPE_OPS = {"bool": ("=", "!=")}
EMPTY_QUERY = ("A query needs keywords, or at least one predicate (a filter subscription: "
               "its results are the tuples that satisfy the predicates).")


class KeywordQuery(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="keyword_queries")
    name = models.CharField(max_length=100)
    schema = models.ForeignKey("catalog.Schema", on_delete=models.PROTECT, related_name="queries")
    stream = models.ForeignKey(
        "streams.Stream", on_delete=models.SET_NULL, null=True, blank=True, related_name="queries",
        help_text="The stream it is evaluated on; its schema must be the query's schema.",
    )
    keywords = models.CharField(
        max_length=500, blank=True,
        help_text="Distinct single tokens, separated by spaces. Empty: a filter subscription "
                  "(needs at least one predicate; its results are the matching tuples).",
    )
    tmax = models.PositiveSmallIntegerField(
        "Tmax", default=5, validators=[MinValueValidator(TMAX_MIN), MaxValueValidator(TMAX_MAX)],
        help_text=f"Maximum number of tuples in a result ({TMAX_MIN}..{TMAX_MAX}).",
    )
    window_seconds = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.001)],
        help_text="Sliding window in seconds of event time; empty = unbounded.",
    )
    enabled = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        verbose_name = "keyword query"
        verbose_name_plural = "keyword queries"

    def __str__(self) -> str:
        if self.is_filter:
            return f"{self.name} (filter subscription)"
        return f"{self.name} {{{', '.join(self.keyword_list())}}}"

    @property
    def is_filter(self) -> bool:
        """A filter subscription: no keywords, results are the tuples satisfying the predicates."""
        return not (self.keywords or "").split()

    def keyword_list(self) -> list[str]:
        """The normalised keywords (empty for a filter subscription, or if they do not parse; :meth:`clean` reports why)."""
        if self.is_filter:
            return []
        try:
            return list(parse_keywords(self.keywords))
        except KeywordError:
            return []

    def clean(self) -> None:
        """Normalise the keywords and check Tmax, stream and schema.

        Empty keywords are accepted here: whether the query then has a
        predicate is known only with its predicates (the admin's inline, or
        :meth:`check_content` once they are saved).
        """
        errors: dict[str, str] = {}
        if self.is_filter:
            self.keywords = ""
        else:
            try:
                self.keywords = " ".join(parse_keywords(self.keywords))
            except KeywordError as exc:
                errors["keywords"] = str(exc)
        if self.tmax is not None and not TMAX_MIN <= self.tmax <= TMAX_MAX:
            errors["tmax"] = f"Tmax must be between {TMAX_MIN} and {TMAX_MAX}."
        if self.stream_id is not None and self.schema_id is not None and self.stream.schema_id != self.schema_id:
            errors["stream"] = f"stream {self.stream.name!r} carries schema {self.stream.schema.name!r}, not this query's schema"
        if self.schema_id is not None:
            try:
                self.schema.graph()
            except SchemaError as exc:
                errors["schema"] = f"schema {self.schema.name!r} is invalid: {exc}"
        if errors:
            raise ValidationError(errors)

    def check_content(self, predicates: int | None = None) -> None:
        """Reject a query with neither keywords nor predicates.

        ``predicates`` is how many predicates the query will have (the admin
        passes its inline's count); by default the saved ones are counted.
        """
        if not self.is_filter:
            return
        if predicates is None:
            predicates = self.predicates.count() if self.pk is not None else 0
        if predicates == 0:
            raise ValidationError({"keywords": EMPTY_QUERY})

    def plan_entry(self) -> dict[str, Any]:
        """This query as it appears in an evaluator's plan (``"keywords": []`` for a filter subscription)."""
        return {
            "id": self.pk,
            "keywords": self.keyword_list(),
            "tmax": self.tmax,
            "window_seconds": self.window_seconds,
            "predicates": [p.plan_entry() for p in self.predicates.all()],
        }


class Predicate(models.Model):
    """A selection predicate ``relation.attribute op value``; a query's predicates are a conjunction."""

    query = models.ForeignKey(KeywordQuery, on_delete=models.CASCADE, related_name="predicates")
    relation = models.CharField(max_length=100)
    attribute = models.CharField(max_length=100)
    op = models.CharField(max_length=8, choices=[(o, o) for o in OPS])
    value = models.JSONField(help_text='A JSON value of the attribute\'s type; for "between" a list [low, high].')

    class Meta:
        ordering = ["query", "id"]

    def __str__(self) -> str:
        return f"{self.relation}.{self.attribute} {self.op} {self.value!r}"

    def clean(self) -> None:
        # In an admin inline the query may be new (unsaved) but already attached.
        attached = self.query_id is not None or type(self).query.is_cached(self)
        query = self.query if attached else None
        if query is None or query.schema_id is None:
            return
        try:
            graph = query.schema.graph()
        except SchemaError:
            return  # reported on the query
        rel = graph.relations.get(self.relation)
        if rel is None:
            raise ValidationError({"relation": f"unknown relation {self.relation!r} in schema {graph.name!r}"})
        typ = rel.attributes.get(self.attribute)
        if typ is None:
            raise ValidationError({"attribute": f"unknown attribute {self.attribute!r} of {self.relation}"})
        if self.op not in _TYPE_OPS.get(typ, OPS):
            raise ValidationError({"op": f"{self.op!r} does not apply to {typ} attribute {self.relation}.{self.attribute}"})
        where = f"{self.relation}.{self.attribute}"
        try:
            if self.op == "between":
                if not isinstance(self.value, list) or len(self.value) != 2:
                    raise ValueRejected(f"{where}: 'between' needs a list [low, high]")
                low, high = (coerce_value(v, typ, where) for v in self.value)
                if low > high:
                    raise ValueRejected(f"{where}: low {low!r} is above high {high!r}")
                self.value = [low, high]
            else:
                if self.value is None:
                    raise ValueRejected(f"{where}: a value is required")
                self.value = coerce_value(self.value, typ, where)
        except ValueRejected as exc:
            raise ValidationError({"value": str(exc)}) from None

    def plan_entry(self) -> dict[str, Any]:
        return {"relation": self.relation, "attribute": self.attribute, "op": self.op, "value": self.value}


AGGREGATES = (("count", "count"), ("sum", "sum"), ("avg", "average"), ("min", "minimum"), ("max", "maximum"))
WINDOW_KINDS = (("time", "event-time window (seconds)"), ("count", "count window (items)"))


class AggregateSubscription(models.Model):
    """A windowed aggregate over a stream, shared with others of the same source (docs/sharing.md).

    The source is either the inserts of a relation of the stream (optionally
    pre-selected by ``predicates``) or the results a saved query gains.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="aggregate_subscriptions")
    name = models.CharField(max_length=100)
    stream = models.ForeignKey("streams.Stream", on_delete=models.CASCADE, related_name="aggregates")
    source_query = models.ForeignKey(
        KeywordQuery, on_delete=models.CASCADE, null=True, blank=True, related_name="aggregates",
        help_text="Aggregate the results this query gains (leave empty to aggregate a relation's inserts).",
    )
    source_relation = models.CharField(
        max_length=100, blank=True, help_text="Aggregate the inserts of this relation (when no query is chosen).")
    aggregate = models.CharField(max_length=8, choices=AGGREGATES, default="count")
    attribute = models.CharField(
        max_length=200, blank=True,
        help_text="The attribute aggregated: an attribute of the relation, or 'Relation.attribute' of a query's "
                  "results. Empty with count: count the inserts (or the new results).",
    )
    window = models.PositiveIntegerField(help_text="Window size Δ: seconds of event time, or items.")
    step = models.PositiveIntegerField(help_text="A value every μ seconds (or items).")
    window_kind = models.CharField(max_length=8, choices=WINDOW_KINDS, default="time")
    having = models.CharField(max_length=40, blank=True, help_text="Emit only values passing 'OP number', e.g. '>= 100'.")
    predicates = models.JSONField(
        default=list, blank=True,
        help_text='Pre-selection of a relation source: a list of {"relation", "attribute", "op", "value"}.',
    )
    enabled = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        what = f"{self.aggregate}({self.attribute or '*'})"
        source = f"results of {self.source_query}" if self.source_query_id else self.source_relation
        return f"{self.name}: {what} of {source} over {self.window} every {self.step}"

    def plan_entry(self) -> dict[str, Any]:
        """This subscription as it appears in the evaluator's plan."""
        source = {"query": self.source_query_id} if self.source_query_id else {"relation": self.source_relation}
        return {"id": self.pk, "source": source, "aggregate": self.aggregate, "attribute": self.attribute or None,
                "window": self.window, "step": self.step, "window_kind": self.window_kind,
                "having": self.having or None, "predicates": list(self.predicates or [])}

    def clean(self) -> None:
        """Check the subscription against the stream's schema the way the evaluator will."""
        from streaming.sharing.properties import AggregateEntry, QueryEntry, aggregate_properties, query_properties

        if (self.source_query_id is None) == (not self.source_relation):
            raise ValidationError("Choose either a source query or a source relation.")
        if self.source_query_id is not None and self.source_query.stream_id != self.stream_id:
            raise ValidationError({"source_query": "The query must run on the subscription's stream."})
        if self.stream_id is None:
            return
        try:
            schema = self.stream.schema.graph()
            entry = AggregateEntry.model_validate({**self.plan_entry(), "id": self.pk or 0})
            queries = {}
            if self.source_query_id is not None:
                entry_of_query = QueryEntry.model_validate(self.source_query.plan_entry())
                queries[self.source_query_id] = query_properties(entry_of_query, schema)
            aggregate_properties(entry, schema, queries)
        except (ValueError, SchemaError) as exc:
            raise ValidationError(str(exc)) from None



class WXQuerySubscription(models.Model):
    """A WXQuery subscription of an XML stream (docs/wxquery.md), evaluated by the stream's evaluator.

    It reads its stream by name, ``stream("NAME")/root/item``; saved only if it
    compiles against the stream's DTD (the error names line and column).
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="wxquery_subscriptions")
    name = models.CharField(max_length=100)
    stream = models.ForeignKey("streams.Stream", on_delete=models.CASCADE, related_name="wxquery_subscriptions",
                               help_text="An XML stream; the query reads it as stream(\"its name\").")
    text = models.TextField("WXQuery", help_text='e.g. for $p in stream("photons")/photons/photon '
                                                 'where $p/en >= 1.3 return <hot>{ $p/en }</hot>')
    enabled = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        verbose_name = "WXQuery subscription"
        verbose_name_plural = "WXQuery subscriptions"

    def __str__(self) -> str:
        return self.name

    def compiled(self) -> Subscription:
        """The checked subscription; :class:`WXQueryError` or :class:`DTDError` if it does not compile."""
        return compile_for_stream(self.text, self.stream.name, self.stream.stream_dtd())

    def abstraction(self) -> Abstraction:
        """Its APT (an APF for a join)."""
        return self.compiled().abstraction

    def back_translation(self) -> str:
        """The WXQuery of its abstraction (the paper's Sect. 3.3): what a shared stream of it carries."""
        return to_wxquery(self.abstraction())

    def plan_entry(self) -> dict[str, Any]:
        return {"id": self.pk, "text": self.text}

    def clean(self) -> None:
        if self.stream_id is None:
            return
        if not self.stream.is_xml:
            raise ValidationError({"stream": f"stream {self.stream.name!r} takes NDJSON ops, not XML items"})
        try:
            self.compiled()
        except DTDError as exc:
            raise ValidationError({"stream": f"the stream's DTD: {exc}"}) from None
        except WXQueryError as exc:
            raise ValidationError({"text": str(exc)}) from None
