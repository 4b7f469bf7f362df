"""Independent references for the capture's tests: the rows an op file replays to, and the rows a table holds.

:func:`replay` applies ops strictly (an insert of a live key or a delete of
a missing key is a duplicate or a gap, and fails), and checks ``ts`` never
goes back; :func:`table_rows` reads the tables with psycopg's own typed values
(not the capture's text forms) and types them as a stream does.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any, Iterable

import orjson
import psycopg
from psycopg import sql

from streaming.ops import parse_op
from streaming.schema import Schema

Rows = dict[str, dict[Any, dict[str, Any]]]


class Replayed(AssertionError):
    """The op file is not a clean history: a duplicate, a gap, or time going back."""


def replay(lines: Iterable[bytes | str], schema: Schema) -> Rows:
    rows: Rows = {name: {} for name in schema.relations}
    last_ts = -math.inf
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        op = parse_op(orjson.loads(line), schema)  # every op is one the ingest would take
        if op.ts < last_ts:
            raise Replayed(f"line {number}: ts {op.ts} before {last_ts}")
        last_ts = op.ts
        live = rows[op.relation]
        if op.kind == "insert":
            if op.key in live:
                raise Replayed(f"line {number}: insert of live {op.relation} {op.key!r} (a duplicate)")
            live[op.key] = op.values
        else:
            if op.key not in live:
                raise Replayed(f"line {number}: delete of missing {op.relation} {op.key!r} (a duplicate or a gap)")
            del live[op.key]
    return rows


def _stream_value(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)).timestamp()
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc).timestamp()
    return value


def table_rows(dsn: str, schema: Schema, namespace: str = "public") -> Rows:
    out: Rows = {}
    with psycopg.connect(dsn) as conn:
        for relation in schema.relations.values():
            names = list(relation.attributes)
            query = sql.SQL("SELECT {} FROM {}.{}").format(sql.SQL(", ").join(map(sql.Identifier, names)),
                                                          sql.Identifier(namespace), sql.Identifier(relation.name))
            table = {}
            for row in conn.execute(query):
                values = {name: _stream_value(value) for name, value in zip(names, row)}
                table[values[relation.key]] = values
            out[relation.name] = table
    return out
