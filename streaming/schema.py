"""Schema graph: relations, attributes and foreign keys, loaded from JSON.

The JSON shape is the contract of docs/schema.md::

    {"name": "ecommerce",
     "relations": [{"name": "Order", "key": "oid",
                    "attributes": {"oid": "int", "cid": "int", "note": "text"},
                    "foreign_keys": [{"name": "cid", "column": "cid",
                                      "references": "Customer"}]}, ...]}

Every problem is reported as a :class:`SchemaError` whose message names the
place (``relations[2] 'Order'.foreign_keys[0] 'cid': ...``).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

__all__ = [
    "TYPES",
    "SchemaError",
    "ValueRejected",
    "ForeignKey",
    "Relation",
    "Schema",
    "coerce_value",
    "load_schema",
]

TYPES = ("int", "float", "text", "bool", "timestamp")


class SchemaError(ValueError):
    """A schema document is malformed; the message names the bad place."""


class ValueRejected(ValueError):
    """A tuple does not fit its relation (unknown attribute, wrong type...)."""


@dataclass(frozen=True)
class ForeignKey:
    """A reference ``holder.column -> target.key``, named ``name`` within ``holder``."""

    name: str
    column: str
    holder: str
    target: str


@dataclass(frozen=True)
class Relation:
    """One relation schema; ``attributes`` keeps the document's order."""

    name: str
    key: str
    attributes: Mapping[str, str]
    foreign_keys: tuple[ForeignKey, ...] = ()
    searchable: tuple[str, ...] = field(default=(), compare=False)

    def validate_tuple(self, values: Any) -> dict[str, Any]:
        """Return ``values`` checked and normalised against the attribute types.

        The key is required and not null; other attributes may be absent
        (null). Raises :class:`ValueRejected` with a reason naming the
        attribute.
        """
        if not isinstance(values, dict):
            raise ValueRejected(f"tuple of {self.name} must be a JSON object")
        unknown = sorted(set(values) - set(self.attributes))
        if unknown:
            raise ValueRejected(f"unknown attribute {unknown[0]!r} of {self.name}")
        out: dict[str, Any] = {}
        for attr, typ in self.attributes.items():
            value = values.get(attr)
            if value is None:
                if attr == self.key:
                    raise ValueRejected(f"{self.name}.{attr}: the key is required")
                out[attr] = None
                continue
            out[attr] = coerce_value(value, typ, f"{self.name}.{attr}")
        return out

    def validate_key(self, value: Any) -> Any:
        """Check a key value given alone (as in a delete op)."""
        if value is None:
            raise ValueRejected(f"{self.name}.{self.key}: the key is required")
        return coerce_value(value, self.attributes[self.key], f"{self.name}.{self.key}")


_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # "int" is a 64-bit integer, as in Spark, Arrow and PostgreSQL


def coerce_value(value: Any, typ: str, where: str) -> Any:
    """Check one non-null value against a schema type; return its canonical form."""
    if typ == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer() and not isinstance(value, bool):
                value = int(value)
            else:
                raise ValueRejected(f"{where}: expected int, got {value!r}")
        if not _INT_MIN <= value <= _INT_MAX:
            raise ValueRejected(f"{where}: expected a 64-bit int, got {value!r}")
        return value
    if typ == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueRejected(f"{where}: expected float, got {value!r}")
        if not math.isfinite(value):
            raise ValueRejected(f"{where}: expected a finite float, got {value!r}")
        return float(value)
    if typ == "text":
        if not isinstance(value, str):
            raise ValueRejected(f"{where}: expected text, got {value!r}")
        return value
    if typ == "bool":
        if not isinstance(value, bool):
            raise ValueRejected(f"{where}: expected bool, got {value!r}")
        return value
    if typ == "timestamp":
        if isinstance(value, bool):
            raise ValueRejected(f"{where}: expected timestamp, got {value!r}")
        if isinstance(value, (int, float)) and math.isfinite(value):
            return float(value)
        if isinstance(value, str):
            try:
                parsed = _dt.datetime.fromisoformat(value)
            except ValueError:
                raise ValueRejected(f"{where}: expected an ISO 8601 timestamp, got {value!r}") from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=_dt.timezone.utc)
            return parsed.timestamp()
        raise ValueRejected(f"{where}: expected timestamp, got {value!r}")
    raise ValueRejected(f"{where}: unknown type {typ!r}")


class Schema:
    """A validated schema graph.

    ``relations`` maps names to :class:`Relation` in document order;
    ``foreign_keys`` lists every edge of the graph (parallel edges and
    self-references included).
    """

    def __init__(self, name: str, relations: Iterable[Relation]):
        self.name = name
        self.relations: dict[str, Relation] = {r.name: r for r in relations}
        self.foreign_keys: tuple[ForeignKey, ...] = tuple(
            fk for r in self.relations.values() for fk in r.foreign_keys
        )

    def __repr__(self) -> str:
        return f"Schema({self.name!r}, {len(self.relations)} relations, {len(self.foreign_keys)} foreign keys)"

    def relation(self, name: str) -> Relation:
        try:
            return self.relations[name]
        except KeyError:
            raise ValueRejected(f"unknown relation {name!r}") from None

    def neighbours(self, name: str) -> list[tuple[ForeignKey, str]]:
        """Edges at relation ``name`` as ``(fk, other relation)``, both directions."""
        out = []
        for fk in self.foreign_keys:
            if fk.holder == name:
                out.append((fk, fk.target))
            if fk.target == name:
                out.append((fk, fk.holder))
        return out

    def to_dict(self) -> dict[str, Any]:
        """The schema as its JSON document (inverse of :meth:`from_dict`)."""
        rels = []
        for r in self.relations.values():
            doc: dict[str, Any] = {"name": r.name, "key": r.key, "attributes": dict(r.attributes)}
            if r.foreign_keys:
                doc["foreign_keys"] = [
                    {"name": fk.name, "column": fk.column, "references": fk.target} for fk in r.foreign_keys
                ]
            rels.append(doc)
        return {"name": self.name, "relations": rels}

    @classmethod
    def from_dict(cls, doc: Any) -> "Schema":
        """Validate a schema document and build the graph; raises :class:`SchemaError`."""
        if not isinstance(doc, dict):
            raise SchemaError("schema: expected a JSON object")
        name = doc.get("name")
        if not isinstance(name, str) or not name:
            raise SchemaError("schema.name: expected a non-empty string")
        extra = sorted(set(doc) - {"name", "relations"})
        if extra:
            raise SchemaError(f"schema: unknown field {extra[0]!r}")
        rels = doc.get("relations")
        if not isinstance(rels, list) or not rels:
            raise SchemaError("schema.relations: expected a non-empty list")

        raw: list[tuple[str, dict]] = []
        seen: set[str] = set()
        for i, rd in enumerate(rels):
            where = f"relations[{i}]"
            if not isinstance(rd, dict):
                raise SchemaError(f"{where}: expected an object")
            rname = rd.get("name")
            if not isinstance(rname, str) or not rname:
                raise SchemaError(f"{where}.name: expected a non-empty string")
            where = f"relations[{i}] {rname!r}"
            if rname in seen:
                raise SchemaError(f"{where}: duplicate relation name")
            seen.add(rname)
            extra = sorted(set(rd) - {"name", "key", "attributes", "foreign_keys"})
            if extra:
                raise SchemaError(f"{where}: unknown field {extra[0]!r}")
            attrs = rd.get("attributes")
            if not isinstance(attrs, dict) or not attrs:
                raise SchemaError(f"{where}.attributes: expected a non-empty object")
            for aname, typ in attrs.items():
                if not aname:
                    raise SchemaError(f"{where}.attributes: empty attribute name")
                if typ not in TYPES:
                    raise SchemaError(f"{where}.attributes.{aname}: unknown type {typ!r} (one of {', '.join(TYPES)})")
            key = rd.get("key")
            if not isinstance(key, str) or not key:
                raise SchemaError(f"{where}.key: missing")
            if key not in attrs:
                raise SchemaError(f"{where}.key: {key!r} is not an attribute")
            raw.append((where, rd))

        relations: list[Relation] = []
        for where, rd in raw:
            rname, attrs, key = rd["name"], rd["attributes"], rd["key"]
            fks_doc = rd.get("foreign_keys", [])
            if not isinstance(fks_doc, list):
                raise SchemaError(f"{where}.foreign_keys: expected a list")
            fks: list[ForeignKey] = []
            fk_names: set[str] = set()
            for j, fd in enumerate(fks_doc):
                fwhere = f"{where}.foreign_keys[{j}]"
                if not isinstance(fd, dict):
                    raise SchemaError(f"{fwhere}: expected an object")
                fname = fd.get("name")
                if not isinstance(fname, str) or not fname:
                    raise SchemaError(f"{fwhere}.name: expected a non-empty string")
                fwhere = f"{fwhere} {fname!r}"
                if fname in fk_names:
                    raise SchemaError(f"{fwhere}: duplicate foreign key name")
                fk_names.add(fname)
                extra = sorted(set(fd) - {"name", "column", "references"})
                if extra:
                    raise SchemaError(f"{fwhere}: unknown field {extra[0]!r}")
                column, target = fd.get("column"), fd.get("references")
                if not isinstance(column, str) or column not in attrs:
                    raise SchemaError(f"{fwhere}.column: {column!r} is not an attribute of {rname}")
                if not isinstance(target, str) or target not in seen:
                    raise SchemaError(f"{fwhere}.references: unknown relation {target!r}")
                target_doc = next(d for _, d in raw if d["name"] == target)
                target_type = target_doc["attributes"][target_doc["key"]]
                if attrs[column] != target_type:
                    raise SchemaError(
                        f"{fwhere}.column: {rname}.{column} is {attrs[column]} but {target}.{target_doc['key']} is {target_type}"
                    )
                fks.append(ForeignKey(fname, column, rname, target))
            fk_columns = {fk.column for fk in fks}
            searchable = tuple(a for a, t in attrs.items() if t == "text" and a != key and a not in fk_columns)
            relations.append(Relation(rname, key, dict(attrs), tuple(fks), searchable))
        return cls(name, relations)

    @classmethod
    def from_json(cls, text: str) -> "Schema":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"schema: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
        return cls.from_dict(doc)


def load_schema(path: str | Path) -> Schema:
    """Read and validate a schema JSON file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SchemaError(f"{path}: {exc.strerror}") from None
    try:
        return Schema.from_json(text)
    except SchemaError as exc:
        raise SchemaError(f"{path}: {exc}") from None
