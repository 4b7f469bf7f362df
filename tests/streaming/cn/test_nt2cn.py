"""NT2CN: CN counts of the paper's Table 7, the CN definition, Rule-3, agreement with InitCNGen and brute force."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.cn import generate_cns
from streaming.cn.model import CandidateNetwork
from streaming.cn.nt2cn import build_dag
from streaming.schema import Schema, load_schema
from streaming.workloads.tpch_schema import tpch_schema

from .reference import cn_invariant, reference_cns
from .strategies import schemas

from tests.examples import ECOMMERCE

# paper Table 7 (CNs on TPC-H): TABLE7[m][tmax - 2]
TABLE7 = {
    2: [24, 52, 94, 161, 261, 427, 685, 1120, 1790],
    3: [56, 224, 649, 1633, 3676, 7947, 16404, 33378, 65719],
    4: [120, 820, 3600, 12705, 38193, 105532, 271386, 669564, 1579082],
    5: [248, 2768, 17793, 85803, 337061, 1171151, 3694081, 10919751, 30435766],
}
FAST = [(m, t) for m in (2, 3, 4) for t in range(2, 11)] + [(5, t) for t in range(2, 8)]
SLOW = [(5, 8), (5, 9), (5, 10)]


@pytest.fixture(scope="module")
def tpch() -> Schema:
    return tpch_schema()


@pytest.fixture(scope="module")
def ecommerce() -> Schema:
    return load_schema(ECOMMERCE)


@pytest.mark.parametrize("m,tmax", FAST)
def test_table7(tpch, m, tmax):
    assert len(build_dag(tpch, m, tmax).roots) == TABLE7[m][tmax - 2]


@pytest.mark.slow
@pytest.mark.parametrize("m,tmax", SLOW)
def test_table7_large(tpch, m, tmax):
    assert len(build_dag(tpch, m, tmax).roots) == TABLE7[m][tmax - 2]


def check_definition(cn: CandidateNetwork, schema: Schema, m: int, tmax: int) -> None:
    """Every condition of docs/results.md, Rule-3 and the canonical child order."""
    full = (1 << m) - 1
    union = 0
    count = 0
    held: dict[int, list[str]] = {}
    stack = [(cn.root, None)]
    while stack:
        node, up = stack.pop()
        count += 1
        assert node.mask & union == 0, "keyword sets must be disjoint"
        union |= node.mask
        degree = len(node.children) + (up is not None)
        if cn.size > 1 and degree == 1:
            assert node.mask, "a leaf must hold a keyword"
        lows = [ch.node.union() & -ch.node.union() for ch in node.children]
        assert lows == sorted(lows)
        for ch in node.children:
            holder, target = (node, ch.node) if ch.parent_holds else (ch.node, node)
            fk = next(f for f in schema.relations[holder.relation].foreign_keys if f.name == ch.fk)
            assert fk.target == target.relation
            held.setdefault(id(holder), []).append(ch.fk)
            stack.append((ch.node, node))
    assert union == full and count == cn.size <= tmax
    for fks in held.values():
        assert len(fks) == len(set(fks)), "Rule-3: a node holds one foreign key towards two neighbours"


@pytest.mark.parametrize("m,tmax", [(2, 5), (3, 4), (4, 3)])
def test_cns_satisfy_definition_tpch(tpch, m, tmax):
    cns = generate_cns(tpch, m, tmax)
    assert len({c.code for c in cns}) == len(cns)
    for cn in cns:
        check_definition(cn, tpch, m, tmax)


def test_rule3_prunes_two_holds_of_one_fk(ecommerce):
    codes = {c.code for c in generate_cns(ecommerce, 2, 3)}
    # Order{} holds cid once: Customer{dress} <-cid- Order{} -cid-> Customer{texas} is not a CN
    assert not any(code.startswith("Order{0}[>cid:Customer{1},>cid:") for code in codes)
    # but a Customer may be referenced by two Orders through cid
    assert "Customer{0}[<cid:Order{1},<cid:Order{2}]" in codes
    # parallel foreign keys Group.pid and Group.sid both lead to Product
    assert "Group{0}[>pid:Product{1},>sid:Product{2}]" in codes
    assert "Group{0}[>sid:Product{1},>pid:Product{2}]" in codes


@pytest.mark.parametrize("m,tmax", [(1, 4), (2, 3), (2, 5), (3, 4), (3, 5), (4, 3)])
def test_initcngen_agrees_ecommerce(ecommerce, m, tmax):
    nt = [c.code for c in generate_cns(ecommerce, m, tmax, "nt")]
    cn = [c.code for c in generate_cns(ecommerce, m, tmax, "initcngen")]
    assert len(set(nt)) == len(nt) and len(set(cn)) == len(cn)
    assert set(nt) == set(cn)


@pytest.mark.parametrize("m,tmax", [(2, 4), (3, 4), (2, 5)])
def test_initcngen_agrees_tpch(tpch, m, tmax):
    nt = [c.code for c in generate_cns(tpch, m, tmax, "nt")]
    cn = [c.code for c in generate_cns(tpch, m, tmax, "initcngen")]
    assert len(set(cn)) == len(cn) == len(nt) == TABLE7[m][tmax - 2]
    assert set(nt) == set(cn)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas(max_relations=3, max_fks=5), m=st.integers(1, 3), tmax=st.integers(1, 5))
def test_initcngen_agrees_random(schema, m, tmax):
    nt = [c.code for c in generate_cns(schema, m, tmax, "nt")]
    cn = [c.code for c in generate_cns(schema, m, tmax, "initcngen")]
    assert len(set(nt)) == len(nt)
    assert len(set(cn)) == len(cn)
    assert set(nt) == set(cn)
    for c in generate_cns(schema, m, tmax):
        check_definition(c, schema, m, tmax)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_brute_force_reference_random(data):
    schema = data.draw(schemas(max_relations=2, max_fks=3))
    m = data.draw(st.integers(1, 3))
    tmax = data.draw(st.integers(1, 4 if m <= 2 else 3))
    cns = generate_cns(schema, m, tmax)
    got = [cn_invariant(c) for c in cns]
    assert len(set(got)) == len(got), "duplicate CNs (isomorphic)"
    assert set(got) == reference_cns(schema, m, tmax)


def test_brute_force_reference_self_reference_and_parallel():
    schema = Schema.from_dict(
        {
            "name": "selfref",
            "relations": [
                {"name": "P", "key": "id", "attributes": {"id": "int", "t": "text"}},
                {
                    "name": "Q",
                    "key": "id",
                    "attributes": {"id": "int", "a": "int", "b": "int", "up": "int"},
                    "foreign_keys": [
                        {"name": "a", "column": "a", "references": "P"},
                        {"name": "b", "column": "b", "references": "P"},
                        {"name": "up", "column": "up", "references": "Q"},
                    ],
                },
            ],
        }
    )
    for m, tmax in [(2, 4), (3, 3)]:
        cns = generate_cns(schema, m, tmax)
        got = [cn_invariant(c) for c in cns]
        assert len(set(got)) == len(got)
        assert set(got) == reference_cns(schema, m, tmax)
    codes = {c.code for c in generate_cns(schema, 2, 2)}
    # a self-reference joins two Q nodes either way round: two different CNs
    assert {"Q{1}[>up:Q{2}]", "Q{1}[<up:Q{2}]"} <= codes


def test_unknown_algorithm(ecommerce):
    with pytest.raises(ValueError):
        generate_cns(ecommerce, 2, 3, "dp")
