"""The compact CN DAG: records read back node by node, random access, pruning, closed-form counts."""

from __future__ import annotations

import itertools
import random
from math import prod

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.cn import generate_cns
from streaming.cn.nt2cn import CNDag, _conflicts, _group_count, build_dag, build_dag_cold, dag_codes, valid_combinations
from streaming.cn.templates import generate_nts, templates
from streaming.lattice import Lattice
from streaming.schema import Schema, load_schema
from streaming.workloads.tpch_schema import tpch_schema

from .strategies import schemas

from tests.examples import ECOMMERCE


def node_rows(dag: CNDag) -> list[tuple[int, int, int, tuple[int, ...], tuple[int, ...]]]:
    """Every node as ``(relation, mask, size, edge labels, child ids)`` through :meth:`CNDag.blocks`."""
    rows = []
    next_id = 0
    for start, rel, mask, size, labels, lists in dag.blocks():
        assert start == next_id, "blocks are contiguous and in id order"
        for kids in itertools.product(*lists):
            rows.append((rel, mask, size, labels, kids))
        next_id = len(rows)
    return rows


def check_dag(dag: CNDag, m: int) -> None:
    rows = node_rows(dag)
    assert len(rows) == len(dag)
    assert list(dag.roots) == list(range(len(dag) - len(dag.roots), len(dag)))
    full = (1 << m) - 1
    has_parent = [False] * len(rows)
    for i, (rel, mask, size, labels, kids) in enumerate(rows):
        assert dag.node(i) == (rel, mask, size, labels, kids)
        assert len(labels) == len(kids)
        assert all(c < i for c in kids), "children first"
        assert size == 1 + sum(rows[c][2] for c in kids)
        for c in kids:
            has_parent[c] = True
        union = mask
        stack = list(kids)
        while stack:
            c = stack.pop()
            union |= rows[c][1]
            stack.extend(rows[c][4])
        assert (union == full) == (i in dag.roots), "whole CNs are exactly the nodes holding every keyword"
    assert all(has_parent[i] or i in dag.roots for i in range(len(rows))), "only used partial CNs are kept"
    for bad in (-1, len(dag)):
        with pytest.raises(IndexError):
            dag.node(bad)


@pytest.mark.parametrize("name,m,tmax", [("ecommerce", 3, 5), ("tpch", 3, 5), ("tpch", 4, 4)])
def test_blocks_and_random_access_agree(name, m, tmax):
    schema = load_schema(ECOMMERCE) if name == "ecommerce" else tpch_schema()
    check_dag(build_dag(schema, m, tmax), m)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas(max_relations=3, max_fks=5), m=st.integers(1, 3), tmax=st.integers(1, 5))
def test_random_schemas_read_back_and_match_inserted_lattice(schema, m, tmax):
    dag = build_dag(schema, m, tmax)
    check_dag(dag, m)
    built, inserted = Lattice(dag), Lattice.from_cns(generate_cns(schema, m, tmax, "initcngen"))
    assert sorted(built.codes()) == sorted(inserted.codes())
    assert built.counts() == inserted.counts()


def test_cold_and_warm_builds_are_the_same():
    schema = tpch_schema()
    assert templates(3, 5) is templates(3, 5)
    assert [n.code() for n in templates(3, 5).roots] == [n.code() for n in generate_nts(3, 5).roots]
    cold, warm = build_dag_cold(schema, 3, 5), build_dag(schema, 3, 5)
    assert dag_codes(cold) == dag_codes(warm) and cold.roots == warm.roots


def test_rule3_groups_count_only_valid_combinations():
    """A relation holding two parallel fks to P: a whole CN below it takes each fk once."""
    schema = Schema.from_dict(
        {
            "name": "parallel",
            "relations": [
                {"name": "P", "key": "id", "attributes": {"id": "int"}},
                {
                    "name": "H",
                    "key": "id",
                    "attributes": {"id": "int", "a": "int", "b": "int", "c": "int"},
                    "foreign_keys": [
                        {"name": "a", "column": "a", "references": "P"},
                        {"name": "b", "column": "b", "references": "P"},
                        {"name": "c", "column": "c", "references": "P"},
                    ],
                },
            ],
        }
    )
    codes = set(dag_codes(build_dag(schema, 3, 4)))
    # H{} with three P leaves: each of the 3! assignments of a, b, c is one CN
    star = {c for c in codes if c.startswith("H{0}[") and c.count("P{") == 3}
    assert len(star) == 6
    assert "H{0}[>a:P{1},>b:P{2},>c:P{4}]" in star
    assert not any(c.startswith("H{0}[>a:P{1},>a:") for c in codes)
    check_dag(build_dag(schema, 3, 4), 3)


def test_group_counts_match_enumeration():
    rng = random.Random(7)
    for _ in range(300):
        k = rng.randint(1, 4)
        positions = []
        for _ in range(k):
            # at most one choice per held fk at a position, any number holding nothing
            bits = rng.sample([0, 0, 0, 1, 2, 4, 8], rng.randint(1, 4))
            positions.append([(label, bit, rng.randint(1, 5), ()) for label, bit in enumerate(bits)])
        expected = sum(prod(o[2] for o in combo) for combo in valid_combinations(positions))
        assert _group_count(positions) == expected
        if k == 2:
            totals = [sum(o[2] for o in p) for p in positions]
            assert totals[0] * totals[1] - _conflicts(*positions) == expected
        brute = [c for c in itertools.product(*positions) if len({o[1] for o in c if o[1]}) == sum(1 for o in c if o[1])]
        assert valid_combinations(positions) == brute
