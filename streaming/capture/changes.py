"""Turning a publication's row changes into ops (docs/sources.md, "What a change becomes").

An INSERT is an insert; a DELETE a delete of its key; an UPDATE a delete of
the old key then an insert of the new row (when the key changed too); a
TRUNCATE a delete per live row of each table. Every op of a transaction
carries the same ``ts``: its commit time. Values arrive as PostgreSQL's text
forms (the session runs with ``DateStyle=ISO`` and ``TimeZone=UTC``) and are
typed as the stream schema types the column; a value the stream cannot hold
(``NaN``, ``infinity``, a date before year 1) becomes null.

The live rows are kept in a :class:`RowStore` (the capture's state): a
TRUNCATE needs to know which rows to delete, and an UPDATE that leaves a
TOASTed value as it was does not send it again.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, Callable, Iterable, Protocol

from . import CaptureError
from .catalog import Publication, PublishedTable
from .pgoutput import UNCHANGED, Delete, Insert, Relation, Truncate, Update, Value

__all__ = ["RowStore", "from_text", "ChangeOps"]


class RowStore(Protocol):
    """The live rows of each relation, by key (JSON-able values)."""

    def row(self, relation: str, key: Any) -> dict[str, Any] | None: ...

    def put_row(self, relation: str, key: Any, row: dict[str, Any]) -> None: ...

    def remove_row(self, relation: str, key: Any) -> None: ...

    def keys(self, relation: str) -> list[Any]: ...


def _float(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _timestamp(text: str) -> float | None:
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:  # infinity, BC, a year past 9999: nothing a stream can hold
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.timestamp()


_FROM_TEXT: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": _float,
    "text": str,
    "bool": lambda text: text == "t",
    "timestamp": _timestamp,
}


def from_text(text: str | None, schema_type: str) -> Any:
    """A column's text form as the stream schema types it (None for null or a value it cannot hold)."""
    return None if text is None else _FROM_TEXT[schema_type](text)


class _Layout:
    """Where each published column of a table comes in a change message, and how to type it."""

    def __init__(self, table: PublishedTable, names: Iterable[str]):
        position = {name: i for i, name in enumerate(names)}
        if table.key not in position:
            raise CaptureError(f"table {table.qualified}: its changes no longer carry its key {table.key!r}: "
                               "recreate the stream's schema from the catalog")
        self.table = table
        self.fields = [(c.name, position.get(c.name), _FROM_TEXT[c.type]) for c in table.columns]
        self.key_at = position[table.key]
        self.key_type = _FROM_TEXT[next(c.type for c in table.columns if c.name == table.key)]

    def row(self, values: tuple[Value, ...], old: dict[str, Any] | None = None) -> dict[str, Any]:
        row = {}
        for name, at, convert in self.fields:
            value = values[at] if at is not None else None
            if value is UNCHANGED:
                row[name] = old.get(name) if old is not None else None
            else:
                row[name] = None if value is None else self._typed(name, value, convert)
        return row

    def key(self, values: tuple[Value, ...]) -> Any:
        value = values[self.key_at]
        if not isinstance(value, str):
            raise CaptureError(f"table {self.table.qualified}: a change came without its key")
        return self._typed(self.table.key, value, self.key_type)

    def _typed(self, name: str, text: str, convert: Callable[[str], Any]) -> Any:
        try:
            return convert(text)
        except ValueError:
            raise CaptureError(f"table {self.table.qualified}: column {name!r} holds {text[:40]!r}, not what the "
                               "stream schema says: the table changed; recreate the stream's schema from the "
                               "catalog") from None


class ChangeOps:
    """The ops of a publication's changes, keeping its live rows in ``rows``."""

    def __init__(self, publication: Publication, rows: RowStore):
        self.publication = publication
        self.rows = rows
        self._published = {t.oid: _Layout(t, [c.name for c in t.columns]) for t in publication.tables}
        self._layouts = dict(self._published)  # as the changes carry them (a Relation message may change one)
        self.notes: list[str] = list(publication.notes)  # and what changes of the tables leave out

    def relation(self, message: Relation) -> None:
        """A table's columns as its changes will carry them from now on."""
        table = self.publication.table(message.relation)
        if table is None:
            return
        names = [c.name for c in message.columns]
        extra = sorted(set(names) - {c.name for c in table.columns})
        note = (f"table {table.qualified}: column(s) {', '.join(extra)} are not in the stream schema "
                "and are left out of its ops")
        if extra and note not in self.notes:
            self.notes.append(note)
        self._layouts[table.oid] = _Layout(table, names)

    def insert(self, message: Insert, ts: float) -> list[dict[str, Any]]:
        layout = self._layouts.get(message.relation)
        if layout is None:
            return []
        row = layout.row(message.new)
        return [self._insert(layout.table, row, ts)]

    def update(self, message: Update, ts: float) -> list[dict[str, Any]]:
        layout = self._layouts.get(message.relation)
        if layout is None:
            return []
        old_key = layout.key(message.old) if message.old is not None else layout.key(message.new)
        old_row = self.rows.row(layout.table.name, old_key)
        row = layout.row(message.new, old_row)
        return [self._delete(layout.table, old_key, ts), self._insert(layout.table, row, ts)]

    def delete(self, message: Delete, ts: float) -> list[dict[str, Any]]:
        layout = self._layouts.get(message.relation)
        if layout is None:
            return []
        return [self._delete(layout.table, layout.key(message.old), ts)]

    def truncate(self, message: Truncate, ts: float) -> list[dict[str, Any]]:
        ops = []
        for oid in message.relations:
            table = self.publication.table(oid)
            if table is not None:
                ops += [self._delete(table, key, ts) for key in self.rows.keys(table.name)]
        return ops

    def snapshot_row(self, table: PublishedTable, texts: tuple[str | None, ...], ts: float) -> dict[str, Any]:
        """The insert of one row of the initial snapshot (its columns in the table's published order)."""
        return self._insert(table, self._published[table.oid].row(texts), ts)

    def _insert(self, table: PublishedTable, row: dict[str, Any], ts: float) -> dict[str, Any]:
        self.rows.put_row(table.name, row[table.key], row)
        return {"op": "insert", "relation": table.name, "tuple": row, "ts": ts}

    def _delete(self, table: PublishedTable, key: Any, ts: float) -> dict[str, Any]:
        self.rows.remove_row(table.name, key)
        return {"op": "delete", "relation": table.name, "key": key, "ts": ts}
