"""The stream schema of a publication, from a real catalog: types, keys, foreign keys, and what is refused."""

from __future__ import annotations

import psycopg
import pytest

from streaming.capture.catalog import CatalogError, read_publication
from streaming.schema import Schema


def publication(dsn: str, ddl: str, name: str = "pub"):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(ddl)
        return read_publication(conn, name)


def test_types_keys_and_foreign_keys_make_a_valid_schema(source_db):
    pub = publication(source_db, """
        CREATE DOMAIN price AS numeric(10, 2);
        CREATE DOMAIN dear AS price CHECK (VALUE > 100);
        CREATE TABLE customer (cid bigint PRIMARY KEY, name varchar(40), state char(2), vip boolean);
        CREATE TABLE product (pid int PRIMARY KEY, title text, price price, top dear, weight real, ratio float8,
                              added timestamptz, made timestamp, due date, code uuid, stock smallint,
                              label text GENERATED ALWAYS AS (upper(title)) STORED);
        CREATE TABLE "Order" (oid int PRIMARY KEY, cid bigint REFERENCES customer, pid int REFERENCES product,
                              note text);
        CREATE PUBLICATION pub FOR TABLE customer, product, "Order";
    """)
    doc = pub.schema_document()
    relations = {r["name"]: r for r in doc["relations"]}
    assert doc["name"] == "pub"
    assert relations["customer"] == {"name": "customer", "key": "cid",
                                     "attributes": {"cid": "int", "name": "text", "state": "text", "vip": "bool"}}
    assert relations["product"]["attributes"] == {
        "pid": "int", "title": "text", "price": "float", "top": "float", "weight": "float", "ratio": "float",
        "added": "timestamp", "made": "timestamp", "due": "timestamp", "code": "text", "stock": "int"}
    assert relations["Order"]["foreign_keys"] == [{"name": "cid", "column": "cid", "references": "customer"},
                                                  {"name": "pid", "column": "pid", "references": "product"}]
    Schema.from_dict(doc)  # the contract's own validation takes it
    assert pub.notes == ()


def test_foreign_keys_it_cannot_hold_are_left_out_and_said(source_db):
    pub = publication(source_db, """
        CREATE TABLE outside (id int PRIMARY KEY);
        CREATE TABLE parent (id int PRIMARY KEY, code text UNIQUE);
        CREATE TABLE child (id int PRIMARY KEY, parent int REFERENCES parent, code text REFERENCES parent (code),
                            other int REFERENCES outside, self_ref int REFERENCES child);
        CREATE PUBLICATION pub FOR TABLE parent, child;
    """)
    child = next(r for r in pub.schema_document()["relations"] if r["name"] == "child")
    assert child["foreign_keys"] == [{"name": "parent", "column": "parent", "references": "parent"},
                                     {"name": "self_ref", "column": "self_ref", "references": "child"}]
    assert any("child_code_fkey" in n and "not its primary key" in n for n in pub.notes)
    assert any("child_other_fkey" in n and "not in the publication" in n for n in pub.notes)
    Schema.from_dict(pub.schema_document())


@pytest.mark.parametrize("ddl, message", [
    ("CREATE TABLE t (a int, b text); CREATE PUBLICATION pub FOR TABLE t",
     "table public.t has no primary key"),
    ("CREATE TABLE t (a int, b int, PRIMARY KEY (a, b)); CREATE PUBLICATION pub FOR TABLE t",
     "its primary key (a, b) has 2 columns"),
    ("CREATE TABLE t (a int PRIMARY KEY, doc jsonb); CREATE PUBLICATION pub FOR TABLE t",
     "table public.t: column 'doc' is of type jsonb"),
    ("CREATE TABLE t (a int PRIMARY KEY, tags text[]); CREATE PUBLICATION pub FOR TABLE t",
     "column 'tags' is of type text[]"),
    ("CREATE TABLE t (a int PRIMARY KEY, b int NOT NULL UNIQUE); ALTER TABLE t REPLICA IDENTITY USING INDEX t_b_key;"
     "CREATE PUBLICATION pub FOR TABLE t", "its replica identity is not its primary key"),
    ("CREATE SCHEMA other; CREATE TABLE t (a int PRIMARY KEY); CREATE TABLE other.t (a int PRIMARY KEY);"
     "CREATE PUBLICATION pub FOR TABLE t, other.t", "would both be relation 't'"),
    ("CREATE PUBLICATION pub", "publication 'pub' has no table"),
    ("CREATE TABLE t (a int PRIMARY KEY, b text); CREATE PUBLICATION pub FOR TABLE t (b)",
     "its primary key 'a' is not published"),
    ("SELECT 1", "publication 'pub' does not exist"),
])
def test_what_cannot_be_watched_is_refused_with_its_name(source_db, ddl, message):
    with pytest.raises(CatalogError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        publication(source_db, ddl)


def test_a_column_list_leaves_out_a_column_it_cannot_map(source_db):
    pub = publication(source_db, """
        CREATE TABLE t (a int PRIMARY KEY, doc jsonb, b text);
        CREATE PUBLICATION pub FOR TABLE t (a, b) WHERE (a > 10);
    """)
    (table,) = pub.tables
    assert [c.name for c in table.columns] == ["a", "b"]
    assert table.row_filter == "(a > 10)"
