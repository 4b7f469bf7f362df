"""The TPC-H schema as a schema document (8 relations, 8 foreign keys).

Used for the paper's Table 7 (CN counts) and by the TPC-H stream generator.
``lineitem`` references ``partsupp`` with one foreign key: ``partsupp`` gets a
single-column surrogate key ``ps_id`` (TPC-H's key is the pair
``(ps_partkey, ps_suppkey)``; our foreign keys reference single-column keys).
"""

from __future__ import annotations

from typing import Any

from ..schema import Schema

__all__ = ["TPCH_RELATIONS", "tpch_schema_doc", "tpch_schema"]

# (name, key, attributes, [(fk name, column, referenced relation)])
TPCH_RELATIONS: tuple[tuple[str, str, dict[str, str], list[tuple[str, str, str]]], ...] = (
    ("region", "r_regionkey", {"r_regionkey": "int", "r_name": "text", "r_comment": "text"}, []),
    (
        "nation",
        "n_nationkey",
        {"n_nationkey": "int", "n_name": "text", "n_regionkey": "int", "n_comment": "text"},
        [("n_regionkey", "n_regionkey", "region")],
    ),
    (
        "supplier",
        "s_suppkey",
        {
            "s_suppkey": "int",
            "s_name": "text",
            "s_address": "text",
            "s_nationkey": "int",
            "s_phone": "text",
            "s_acctbal": "float",
            "s_comment": "text",
        },
        [("s_nationkey", "s_nationkey", "nation")],
    ),
    (
        "customer",
        "c_custkey",
        {
            "c_custkey": "int",
            "c_name": "text",
            "c_address": "text",
            "c_nationkey": "int",
            "c_phone": "text",
            "c_acctbal": "float",
            "c_mktsegment": "text",
            "c_comment": "text",
        },
        [("c_nationkey", "c_nationkey", "nation")],
    ),
    (
        "part",
        "p_partkey",
        {
            "p_partkey": "int",
            "p_name": "text",
            "p_mfgr": "text",
            "p_brand": "text",
            "p_type": "text",
            "p_size": "int",
            "p_container": "text",
            "p_retailprice": "float",
            "p_comment": "text",
        },
        [],
    ),
    (
        "partsupp",
        "ps_id",
        {
            "ps_id": "int",
            "ps_partkey": "int",
            "ps_suppkey": "int",
            "ps_availqty": "int",
            "ps_supplycost": "float",
            "ps_comment": "text",
        },
        [("ps_partkey", "ps_partkey", "part"), ("ps_suppkey", "ps_suppkey", "supplier")],
    ),
    (
        "orders",
        "o_orderkey",
        {
            "o_orderkey": "int",
            "o_custkey": "int",
            "o_orderstatus": "text",
            "o_totalprice": "float",
            "o_orderdate": "timestamp",
            "o_orderpriority": "text",
            "o_clerk": "text",
            "o_shippriority": "int",
            "o_comment": "text",
        },
        [("o_custkey", "o_custkey", "customer")],
    ),
    (
        "lineitem",
        "l_id",
        {
            "l_id": "int",
            "l_orderkey": "int",
            "l_ps_id": "int",
            "l_linenumber": "int",
            "l_quantity": "float",
            "l_extendedprice": "float",
            "l_discount": "float",
            "l_tax": "float",
            "l_returnflag": "text",
            "l_linestatus": "text",
            "l_shipdate": "timestamp",
            "l_commitdate": "timestamp",
            "l_receiptdate": "timestamp",
            "l_shipinstruct": "text",
            "l_shipmode": "text",
            "l_comment": "text",
        },
        [("l_orderkey", "l_orderkey", "orders"), ("l_ps_id", "l_ps_id", "partsupp")],
    ),
)


def tpch_schema_doc() -> dict[str, Any]:
    """The TPC-H schema document (the schema JSON of docs/schema.md)."""
    relations = []
    for name, key, attributes, fks in TPCH_RELATIONS:
        doc: dict[str, Any] = {"name": name, "key": key, "attributes": dict(attributes)}
        if fks:
            doc["foreign_keys"] = [{"name": n, "column": c, "references": t} for n, c, t in fks]
        relations.append(doc)
    return {"name": "tpch", "relations": relations}


def tpch_schema() -> Schema:
    """The TPC-H schema, validated."""
    return Schema.from_dict(tpch_schema_doc())
