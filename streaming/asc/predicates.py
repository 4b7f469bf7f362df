"""Selection predicates of saved queries: parsing, type checking, naive evaluation.

A predicate is the JSON object shared with the keyword engine and the admin::

    {"relation": "Order", "attribute": "price", "op": ">=", "value": 40}
    {"attribute": "a3", "op": "between", "value": [10, 20]}   # inclusive

``relation`` is omitted for a single stream. A query's predicates are
conjunctive. A null (absent) attribute value satisfies no predicate on it.
:func:`holds` is the reference semantics the constructs must agree with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..schema import ValueRejected, coerce_value

__all__ = [
    "OPS",
    "PREDICATE_TYPES",
    "PredicateError",
    "Predicate",
    "parse_predicate",
    "parse_queries",
    "split_by_relation",
    "holds",
    "query_holds",
]

OPS = ("=", "!=", "<", "<=", ">", ">=", "between")
PREDICATE_TYPES = ("int", "float", "text", "timestamp")
_FIELDS = {"relation", "attribute", "op", "value"}


class PredicateError(ValueError):
    """A predicate or query set is malformed; the message names the place."""


@dataclass(frozen=True)
class Predicate:
    """One comparison ``attribute op value`` with its value in canonical form.

    ``value`` is a ``(lo, hi)`` pair for ``between``. ``type`` is the attribute
    type the value was checked against (timestamps are epoch seconds).
    """

    attribute: str
    op: str
    value: Any
    type: str
    relation: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The predicate as its JSON object (timestamps as epoch seconds)."""
        doc: dict[str, Any] = {"attribute": self.attribute, "op": self.op,
                               "value": list(self.value) if self.op == "between" else self.value}
        if self.relation is not None:
            doc = {"relation": self.relation, **doc}
        return doc


def _infer_type(value: Any, where: str) -> str:
    sample = value[0] if isinstance(value, list) and value else value
    if isinstance(sample, bool):
        raise PredicateError(f"{where}.value: booleans are not comparable")
    if isinstance(sample, (int, float)):
        return "float"
    if isinstance(sample, str):
        return "text"
    raise PredicateError(f"{where}.value: expected a number or a string, got {value!r}")


def parse_predicate(doc: Any, types: Mapping[str, str] | None = None,
                    relation: str | None = None, where: str = "predicate") -> Predicate:
    """Check one predicate object and return it as a :class:`Predicate`.

    ``types`` maps the relation's attributes to schema types; without it the
    type is inferred from the value (numbers compare as ``float``, strings as
    ``text``). ``relation``, when given, is the only relation accepted.
    Raises :class:`PredicateError`.
    """
    if not isinstance(doc, dict):
        raise PredicateError(f"{where}: expected an object")
    extra = sorted(set(doc) - _FIELDS)
    if extra:
        raise PredicateError(f"{where}: unknown field {extra[0]!r}")
    rel = doc.get("relation")
    if rel is not None and not isinstance(rel, str):
        raise PredicateError(f"{where}.relation: expected a string")
    if relation is not None and rel is not None and rel != relation:
        raise PredicateError(f"{where}.relation: {rel!r} is not {relation!r}")
    attr = doc.get("attribute")
    if not isinstance(attr, str) or not attr:
        raise PredicateError(f"{where}.attribute: expected a non-empty string")
    op = doc.get("op")
    if op not in OPS:
        raise PredicateError(f"{where}.op: {op!r} is not one of {', '.join(OPS)}")
    if "value" not in doc:
        raise PredicateError(f"{where}.value: missing")
    value = doc["value"]
    if types is not None:
        if attr not in types:
            raise PredicateError(f"{where}.attribute: unknown attribute {attr!r}")
        typ = types[attr]
        if typ not in PREDICATE_TYPES:
            raise PredicateError(f"{where}.attribute: {attr!r} of type {typ} cannot carry a predicate")
    else:
        typ = _infer_type(value, where)
    if op == "between":
        if not isinstance(value, list) or len(value) != 2:
            raise PredicateError(f"{where}.value: between needs [lo, hi]")
        lo, hi = (_coerce(v, typ, f"{where}.value[{i}]") for i, v in enumerate(value))
        if lo > hi:
            raise PredicateError(f"{where}.value: empty range, {value[0]!r} > {value[1]!r}")
        canon: Any = (lo, hi)
    else:
        canon = _coerce(value, typ, f"{where}.value")
    return Predicate(attr, op, canon, typ, rel if rel is not None else relation)


def _coerce(value: Any, typ: str, where: str) -> Any:
    if value is None:
        raise PredicateError(f"{where}: null is not a comparable value")
    try:
        return coerce_value(value, typ, where)
    except ValueRejected as exc:
        raise PredicateError(str(exc)) from None


def parse_queries(queries: Mapping[str, Iterable[Any]], types: Mapping[str, str] | None = None,
                  relation: str | None = None) -> dict[str, list[Predicate]]:
    """Parse ``{query_id: [predicate, ...]}``; every attribute gets one type.

    Without ``types`` an attribute compared with both numbers and strings is
    an error, since its regions could not be ordered.
    """
    out: dict[str, list[Predicate]] = {}
    seen_types: dict[str, tuple[str, str]] = {}
    for qid, preds in queries.items():
        if not isinstance(qid, str) or not qid:
            raise PredicateError(f"query id {qid!r}: expected a non-empty string")
        if isinstance(preds, (str, bytes, dict)) or not isinstance(preds, Iterable):
            raise PredicateError(f"query {qid!r}: predicates must be a list")
        parsed = []
        for i, doc in enumerate(preds):
            where = f"query {qid!r} predicate[{i}]"
            p = parse_predicate(doc, types, relation, where)
            first = seen_types.setdefault(p.attribute, (p.type, where))
            if first[0] != p.type:
                raise PredicateError(f"{where}: attribute {p.attribute!r} is {p.type} here "
                                     f"but {first[0]} in {first[1]}")
            parsed.append(p)
        out[qid] = parsed
    return out


def split_by_relation(queries: Mapping[str, Iterable[Any]], relations: Iterable[str]
                      ) -> dict[str, dict[str, list[Any]]]:
    """Per relation, every query with its predicates on that relation (``[]`` if none).

    A query without predicates on R keeps its bit set for every tuple of R, so
    it must be in R's index too. Each predicate must name one of ``relations``.
    """
    names = list(relations)
    out: dict[str, dict[str, list[Any]]] = {r: {} for r in names}
    for qid, preds in queries.items():
        for r in names:
            out[r][qid] = []
        for i, doc in enumerate(preds):
            rel = doc.get("relation") if isinstance(doc, dict) else None
            if rel not in out:
                raise PredicateError(f"query {qid!r} predicate[{i}].relation: {rel!r} is not one of {', '.join(names)}")
            out[rel][qid].append(doc)
    return out


def holds(p: Predicate, value: Any) -> bool:
    """Whether ``value`` (canonical form, ``None`` for null) satisfies ``p``."""
    if value is None:
        return False
    op, c = p.op, p.value
    if op == "=":
        return value == c
    if op == "!=":
        return value != c
    if op == "<":
        return value < c
    if op == "<=":
        return value <= c
    if op == ">":
        return value > c
    if op == ">=":
        return value >= c
    return c[0] <= value <= c[1]


def query_holds(predicates: Iterable[Predicate], values: Mapping[str, Any]) -> bool:
    """Naive conjunctive evaluation of one query's predicates on one tuple."""
    return all(holds(p, values.get(p.attribute)) for p in predicates)
