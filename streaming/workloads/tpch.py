"""A TPC-H stream: ``tpchgen-cli`` data at a small scale factor, replayed in date order.

The schema is :func:`streaming.workloads.tpch_schema.tpch_schema_doc` (partsupp
and lineitem get single-column surrogate keys ``ps_id`` and ``l_id``; lineitem
references partsupp through ``l_ps_id``). Orders are inserted by
``o_orderdate``, each followed by its lineitems; every other tuple is
inserted just before the first order or lineitem that references it
(directly or through the chain lineitem -> partsupp -> part/supplier ->
nation -> region), so the stream is in transaction-date order. ``ts`` is the
number of seconds since the first order date (a day is 86,400 s).
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from ..ops import Op
from ..schema import Schema
from . import Workload
from .tpch_schema import tpch_schema_doc

__all__ = ["COLUMNS", "tpchgen_binary", "generate_tables", "build"]

COLUMNS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey", "r_name", "r_comment"),
    "nation": ("n_nationkey", "n_name", "n_regionkey", "n_comment"),
    "supplier": ("s_suppkey", "s_name", "s_address", "s_nationkey", "s_phone", "s_acctbal", "s_comment"),
    "customer": ("c_custkey", "c_name", "c_address", "c_nationkey", "c_phone", "c_acctbal", "c_mktsegment",
                 "c_comment"),
    "part": ("p_partkey", "p_name", "p_mfgr", "p_brand", "p_type", "p_size", "p_container", "p_retailprice",
             "p_comment"),
    "partsupp": ("ps_partkey", "ps_suppkey", "ps_availqty", "ps_supplycost", "ps_comment"),
    "orders": ("o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice", "o_orderdate", "o_orderpriority",
               "o_clerk", "o_shippriority", "o_comment"),
    "lineitem": ("l_orderkey", "l_partkey", "l_suppkey", "l_linenumber", "l_quantity", "l_extendedprice",
                 "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate", "l_commitdate",
                 "l_receiptdate", "l_shipinstruct", "l_shipmode", "l_comment"),
}
DAY = 86400.0


def tpchgen_binary() -> str:
    """The ``tpchgen-cli`` of the running Python's environment (or on PATH)."""
    local = Path(sys.executable).parent / "tpchgen-cli"
    if local.exists():
        return str(local)
    found = shutil.which("tpchgen-cli")
    if found is None:
        raise FileNotFoundError("tpchgen-cli not found (pip install tpchgen-cli)")
    return found


def generate_tables(scale_factor: float, out_dir: str | Path) -> dict[str, list[list[str]]]:
    """Run ``tpchgen-cli`` (TBL format) and read every table as rows of strings."""
    subprocess.run([tpchgen_binary(), "-s", str(scale_factor), "--output-dir", str(out_dir), "--overwrite"],
                   check=True, capture_output=True)
    tables = {}
    for name in COLUMNS:
        with open(Path(out_dir) / f"{name}.tbl", encoding="utf-8") as fh:
            tables[name] = [line.rstrip("\n").rstrip("|").split("|") for line in fh if line.strip()]
    return tables


def build(scale_factor: float = 0.01, max_orders: int | None = None, work_dir: str | None = None) -> Workload:
    """The TPC-H stream at ``scale_factor`` (optionally only the first ``max_orders`` orders by date)."""
    doc = tpch_schema_doc()
    schema = Schema.from_dict(doc)
    tmp = work_dir or tempfile.mkdtemp(prefix="tpch-")
    try:
        tables = generate_tables(scale_factor, tmp)
    finally:
        if work_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    rows: dict[str, dict[Any, dict[str, Any]]] = {}
    for name, data in tables.items():
        rel = schema.relations[name]
        out: dict[Any, dict[str, Any]] = {}
        for i, raw in enumerate(data, 1):
            values: dict[str, Any] = dict(zip(COLUMNS[name], raw))
            if name == "partsupp":
                values["ps_id"] = i
            if name == "lineitem":
                values["l_id"] = i
            out[values[rel.key] if rel.key in values else i] = values
        rows[name] = out
    ps_of = {(v["ps_partkey"], v["ps_suppkey"]): k for k, v in rows["partsupp"].items()}
    for values in rows["lineitem"].values():
        values["l_ps_id"] = ps_of[(values.pop("l_partkey"), values.pop("l_suppkey"))]
    for name in rows:
        rel = schema.relations[name]
        checked = (rel.validate_tuple(_typed(rel, raw)) for raw in rows[name].values())
        rows[name] = {values[rel.key]: values for values in checked}
    lines_of: dict[Any, list[dict]] = {}
    for values in rows["lineitem"].values():
        lines_of.setdefault(values["l_orderkey"], []).append(values)
    orders = sorted(rows["orders"].values(), key=lambda v: (v["o_orderdate"], v["o_orderkey"]))
    if max_orders is not None:
        orders = orders[:max_orders]
    fks = {name: [(fk.column, fk.target) for fk in schema.relations[name].foreign_keys] for name in COLUMNS}
    keys = {name: schema.relations[name].key for name in COLUMNS}

    def ops() -> Iterator[Op]:
        sent: set[tuple[str, Any]] = set()
        first = orders[0]["o_orderdate"] if orders else 0.0

        def with_references(name: str, values: dict, ts: float) -> Iterator[Op]:
            for column, target in fks[name]:
                ref = values.get(column)
                if ref is not None and (target, ref) not in sent and ref in rows[target]:
                    yield from with_references(target, rows[target][ref], ts)
            node = (name, values[keys[name]])
            if node not in sent:
                sent.add(node)
                yield Op("insert", name, values[keys[name]], values, ts)

        for order in orders:
            ts = order["o_orderdate"] - first
            yield from with_references("orders", order, ts)
            for line in sorted(lines_of.get(order["o_orderkey"], ()), key=lambda v: v["l_linenumber"]):
                yield from with_references("lineitem", line, ts)

    return Workload(doc, ops, {"keywords": "green blue", "tmax": 4, "window_seconds": 30 * DAY})


def _typed(rel: Any, raw: dict[str, Any]) -> dict[str, Any]:
    """TBL strings to the JSON types of the schema (timestamps stay ISO dates)."""
    out: dict[str, Any] = {}
    for attr, value in raw.items():
        typ = rel.attributes[attr]
        if isinstance(value, str):
            if typ == "int":
                value = int(value)
            elif typ == "float":
                value = float(value)
            elif typ == "timestamp":
                value = dt.datetime.fromisoformat(value).replace(tzinfo=dt.timezone.utc).isoformat()
        out[attr] = value
    return out

