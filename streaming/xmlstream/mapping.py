"""A declared mapping of XML stream items to relation tuples, so keyword queries and filters run on XML streams.

The mapping (JSON, checked against the stream's DTD) names relations by the
element they come from, relative to the item (``""`` is the item itself)::

    {"time": "det_time",
     "relations": [
       {"name": "Order", "path": "", "key": "oid",
        "attributes": {"oid": {"path": "id", "type": "int"}, "note": {"path": "note"}}},
       {"name": "Line", "path": "lines/line", "key": "lid", "parent": "Order", "foreign_key": "oid",
        "attributes": {"product": {"path": "product"}, "qty": {"path": "qty", "type": "int"}}}]}

* A relation's key is an attribute mapped from an element, or, if the key
  is not among the attributes, a generated integer (a sequence per relation,
  continued across requests by :class:`ItemMapper`'s ``next_keys``).
* A repeating element below another relation's element becomes a child
  relation whose ``foreign_key`` column holds its parent's key (a foreign key
  in the generated schema).
* ``time`` is the item element holding the event time in seconds (the ops'
  ``ts``); without it, items take their arrival time.

:meth:`ItemMapping.schema` is the project's schema JSON for these relations;
:meth:`ItemMapper.ops` turns one item into its insert ops, parents first.
"""

from __future__ import annotations

from typing import Any, Literal

from lxml import etree
from pydantic import BaseModel, ConfigDict, Field

from ..schema import Schema, ValueRejected, coerce_value
from .dtd import StreamDTD

__all__ = ["AttributeMap", "RelationMap", "ItemMapping", "MappingError", "ItemMapper"]


class MappingError(ValueError):
    """A mapping that does not fit its DTD, or an item that does not fit its mapping; the message says where."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AttributeMap(_Frozen):
    path: str
    type: Literal["int", "float", "text", "bool", "timestamp"] = "text"


class RelationMap(_Frozen):
    name: str = Field(min_length=1)
    path: str = ""
    key: str
    attributes: dict[str, AttributeMap] = Field(default_factory=dict)
    parent: str | None = None
    foreign_key: str | None = None


class ItemMapping(_Frozen):
    time: str | None = None
    relations: list[RelationMap] = Field(min_length=1)

    def check(self, dtd: StreamDTD) -> None:
        """Raise :class:`MappingError` naming the first relation or attribute that does not fit ``dtd``."""
        names = [r.name for r in self.relations]
        if len(set(names)) != len(names):
            raise MappingError("relations: duplicate relation names")
        if self.time is not None:
            _leaf(dtd, dtd.item, self.time, "time", exactly_once=True)
        by_name = {r.name: r for r in self.relations}
        for i, rel in enumerate(self.relations):
            where = f"relations[{i}] {rel.name!r}"
            element = dtd.item if not rel.path else dtd.resolve(dtd.item, tuple(rel.path.split("/")))
            if element is None:
                raise MappingError(f"{where}: {rel.path!r} is not an element below <{dtd.item}>")
            for attr, spec in rel.attributes.items():
                _leaf(dtd, element, spec.path, f"{where}.attributes.{attr}", exactly_once=False)
            if rel.parent is None:
                if rel.path and not dtd.exactly_once(tuple(rel.path.split("/"))):
                    raise MappingError(f"{where}: a relation below the item that may repeat needs a parent")
                continue
            parent = by_name.get(rel.parent)
            if parent is None:
                raise MappingError(f"{where}.parent: unknown relation {rel.parent!r}")
            if parent is rel or not (parent.path == "" or rel.path.startswith(parent.path + "/")):
                raise MappingError(f"{where}: its element must be below its parent's ({parent.path or 'the item'})")
            if not rel.foreign_key:
                raise MappingError(f"{where}: a child relation needs a foreign_key column")
            if rel.foreign_key in rel.attributes or rel.foreign_key == rel.key:
                raise MappingError(f"{where}.foreign_key: {rel.foreign_key!r} is already an attribute")
            if names.index(rel.parent) > i:
                raise MappingError(f"{where}: list the parent relation {rel.parent!r} first")

    def _type_of_key(self, rel: RelationMap) -> str:
        return rel.attributes[rel.key].type if rel.key in rel.attributes else "int"

    def schema(self, name: str) -> dict[str, Any]:
        """The schema JSON of the mapped relations (the project's schema contract)."""
        by_name = {r.name: r for r in self.relations}
        relations = []
        for rel in self.relations:
            attributes = {rel.key: self._type_of_key(rel)}
            attributes.update({a: s.type for a, s in rel.attributes.items()})
            doc: dict[str, Any] = {"name": rel.name, "key": rel.key, "attributes": attributes}
            if rel.parent is not None:
                parent = by_name[rel.parent]
                attributes[rel.foreign_key] = self._type_of_key(parent)
                doc["foreign_keys"] = [{"name": rel.foreign_key, "column": rel.foreign_key, "references": rel.parent}]
            relations.append(doc)
        return {"name": name, "relations": relations}


def _leaf(dtd: StreamDTD, start: str, path: str, where: str, exactly_once: bool) -> None:
    steps = tuple(s for s in path.split("/") if s)
    element = dtd.resolve(start, steps)
    if element is None or not dtd.is_leaf(element):
        raise MappingError(f"{where}: {path!r} is not an element holding text below <{start}>")
    if exactly_once and not dtd.exactly_once(steps, start):
        raise MappingError(f"{where}: {path!r} must occur exactly once in every <{start}>")


def _select(element: etree._Element, path: str) -> list[etree._Element]:
    level = [element]
    for step in (s for s in path.split("/") if s):
        level = [c for e in level for c in e if c.tag == step]
    return level


class ItemMapper:
    """Turns items into insert ops; ``next_keys`` are the generated keys to continue from."""

    def __init__(self, mapping: ItemMapping, dtd: StreamDTD, next_keys: dict[str, int] | None = None):
        mapping.check(dtd)
        self.mapping = mapping
        self.schema = Schema.from_dict(mapping.schema("xml"))
        self.next_keys = dict(next_keys or {})

    def ops(self, item: etree._Element, arrival: float) -> list[dict[str, Any]]:
        """The insert ops of one item, parents before children; :class:`MappingError` if a value is wrong."""
        ts = arrival
        if self.mapping.time is not None:
            text = (_select(item, self.mapping.time)[0].text or "").strip()
            try:
                ts = float(text)
            except ValueError:
                raise MappingError(f"time {self.mapping.time}: {text!r} is not a number of seconds") from None
        keys: dict[int, Any] = {}  # id(element) -> key of the tuple it became
        ops: list[dict[str, Any]] = []
        taken = dict(self.next_keys)
        for rel in self.mapping.relations:
            for element in _select(item, rel.path):
                values: dict[str, Any] = {}
                for attr, spec in rel.attributes.items():
                    found = _select(element, spec.path)
                    if found:
                        values[attr] = self._value(rel, attr, spec, found[0].text or "")
                if rel.key not in rel.attributes:
                    values[rel.key] = taken.get(rel.name, 0)
                    taken[rel.name] = values[rel.key] + 1
                elif values.get(rel.key) is None:
                    raise MappingError(f"{rel.name}.{rel.key}: the key element {rel.attributes[rel.key].path!r} "
                                       "is missing")
                if rel.parent is not None:
                    holder = element.getparent()
                    parent_path = next(r.path for r in self.mapping.relations if r.name == rel.parent)
                    depth = len([s for s in rel.path.split("/") if s]) - len([s for s in parent_path.split("/") if s])
                    for _ in range(depth - 1):
                        holder = holder.getparent()
                    values[rel.foreign_key] = keys[id(holder)]
                keys[id(element)] = values[rel.key]
                ops.append({"op": "insert", "relation": rel.name, "tuple": values, "ts": ts})
        self.next_keys = taken
        return ops

    def _value(self, rel: RelationMap, attr: str, spec: AttributeMap, text: str) -> Any:
        where = f"{rel.name}.{attr} ({spec.path})"
        raw: Any = text.strip() if spec.type != "text" else text
        try:
            if spec.type == "int":
                raw = int(raw)
            elif spec.type == "float":
                raw = float(raw)
            elif spec.type == "timestamp":
                raw = _number_or_text(raw)
            elif spec.type == "bool":
                if raw not in ("true", "false", "1", "0"):
                    raise ValueError(raw)
                raw = raw in ("true", "1")
            return coerce_value(raw, spec.type, where)
        except (ValueError, ValueRejected) as exc:
            raise MappingError(f"{where}: {text!r} is not a {spec.type}") from exc


def _number_or_text(text: str) -> float | str:
    """A timestamp is seconds, or ISO 8601 text (read by the schema's coercion)."""
    try:
        return float(text)
    except ValueError:
        return text
