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
from dataclasses import dataclass
from typing import Any

from .schema import Schema, ValueRejected

__all__ = ["Op", "OpRejected", "parse_op", "parse_item_op", "op_to_dict", "item_op"]

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


@dataclass(frozen=True, slots=True)
class Op:
    """A validated insert or delete; ``values`` is the normalised tuple of an insert."""

    kind: str
    relation: str
    key: Any
    values: dict | None
    ts: float


def parse_op(obj_or_line: Any, schema: Schema) -> Op:
    """Validate one op (a JSON text line or an already decoded object) against ``schema``."""
    obj = obj_or_line
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
