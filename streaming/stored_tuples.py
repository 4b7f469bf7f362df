"""An evaluator's stored tuples as its state store keeps them, one record per tuple made from the parsed op.

A tuple's line is never parsed again: the session (``streaming.session``)
writes the record of each insert it applies, forgets the tuples its engine
drops (a delete, the window's expiry), hands what changed to the state store
with each batch's state, and, when it builds an engine, restores it from
these records (their values checked against the schema only). No I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .ops import Op
from .schema import Schema, ValueRejected

__all__ = ["TupleId", "StoredTuple", "StoredTuples"]

#: A stored tuple's relation and key.
TupleId = tuple[str, Any]
#: A stored tuple as persisted, made from the parsed op (its line is never parsed again): the seq and event time
#: of the insert that wrote it and its validated values.
StoredTuple = tuple[int, float, dict[str, Any]]


class StoredTuples(Mapping[TupleId, StoredTuple]):
    """The stored tuples by relation and key, and which of them were written or forgotten since the state
    store last took them."""

    def __init__(self) -> None:
        self._tuples: dict[TupleId, StoredTuple] = {}
        self._changed: set[TupleId] = set()

    def __getitem__(self, ident: TupleId) -> StoredTuple:
        return self._tuples[ident]

    def __iter__(self) -> Iterator[TupleId]:
        return iter(self._tuples)

    def __len__(self) -> int:
        return len(self._tuples)

    def restore(self, tuples: Mapping[TupleId, StoredTuple]) -> None:
        """Take the tuples a state store saved."""
        self._tuples = dict(tuples)

    def put(self, ident: TupleId, seq: int, ts: float, values: dict[str, Any]) -> None:
        """Store the tuple an insert at ``seq`` wrote."""
        self._tuples[ident] = (seq, ts, values)
        self._changed.add(ident)

    def forget(self, relation: str, key: Any) -> None:
        """Drop a tuple the engine no longer stores (the engine's ``forget`` sink)."""
        self._tuples.pop((relation, key), None)
        self._changed.add((relation, key))

    def inserts(self, schema: Schema) -> list[Op]:
        """The stored tuples as inserts in event-time order (tuples that ``schema`` no longer admits are dropped)."""
        loaded = []
        for ident, (seq, ts, values) in list(self._tuples.items()):
            relation = schema.relations.get(ident[0])
            checked = None
            if relation is not None and type(seq) is int and type(ts) in (int, float):
                try:
                    checked = relation.validate_tuple(values)
                except ValueRejected:
                    pass
            if relation is None or checked is None:
                del self._tuples[ident]
                self._changed.add(ident)
                continue
            loaded.append((ts, seq, Op("insert", ident[0], checked[relation.key], checked, float(ts))))
        loaded.sort(key=lambda item: (item[0], item[1]))
        return [op for _, _, op in loaded]

    def take_changed(self) -> dict[TupleId, StoredTuple | None]:
        """The tuples written (their records) or forgotten (None) since the last call."""
        changed = {ident: self._tuples.get(ident) for ident in self._changed}
        self._changed = set()
        return changed
