"""The stream schema of a publication, read from PostgreSQL's catalog.

Each table of the publication becomes a relation named after the table, keyed
by its single-column primary key, with the columns the publication sends
(all of them, or its column list on PostgreSQL 15+; generated columns are
never sent) typed as the stream schema types them (docs/schema.md):

=============================================  ===========
PostgreSQL type (or a domain over it)          schema type
=============================================  ===========
smallint, integer, bigint                      int
real, double precision, numeric                float
text, varchar, char, uuid                      text
boolean                                        bool
timestamp, timestamptz, date                   timestamp
=============================================  ===========

A foreign key becomes the schema's when it is a single column referencing
the primary key of another table of the publication; any other is left out
and said so in :attr:`Publication.notes`. A table without a single-column
primary key, whose replica identity is not its primary key (or full), or
with a column of another type is refused: :class:`CatalogError` names it and
says what to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader

__all__ = ["TYPE_OIDS", "text_loaders", "CatalogError", "PublishedColumn", "PublishedTable", "Publication", "read_publication"]

#: Base type OID -> stream schema type.
TYPE_OIDS: dict[int, str] = {
    21: "int", 23: "int", 20: "int",
    700: "float", 701: "float", 1700: "float",
    25: "text", 1043: "text", 1042: "text", 2950: "text",
    16: "bool",
    1114: "timestamp", 1184: "timestamp", 1082: "timestamp",
}


def text_loaders(conn: psycopg.Connection) -> None:
    """Make ``conn`` return every mappable type in its PostgreSQL text form (its output function's, as pgoutput
    sends values), not as Python objects."""
    for oid in TYPE_OIDS:
        conn.adapters.register_loader(oid, TextLoader)


class CatalogError(ValueError):
    """The publication cannot be watched as it is; the message names the table or column and what to do."""


@dataclass(frozen=True)
class PublishedColumn:
    name: str
    type: str  # the stream schema's type
    pg_type: str  # as PostgreSQL names it, for messages


@dataclass(frozen=True)
class PublishedTable:
    oid: int
    namespace: str
    name: str
    key: str
    columns: tuple[PublishedColumn, ...]
    row_filter: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.namespace}.{self.name}"

    def select(self) -> sql.Composed:
        """The snapshot's query: the published columns, the rows the publication sends (read them in text
        form, :func:`text_loaders`, as the changes come)."""
        columns = sql.SQL(", ").join(sql.Identifier(c.name) for c in self.columns)
        query = sql.SQL("SELECT {} FROM ONLY {}.{}").format(columns, sql.Identifier(self.namespace),
                                                           sql.Identifier(self.name))
        if self.row_filter:
            query += sql.SQL(" WHERE ") + sql.SQL(self.row_filter)  # type: ignore[arg-type]  # the server's own deparse
        return query


@dataclass(frozen=True)
class Publication:
    name: str
    tables: tuple[PublishedTable, ...]
    foreign_keys: tuple[tuple[str, dict[str, str]], ...]  # (relation, {"name", "column", "references"})
    notes: tuple[str, ...] = ()

    def table(self, oid: int) -> PublishedTable | None:
        return next((t for t in self.tables if t.oid == oid), None)

    def restricted_to(self, schema: dict[str, Any]) -> "Publication":
        """The publication as it supplies ``schema`` (a stream schema made from it earlier): tables and columns
        added since are left out (and said so), one it cannot supply any more is a :class:`CatalogError`."""
        tables: list[PublishedTable] = []
        notes = list(self.notes)
        by_name = {t.name: t for t in self.tables}
        for relation in schema["relations"]:
            table = by_name.pop(relation["name"], None)
            where = f"relation {relation['name']!r} of the stream schema"
            if table is None:
                raise CatalogError(f"{where}: its table is no longer in publication {self.name!r}")
            if table.key != relation["key"]:
                raise CatalogError(f"{where}: table {table.qualified} is now keyed by {table.key!r}, "
                                   f"not {relation['key']!r}")
            columns = {c.name: c for c in table.columns}
            kept = []
            for name, typ in relation["attributes"].items():
                column = columns.pop(name, None)
                if column is None or column.type != typ:
                    now = f"is {column.pg_type} ({column.type})" if column else "is no longer published"
                    raise CatalogError(f"{where}: column {name!r} {now}, the schema says {typ}")
                kept.append(column)
            if columns:
                notes.append(f"table {table.qualified}: column(s) {', '.join(columns)} are not in the stream schema "
                             "and are left out of its ops")
            tables.append(PublishedTable(table.oid, table.namespace, table.name, table.key, tuple(kept),
                                         table.row_filter))
        notes += [f"table {t.qualified} is not in the stream schema: its changes are left out" for t in by_name.values()]
        fks = tuple((relation["name"], fk) for relation in schema["relations"] for fk in relation.get("foreign_keys", []))
        return Publication(schema["name"], tuple(tables), fks, tuple(notes))

    def schema_document(self) -> dict[str, Any]:
        """The stream schema (docs/schema.md) named after the publication."""
        relations = []
        for table in self.tables:
            doc: dict[str, Any] = {"name": table.name, "key": table.key,
                                   "attributes": {c.name: c.type for c in table.columns}}
            fks = [fk for relation, fk in self.foreign_keys if relation == table.name]
            if fks:
                doc["foreign_keys"] = fks
            relations.append(doc)
        return {"name": self.name, "relations": relations}


_PUBLICATION = "SELECT pubname FROM pg_publication WHERE pubname = %s"
_TABLES = """
SELECT c.oid, n.nspname, c.relname, c.relreplident, {extra}
FROM pg_publication_tables pt
JOIN pg_namespace n ON n.nspname = pt.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
WHERE pt.pubname = %s
ORDER BY n.nspname, c.relname
"""
_COLUMNS = """
SELECT a.attrelid, a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
WHERE a.attrelid = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
ORDER BY a.attrelid, a.attnum
"""
_KEYS = """
SELECT i.indrelid, i.indisprimary, i.indisreplident, array_agg(a.attname ORDER BY k.ord)
FROM pg_index i
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = ANY(%s) AND (i.indisprimary OR i.indisreplident)
GROUP BY i.indexrelid, i.indrelid, i.indisprimary, i.indisreplident
"""
_FOREIGN_KEYS = """
SELECT con.conname, con.conrelid, con.confrelid,
       ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.o),
       ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.o),
       con.confrelid::regclass::text
FROM pg_constraint con
WHERE con.contype = 'f' AND con.conrelid = ANY(%s)
ORDER BY con.conrelid, con.conname
"""
_TYPES = "SELECT oid, typtype, typbasetype FROM pg_type WHERE oid = ANY(%s)"


def _base_types(cur: psycopg.Cursor, oids: Iterable[int]) -> dict[int, int]:
    """Each type OID -> its base type (a domain's, through domains over domains)."""
    base = {oid: oid for oid in oids}
    pending = set(base)
    while pending:
        cur.execute(_TYPES, (list(pending),))
        domains = {oid: parent for oid, kind, parent in cur.fetchall() if kind == "d"}
        pending = set()
        for oid, current in base.items():
            if current in domains:
                base[oid] = domains[current]
                pending.add(domains[current])
    return base


def _columns(cur: psycopg.Cursor, oids: list[int], published: dict[int, list[str] | None],
             names: dict[int, str]) -> dict[int, list[PublishedColumn]]:
    cur.execute(_COLUMNS, (oids,))
    rows = cur.fetchall()
    base = _base_types(cur, {row[2] for row in rows})
    out: dict[int, list[PublishedColumn]] = {oid: [] for oid in oids}
    for relid, column, type_oid, pg_type in rows:
        wanted = published.get(relid)
        if wanted is not None and column not in wanted:
            continue
        schema_type = TYPE_OIDS.get(base[type_oid])
        if schema_type is None:
            raise CatalogError(
                f"table {names[relid]}: column {column!r} is of type {pg_type}, which a stream cannot hold "
                f"(int, float, text, bool and timestamp types only): leave it out of the publication (a column "
                f"list, PostgreSQL 15+) or change its type")
        out[relid].append(PublishedColumn(column, schema_type, pg_type))
    return out


def _keys(cur: psycopg.Cursor, oids: list[int], names: dict[int, str],
          identity: dict[int, str]) -> dict[int, str]:
    cur.execute(_KEYS, (oids,))
    primary: dict[int, list[str]] = {}
    replica: dict[int, list[str]] = {}
    for relid, is_primary, is_replident, columns in cur.fetchall():
        if is_primary:
            primary[relid] = columns
        if is_replident:
            replica[relid] = columns
    keys = {}
    for oid in oids:
        columns = primary.get(oid)
        if not columns:
            raise CatalogError(f"table {names[oid]} has no primary key: a relation needs a single-column key")
        if len(columns) != 1:
            raise CatalogError(f"table {names[oid]}: its primary key ({', '.join(columns)}) has {len(columns)} "
                               "columns; a relation needs a single-column key")
        if identity[oid] == "n" or (identity[oid] == "i" and replica.get(oid) != columns):
            raise CatalogError(f"table {names[oid]}: its replica identity is not its primary key, so its deletes and "
                               f"updates would not say which row they change: ALTER TABLE {names[oid]} REPLICA "
                               "IDENTITY DEFAULT")
        keys[oid] = columns[0]
    return keys


def _type_of(table: PublishedTable, column: str) -> str:
    return next(c.type for c in table.columns if c.name == column)


def _foreign_keys(cur: psycopg.Cursor, tables: dict[int, PublishedTable],
                  ) -> tuple[list[tuple[str, dict[str, str]]], list[str]]:
    cur.execute(_FOREIGN_KEYS, (list(tables),))
    fks: list[tuple[str, dict[str, str]]] = []
    notes: list[str] = []
    used: dict[str, set[str]] = {}
    for name, relid, target_oid, columns, target_columns, target_name in cur.fetchall():
        holder = tables[relid]
        target = tables.get(target_oid)
        where = f"foreign key {name} of {holder.qualified}"
        if target is None:
            notes.append(f"{where} left out: {target_name} is not in the publication")
        elif len(columns) != 1:
            notes.append(f"{where} left out: it has {len(columns)} columns")
        elif target_columns != [target.key]:
            notes.append(f"{where} left out: it references {target_name}({', '.join(target_columns)}), "
                         "not its primary key")
        elif columns[0] not in {c.name for c in holder.columns}:
            notes.append(f"{where} left out: column {columns[0]} is not published")
        elif _type_of(holder, columns[0]) != _type_of(target, target.key):
            notes.append(f"{where} left out: {columns[0]} is {_type_of(holder, columns[0])} in a stream, "
                         f"{target_name}.{target.key} is {_type_of(target, target.key)}")
        else:
            taken = used.setdefault(holder.name, set())
            fk_name = columns[0] if columns[0] not in taken else name
            taken.add(fk_name)
            fks.append((holder.name, {"name": fk_name, "column": columns[0], "references": target.name}))
    return fks, notes


def read_publication(conn: psycopg.Connection, name: str) -> Publication:
    """The publication's tables as a stream schema; :class:`CatalogError` if it cannot be watched."""
    with conn.cursor() as cur:
        cur.execute(_PUBLICATION, (name,))
        if cur.fetchone() is None:
            raise CatalogError(f"publication {name!r} does not exist in database {conn.info.dbname!r}")
        modern = conn.info.server_version >= 150000  # column lists and row filters
        extra = "pt.attnames, pt.rowfilter" if modern else "NULL::text[], NULL::text"
        cur.execute(_TABLES.format(extra=extra), (name,))
        rows = cur.fetchall()
        if not rows:
            raise CatalogError(f"publication {name!r} has no table")
        names = {oid: f"{namespace}.{table}" for oid, namespace, table, *_ in rows}
        seen: dict[str, str] = {}
        for oid, _, table, *_ in rows:
            if table in seen:
                raise CatalogError(f"tables {seen[table]} and {names[oid]} would both be relation {table!r}: "
                                   "publish one of them only")
            seen[table] = names[oid]
        oids = [row[0] for row in rows]
        columns = _columns(cur, oids, {row[0]: row[4] for row in rows}, names)
        keys = _keys(cur, oids, names, {row[0]: row[3] for row in rows})
        tables: dict[int, PublishedTable] = {}
        for oid, namespace, table, _, _, row_filter in rows:
            if keys[oid] not in {c.name for c in columns[oid]}:
                raise CatalogError(f"table {names[oid]}: its primary key {keys[oid]!r} is not published (add it to "
                                   "the publication's column list)")
            tables[oid] = PublishedTable(oid, namespace, table, keys[oid], tuple(columns[oid]), row_filter)
        fks, notes = _foreign_keys(cur, tables)
    return Publication(name, tuple(tables.values()), tuple(fks), tuple(notes))
