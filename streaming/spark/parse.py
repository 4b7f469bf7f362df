"""Executor side of a micro-batch: parse, validate, select and classify op lines with Arrow.

:func:`make_parser` returns the function given to ``DataFrame.mapInArrow``: it
turns the ``value`` column (stored op lines) into one row per line with the
seq, the validated op (key and values as JSON text), the reject reason, the
group keywords the tuple contains and, for relations with predicates, the
bitmap of the queries the tuple satisfies (attribute selection constructs,
vectorised over the partition's inserts; little-endian bytes). Each such relation also yields one statistics
row (``kind = "asc-stats"``) for the driver's dropping monitor.
:func:`collect_ops` turns the collected Arrow table back into
:class:`~streaming.parsed.ParsedOp` (and the statistics) on the driver.
Only JSON crosses the process boundary; the schema travels as its document.
Keys, values and statistics, which this module both writes and reads, go through orjson.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import orjson
import pyarrow as pa

from streaming.parsed import ParsedOp, parse_stored_line
from streaming.ops import Op
from streaming.schema import Schema
from streaming.asc_selection import SelectionRunner

__all__ = ["PARSED_SCHEMA", "PARSED_ARROW", "STATS_KIND", "make_parser", "collect_ops"]

STATS_KIND = "asc-stats"


def _dumps(value: Any) -> str:
    """JSON text of a validated key or tuple, or of selection statistics (64-bit ints, finite floats,
    str keys: orjson round-trips them exactly)."""
    return orjson.dumps(value).decode()


PARSED_SCHEMA = (
    "seq long, line string, kind string, relation string, key string, "
    "tuple string, ts double, reason string, hits array<string>, queries binary"
)

PARSED_ARROW = pa.schema(
    [
        ("seq", pa.int64()),
        ("line", pa.string()),
        ("kind", pa.string()),
        ("relation", pa.string()),
        ("key", pa.string()),
        ("tuple", pa.string()),
        ("ts", pa.float64()),
        ("reason", pa.string()),
        ("hits", pa.list_(pa.string())),
        ("queries", pa.binary()),
    ]
)


def make_parser(schema_doc: dict[str, Any], keywords: list[str], selection: dict[str, Any] | None = None
                ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function for one plan: schema, group keywords, selection constructs."""
    schema_json = json.dumps(schema_doc)
    keyword_list = sorted(keywords)
    selection_json = json.dumps(selection or {})

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        schema = Schema.from_json(schema_json)
        kws = frozenset(keyword_list)
        runner = SelectionRunner(json.loads(selection_json))
        dumps = _dumps
        for batch in batches:
            cols: dict[str, list] = {name: [] for name in PARSED_ARROW.names}
            selected: dict[str, list[tuple[int, dict]]] = {}
            for line in batch.column("value").to_pylist():
                if line is None or not line.strip():
                    continue
                p = parse_stored_line(line, schema, kws)
                op = p.op
                if op is not None and op.kind == "insert" and runner.covers(op.relation):
                    selected.setdefault(op.relation, []).append((len(cols["seq"]), op.values))
                cols["seq"].append(p.seq)
                cols["line"].append(line)
                cols["kind"].append(op.kind if op else None)
                cols["relation"].append(op.relation if op else None)
                cols["key"].append(dumps(op.key) if op else None)
                cols["tuple"].append(dumps(op.values) if op and op.values is not None else None)
                cols["ts"].append(op.ts if op else None)
                cols["reason"].append(p.reason)
                cols["hits"].append(list(p.hits))
                cols["queries"].append(None)
            for relation, rows in selected.items():
                bitmaps, stats = runner.run(relation, [values for _, values in rows])
                for (i, _), bitmap in zip(rows, bitmaps):
                    cols["queries"][i] = bitmap.to_bytes((bitmap.bit_length() + 7) // 8, "little")
                for name in PARSED_ARROW.names:
                    cols[name].append(None)
                cols["kind"][-1], cols["relation"][-1], cols["tuple"][-1] = STATS_KIND, relation, dumps(stats)
                cols["hits"][-1] = []
            yield pa.RecordBatch.from_pydict(cols, schema=PARSED_ARROW)

    return parse


def collect_ops(table: pa.Table) -> tuple[list[ParsedOp], list[tuple[str, dict[str, Any]]]]:
    """The parsed batch as :class:`ParsedOp` (any order: the evaluator sorts by seq) and
    the selection statistics ``(relation, stats)`` of each partition."""
    cols = {name: table.column(name).to_pylist() for name in PARSED_ARROW.names}
    loads = orjson.loads
    out: list[ParsedOp] = []
    stats: list[tuple[str, dict[str, Any]]] = []
    for seq, line, kind, relation, key, values, ts, reason, hits, queries in zip(*(cols[n] for n in PARSED_ARROW.names)):
        if kind == STATS_KIND:
            stats.append((relation, loads(values)))
            continue
        op = None
        if kind is not None:
            op = Op(kind, relation, loads(key), loads(values) if values is not None else None, ts)
        out.append(ParsedOp(seq, line, op, reason, tuple(hits) if hits else (),
                            int.from_bytes(queries, "little") if queries is not None else None))
    return out, stats
