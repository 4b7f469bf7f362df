"""Pre-processing once per stream: raw op lines -> compact derived records (paper 002's widened stream).

The pre-processor is given the stream's merged needs (:class:`StreamNeeds`,
built from the query and aggregate properties of every consumer): the union
keyword vocabulary, per relation the selections under which some consumer
can use a tuple. Per raw line (:meth:`Preprocessor.derive`) it parses and
validates the op, classifies the inserted tuple's keywords as a bitmask over
the vocabulary, evaluates the selections and emits one compact record with
the seq unchanged and the needs version that produced it:

* ``{"seq", "v", "o": "i", "r", "t", "ts", "h"}`` a kept insert (``t``: the
  tuple's values by attribute name in sorted order, the key among them; ``h``:
  bit ``i`` set when the tuple contains vocabulary word ``i``);
* ``{"seq", "v", "o": "d", "r", "k", "ts"}`` a delete whose insert was kept;
* ``{"seq", "v", "ts"}`` a tick: an op no consumer can use, kept only as its
  event time so windows expire at the same seqs as over the raw stream;
* ``{"seq", "v", "x"}`` a dead letter (a parse reject), and
  ``{"seq", "v", "ts", "x"}`` one whose time still moves the stream clock
  (an insert of a key whose insert was dropped and not deleted: a reject by
  its key, docs/ops.md "The stream clock"), produced here once; late times,
  the clock guard, duplicate and missing keys of forwarded ops are judged by
  the consumers' engines, which see every op's time (ticks included).

A delete reaches the consumers exactly when its insert did: the
pre-processor remembers the keys of dropped inserts until their delete (that
delete becomes a tick); every other delete is forwarded, and an insert of a
key that was forwarded and not deleted is forwarded too, so the consumers'
stores judge duplicate and missing keys as over the raw stream. The known
differences from the raw stream: a key whose dropped tuple has left every
window, or whose dropped insert was late, is still refused here until its
delete. Needs follow the plan in place (:meth:`Preprocessor.follow`, a new
version from the next line on): they widen at once when a query joins and
narrow at once when one leaves. A tuple dropped under an older version stays
dropped, so a joining query gets the tuples stored from its join on (what the
sharing issue's rule allows); a tuple forwarded under an older version is
still deleted downstream. Narrowing at once is safe for every remaining
query: the tuples it drops are ones no remaining query's selections admit,
so a sharing class that stays wider until it is narrowed on demand only
stops seeing tuples whose results no member keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import orjson

from .parsed import ParsedOp
from .keywords import tuple_tokens
from .ops import Op, OpRejected, parse_op
from .schema import Schema
from .sharing.intervals import IntervalSet
from .sharing.properties import (AggregateProperties, EvaluatorPlan, QueryProperties, aggregate_properties,
                                 query_properties)
from .stored_lines import SourceError, split_seq

__all__ = ["StreamNeeds", "Preprocessor", "DerivedRecord", "decode_record", "derived_ops", "derived_rows"]

#: a conjunction attribute -> values; None stands for "every tuple of the relation"
Conjunction = Mapping[str, IntervalSet] | None


@dataclass(frozen=True)
class StreamNeeds:
    """What the consumers of a stream need: vocabulary and, per relation, a disjunction of conjunctions."""

    version: int
    vocabulary: tuple[str, ...]
    selections: Mapping[str, tuple[Conjunction, ...]]

    @classmethod
    def merge(cls, version: int, queries: Iterable[QueryProperties],
              aggregates: Iterable[AggregateProperties] = ()) -> "StreamNeeds":
        words: set[str] = set()
        selections: dict[str, list[Conjunction]] = {}
        for q in queries:
            words |= q.keywords
            for r in q.relations:
                selections.setdefault(r, []).append(q.selection.get(r))
        for a in aggregates:
            if a.source_relation is not None:
                selections.setdefault(a.source_relation, []).append(a.selection or None)
        return cls(version, tuple(sorted(words)), {r: _simplify(c) for r, c in selections.items()})

    @classmethod
    def of_plan(cls, plan: EvaluatorPlan) -> "StreamNeeds":
        """The needs of every query and aggregate subscription of an evaluator plan, with the
        stream's queries placed on other evaluators (``plan.others``): the primary evaluator's plan
        gives the needs of the whole stream."""
        schema = Schema.from_dict(plan.stream.schema_)
        queries = {q.id: query_properties(q, schema) for q in [*plan.queries, *plan.others]}
        aggregates = [aggregate_properties(a, schema, queries) for a in plan.aggregates]
        return cls.merge(plan.version, queries.values(), aggregates)

    def admits(self, relation: str, values: Mapping[str, Any]) -> bool:
        """Whether some consumer can use this tuple of ``relation``."""
        for conj in self.selections.get(relation, ()):
            if conj is None or all(values.get(a) in s for a, s in conj.items()):
                return True
        return False


def _simplify(conjunctions: list[Conjunction]) -> tuple[Conjunction, ...]:
    return (None,) if any(c is None or not c for c in conjunctions) else tuple(conjunctions)


@dataclass(frozen=True, slots=True)
class DerivedRecord:
    """One decoded derived record (see the module docstring); ``kind`` is insert, delete, tick or dead."""

    seq: int | None
    version: int
    kind: str
    relation: str | None = None
    key: Any = None
    values: dict | None = None
    ts: float | None = None
    hits: tuple[str, ...] = ()
    reason: str | None = None


class Preprocessor:
    """Turns raw stored lines into derived records for one stream (stateful: the stored keys)."""

    def __init__(self, schema: Schema, needs: StreamNeeds):
        self.schema = schema
        self.needs = needs
        self.kept: set[tuple[str, Any]] = set()  # forwarded inserts not deleted since
        self.dropped: set[tuple[str, Any]] = set()  # dropped inserts not deleted since

    def state(self) -> dict[str, list]:
        """The stored-key state (JSON-able), what a restarted pre-processor resumes from."""
        return {"kept": sorted(self.kept, key=repr), "dropped": sorted(self.dropped, key=repr)}

    def restore(self, state: Mapping[str, list]) -> None:
        self.kept = {(r, k) for r, k in state["kept"]}
        self.dropped = {(r, k) for r, k in state["dropped"]}

    def follow(self, needs: StreamNeeds) -> None:
        """Apply a new plan version's needs from the next line on (wider or narrower; records carry the version)."""
        if needs.version <= self.needs.version:
            raise ValueError(f"needs version {needs.version} does not follow {self.needs.version}")
        self.needs = needs

    def derive(self, line: str | bytes) -> bytes:
        """The derived record (compact JSON) of one raw stored line."""
        v = self.needs.version
        try:
            seq, obj = split_seq(line)
        except SourceError as exc:
            return orjson.dumps({"seq": None, "v": v, "x": str(exc)})
        try:
            op = parse_op(obj, self.schema)
        except OpRejected as exc:
            return orjson.dumps({"seq": seq, "v": v, "x": str(exc)})
        ident = (op.relation, op.key)
        if op.kind == "insert":
            if ident in self.dropped:
                return orjson.dumps({"seq": seq, "v": v, "ts": op.ts,
                                     "x": f"insert of {op.relation} {op.key!r}: the key is already live"})
            if ident not in self.kept and not self.needs.admits(op.relation, op.values):
                self.dropped.add(ident)
                return orjson.dumps({"seq": seq, "v": v, "ts": op.ts})
            self.kept.add(ident)
            tokens = tuple_tokens(self.schema.relations[op.relation], op.values)
            mask = sum(1 << i for i, w in enumerate(self.needs.vocabulary) if w in tokens)
            return orjson.dumps({"seq": seq, "v": v, "o": "i", "r": op.relation, "t": [op.values[a] for a in sorted(op.values)],
                                 "ts": op.ts, "h": mask})
        if ident in self.dropped:
            self.dropped.discard(ident)
            return orjson.dumps({"seq": seq, "v": v, "ts": op.ts})
        self.kept.discard(ident)
        return orjson.dumps({"seq": seq, "v": v, "o": "d", "r": op.relation, "k": op.key, "ts": op.ts})


def decode_record(data: str | bytes, vocabularies: Mapping[int, tuple[str, ...]], schema: Schema) -> DerivedRecord:
    """A derived record read back; ``vocabularies`` maps each needs version to its vocabulary.

    An unknown version raises ``KeyError``: a consumer must never guess the bitmask's words.
    """
    obj = orjson.loads(data)
    seq, v = obj["seq"], obj["v"]
    if "x" in obj:
        return DerivedRecord(seq, v, "dead", ts=obj.get("ts"), reason=obj["x"])
    kind = obj.get("o")
    if kind is None:
        return DerivedRecord(seq, v, "tick", ts=obj["ts"])
    if kind == "d":
        return DerivedRecord(seq, v, "delete", obj["r"], obj["k"], None, obj["ts"])
    words = vocabularies[v]
    mask = obj["h"]
    relation = schema.relations[obj["r"]]
    by_name = dict(zip(sorted(relation.attributes), obj["t"]))
    values = {a: by_name[a] for a in relation.attributes}  # the schema's order, as the raw op's
    return DerivedRecord(seq, v, "insert", obj["r"], values[relation.key], values, obj["ts"],
                         tuple(w for i, w in enumerate(words) if mask >> i & 1))


def derived_ops(lines: Iterable[str | bytes], vocabularies: Mapping[int, tuple[str, ...]],
                schema: Schema) -> list[ParsedOp]:
    """Derived records as the evaluator's parsed rows (no parse or classification left to do).

    A tick becomes an op of kind ``tick`` (the evaluator only advances event
    time with it); a dead letter keeps its record as its line and is marked
    ``reported`` (the pre-processor published it; the evaluator only passes
    its seq, and advances event time with it when it has a time).
    """
    return derived_rows(lines, vocabularies, schema)[0]


def derived_rows(lines: Iterable[str | bytes], vocabularies: Mapping[int, tuple[str, ...]],
                 schema: Schema) -> tuple[list[ParsedOp], set[int]]:
    """:func:`derived_ops`, and the needs versions of the records read (each record decoded once)."""
    out, versions = [], set()
    for line in lines:
        text = line.decode() if isinstance(line, bytes) else line
        r = decode_record(text, vocabularies, schema)
        versions.add(r.version)
        if r.kind == "dead":  # the pre-processor published it
            tick = None if r.ts is None else Op("tick", "", None, None, r.ts)
            out.append(ParsedOp(r.seq, text, tick, r.reason, reported=True))
        elif r.kind == "tick":
            out.append(ParsedOp(r.seq, text, Op("tick", "", None, None, r.ts)))
        else:
            op = Op(r.kind, r.relation, r.key, r.values, r.ts)
            # an insert's line is made from its op if it becomes a dead letter (the evaluator persists the op)
            out.append(ParsedOp(r.seq, text if r.kind == "delete" else None, op, None, r.hits))
    return out, versions
