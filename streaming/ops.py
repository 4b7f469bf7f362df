"""Op stream parsing: one NDJSON line (or decoded object) -> a validated :class:`Op`.

The shape is the contract of docs/ops.md::

    {"op":"insert","relation":"Order","tuple":{"oid":9,"cid":5},"ts":12.0}
    {"op":"delete","relation":"Order","key":9,"ts":13.5}

Anything else is rejected with :class:`OpRejected`, whose message is the
reason written to the dead-letter output. Stream-level rules (late ops,
duplicate inserts, deletes of missing keys) need the engine's state and are
checked by :class:`streaming.engine.KeywordEngine`.
"""

from __future__ import annotations

import json
import math
import sys
import weakref
from typing import Annotated, Any, NamedTuple

import msgspec

from .schema import Schema, ValueRejected

__all__ = ["Op", "OpRejected", "OpDecoder", "parse_op", "parse_item_op", "op_to_dict", "item_op"]

_FIELDS = {"insert": {"op", "relation", "tuple", "ts"}, "delete": {"op", "relation", "key", "ts"}}


class OpRejected(ValueError):
    """An op that must not be applied; the message is the reason.

    ``changes`` are what the op's time did before it was judged (the results
    of tuples that left the window when it moved the stream clock,
    docs/ops.md): a rejected op still reports them, at its seq.
    """

    def __init__(self, reason: str, changes: list[Any] | tuple[Any, ...] = ()):
        super().__init__(reason)
        self.changes = list(changes)


class Op(NamedTuple):
    """A validated insert or delete; ``values`` is the normalised tuple of an insert."""

    kind: str
    relation: str
    key: Any
    values: dict | None
    ts: float


# the largest finite float: a bound that also refuses nan and the infinities
_FINITE = msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)
_FAST_TYPES: dict[str, Any] = {
    "int": Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)],
    "float": Annotated[float, _FINITE],
    "text": str,
    "bool": bool,
}


class _Insert(msgspec.Struct, tag_field="op", tag="insert", forbid_unknown_fields=True):
    relation: str
    tuple: msgspec.Raw
    ts: Annotated[float, _FINITE]


class _Delete(msgspec.Struct, tag_field="op", tag="delete", forbid_unknown_fields=True):
    relation: str
    key: msgspec.Raw
    ts: Annotated[float, _FINITE]


class OpDecoder:
    """The fast path of :func:`parse_op` for one schema: msgspec decodes and checks a line into an op.

    It takes exactly the lines :func:`parse_op`'s own checks accept and gives
    the same op; any line it does not take (a reject, or what it leaves to
    the general checks: a timestamp attribute, an int written as ``1.0``)
    goes through those checks, whose reason is the contract's
    (docs/ops.md).
    """

    def __init__(self, schema: Schema):
        self.envelope = msgspec.json.Decoder(_Insert | _Delete)
        self.tuples: dict[str, tuple[msgspec.json.Decoder, str]] = {}
        self.keys: dict[str, msgspec.json.Decoder] = {}
        for name, rel in schema.relations.items():
            if all(t in _FAST_TYPES for t in rel.attributes.values()):
                # the key is required; any other attribute may be absent or null
                fields = [(rel.key, _FAST_TYPES[rel.attributes[rel.key]])]
                fields += [(a, _FAST_TYPES[t] | None, None) for a, t in rel.attributes.items() if a != rel.key]
                struct = msgspec.defstruct(f"{name}Tuple", fields, forbid_unknown_fields=True)
                self.tuples[name] = (msgspec.json.Decoder(struct), rel.key)
            if rel.attributes[rel.key] in _FAST_TYPES:
                self.keys[name] = msgspec.json.Decoder(_FAST_TYPES[rel.attributes[rel.key]])
        self.order = {name: tuple(rel.attributes) for name, rel in schema.relations.items()}

    def decode(self, line: str | bytes) -> Op | None:
        """The op of a line, or None: the line goes through :func:`parse_op`'s general checks."""
        try:
            envelope = self.envelope.decode(line)
            relation = envelope.relation
            if envelope.__class__ is _Insert:
                decoder, key = self.tuples[relation]
                values = msgspec.structs.asdict(decoder.decode(envelope.tuple))
                return Op("insert", relation, values[key], {a: values[a] for a in self.order[relation]},
                          envelope.ts)
            return Op("delete", relation, self.keys[relation].decode(envelope.key), None, envelope.ts)
        except (msgspec.MsgspecError, KeyError):
            return None


_decoders: weakref.WeakKeyDictionary[Schema, OpDecoder] = weakref.WeakKeyDictionary()


def parse_op(obj_or_line: Any, schema: Schema) -> Op:
    """Validate one op (a JSON text line or an already decoded object) against ``schema``."""
    obj = obj_or_line
    if isinstance(obj, (str, bytes)):
        decoder = _decoders.get(schema)
        if decoder is None:
            decoder = _decoders[schema] = OpDecoder(schema)
        op = decoder.decode(obj)
        if op is not None:
            return op
    if isinstance(obj, (bytes, bytearray)):
        try:
            obj = obj.decode("utf-8")
        except UnicodeDecodeError:
            raise OpRejected("not UTF-8 text") from None
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as exc:
            raise OpRejected(f"malformed JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise OpRejected("an op must be a JSON object")
    kind = obj.get("op")
    if kind not in _FIELDS:
        raise OpRejected(f"op must be 'insert' or 'delete', got {kind!r}")
    fields = _FIELDS[kind]
    missing = sorted(fields - set(obj))
    if missing:
        raise OpRejected(f"{kind}: missing field {missing[0]!r}")
    extra = sorted(set(obj) - fields)
    if extra:
        raise OpRejected(f"{kind}: unknown field {extra[0]!r}")
    ts = obj["ts"]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        raise OpRejected(f"ts must be a finite number, got {ts!r}")
    name = obj["relation"]
    if not isinstance(name, str) or name not in schema.relations:
        raise OpRejected(f"unknown relation {name!r}")
    relation = schema.relations[name]
    try:
        if kind == "insert":
            values = relation.validate_tuple(obj["tuple"])
            return Op("insert", name, values[relation.key], values, float(ts))
        return Op("delete", name, relation.validate_key(obj["key"]), None, float(ts))
    except ValueRejected as exc:
        raise OpRejected(str(exc)) from None


def item_op(xml: str, ts: float) -> dict[str, Any]:
    """The stored op of one XML stream item (written by the XML ingest, before the item's mapped inserts)."""
    return {"op": "item", "xml": xml, "ts": ts}


def parse_item_op(obj: dict[str, Any]) -> Op:
    """Validate a stored item op (``{"op":"item","xml":...,"ts":...}``); its ``values`` hold the item's XML.

    Only the XML ingest writes these (after validating the item against the
    stream's DTD); the NDJSON ingest refuses them, as :func:`parse_op` does.
    """
    extra = sorted(set(obj) - {"op", "xml", "ts"})
    if extra:
        raise OpRejected(f"item: unknown field {extra[0]!r}")
    xml, ts = obj.get("xml"), obj.get("ts")
    if not isinstance(xml, str) or not xml:
        raise OpRejected("item: xml must be the item's XML text")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        raise OpRejected(f"ts must be a finite number, got {ts!r}")
    return Op("item", "", None, {"xml": xml}, float(ts))


def op_to_dict(op: Op) -> dict[str, Any]:
    """The op as its JSON object (inverse of :func:`parse_op`)."""
    if op.kind == "insert":
        return {"op": "insert", "relation": op.relation, "tuple": op.values, "ts": op.ts}
    if op.kind == "item":
        return item_op(op.values["xml"], op.ts)
    return {"op": "delete", "relation": op.relation, "key": op.key, "ts": op.ts}
