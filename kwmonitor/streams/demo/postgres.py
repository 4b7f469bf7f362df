"""The demo's PostgreSQL-sourced stream: the E-commerce tables in a database, a stream captured from them.

``DEMO_POSTGRES=1 make run`` starts a throwaway PostgreSQL with
``wal_level=logical`` under ``$VAR_DIR/pgsource`` (the shared server of a
machine seldom has logical replication on), exports its DSN as
``KW_DSN_DEMO`` and then: :func:`load_postgres_demo` (``manage.py
load_postgres_demo``) makes the tables ``Customer``, ``Product``, ``Order``
and ``Group`` (empty, each run) and the publication ``demo``, and the stream
``shop-pg`` whose schema is made from the catalog (the same relations as the
demo's ``ecommerce``) with the demo's queries; :class:`TableFeeder`
(``manage.py feed_postgres``) writes the demo feed into the tables as SQL, so
the capture turns it back into ops.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import orjson
import psycopg
from psycopg import sql

from django.contrib.auth import get_user_model
from django.db import transaction

from kwmonitor.catalog.models import Schema
from kwmonitor.streams.models import Stream
from kwmonitor.streams.postgres import publication_of
from streaming.ops import Op, OpRejected, parse_op
from streaming.schema import Schema as SchemaGraph

from . import demo_queries

__all__ = ["DSN_ENV", "PUBLICATION", "SLOT", "TABLES", "load_postgres_demo", "FeedResult", "TableFeeder"]

DSN_ENV = "KW_DSN_DEMO"
PUBLICATION = "demo"
SLOT = "kw_demo"
# The demo schema's relations as tables (quoted: their names are the relations').
TABLES = """
CREATE TABLE IF NOT EXISTS "Customer" (cid int PRIMARY KEY, name text, state text);
CREATE TABLE IF NOT EXISTS "Product" (pid int PRIMARY KEY, title text, price numeric(10, 2));
CREATE TABLE IF NOT EXISTS "Order" (oid int PRIMARY KEY, cid int REFERENCES "Customer" ON DELETE CASCADE,
                                    pid int REFERENCES "Product" ON DELETE CASCADE, note text);
CREATE TABLE IF NOT EXISTS "Group" (gid int PRIMARY KEY, pid int REFERENCES "Product" ON DELETE CASCADE,
                                    sid int REFERENCES "Product" ON DELETE CASCADE);
TRUNCATE "Customer", "Product", "Order", "Group";
"""


def load_postgres_demo(username: str, stream_name: str = "shop-pg") -> Stream:
    """Empty tables and their publication in the database of ``KW_DSN_DEMO``; the stream and its queries."""
    probe = Stream(name=stream_name, source_kind="postgres", source_dsn_env=DSN_ENV, source_publication=PUBLICATION,
                   source_slot=SLOT)
    with psycopg.connect(probe.source_dsn(), autocommit=True) as conn:
        conn.execute(TABLES)
        if conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (PUBLICATION,)).fetchone() is None:
            conn.execute(sql.SQL('CREATE PUBLICATION {} FOR TABLE "Customer", "Product", "Order", "Group"').format(
                sql.Identifier(PUBLICATION)))
    doc = dict(publication_of(probe).schema_document(), name=stream_name)
    with transaction.atomic():
        stream = Stream.objects.filter(name=stream_name).first()
        schema = Schema.import_document(doc, description="The demo's tables in PostgreSQL (made from the catalog).",
                                        replace=True)
        if stream is None:
            probe.schema, probe.user_queries = schema, True
            probe.save()
            stream = probe
        demo_queries(stream, get_user_model().objects.get(username=username))
    return stream


@dataclass
class FeedResult:
    applied: int = 0
    skipped: list[str] = field(default_factory=list)  # why an op was not applied


class TableFeeder:
    """Applies NDJSON ops to the tables of a PostgreSQL-sourced stream as SQL, ``rate`` ops a second.

    An insert is an INSERT (a key already there is skipped), a delete a
    DELETE; a line that is not an op of the stream's schema, or that the
    database refuses (a foreign key to a row not there), is skipped.
    """

    def __init__(self, stream: Stream, rate: float = 0.0, batch: int | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.schema = SchemaGraph.from_dict(stream.schema.to_document())
        self.conn = psycopg.connect(stream.source_dsn(), autocommit=True)
        self.rate = rate
        self.batch = batch or (max(1, min(1000, int(rate / 20))) if rate else 1000)
        self.sleep = sleep

    def _statement(self, op: Op) -> tuple[sql.Composed, list]:
        table = sql.Identifier(op.relation)
        if op.kind == "insert":
            assert op.values is not None
            names = list(op.values)
            return (sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING").format(
                table, sql.SQL(", ").join(map(sql.Identifier, names)), sql.SQL(", ").join(sql.Placeholder() * len(names))),
                [op.values[n] for n in names])
        key = self.schema.relations[op.relation].key
        return sql.SQL("DELETE FROM {} WHERE {} = %s").format(table, sql.Identifier(key)), [op.key]

    def _apply(self, ops: list[Op], result: FeedResult) -> None:
        try:
            with self.conn.transaction():
                for op in ops:
                    self.conn.execute(*self._statement(op))
            result.applied += len(ops)
        except psycopg.IntegrityError:  # one op is refused: the others go alone
            for op in ops:
                try:
                    self.conn.execute(*self._statement(op))
                    result.applied += 1
                except psycopg.IntegrityError as exc:
                    result.skipped.append(f"{op.kind} {op.relation} {op.key!r}: {exc.diag.message_primary}")

    def run(self, lines: Iterable[str]) -> FeedResult:
        result = FeedResult()
        started, sent = time.monotonic(), 0
        chunk: list[Op] = []
        for line in lines:
            try:
                chunk.append(parse_op(orjson.loads(line), self.schema))
            except (orjson.JSONDecodeError, OpRejected) as exc:
                result.skipped.append(f"not an op of the stream: {exc}")
                continue
            if len(chunk) < self.batch:
                continue
            sent = self._pace(started, sent, chunk, result)
            chunk = []
        if chunk:
            self._pace(started, sent, chunk, result)
        return result

    def _pace(self, started: float, sent: int, chunk: list[Op], result: FeedResult) -> int:
        if self.rate:
            wait = started + sent / self.rate - time.monotonic()
            if wait > 0:
                self.sleep(wait)
        self._apply(chunk, result)
        return sent + len(chunk)
