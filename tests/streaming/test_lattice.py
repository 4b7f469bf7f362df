"""The CN lattice: every CN rebuilt from its root node, shared subtrees stored once."""

from __future__ import annotations

import json

import pytest

from streaming.cn import generate_cns
from streaming.cn.model import CandidateNetwork, CNChild, CNNode
from streaming.lattice import Lattice
from streaming.schema import load_schema
from streaming.workloads.tpch_schema import tpch_schema

from tests.examples import ECOMMERCE


def rebuild(lattice: Lattice, i: int) -> CNNode:
    node = lattice.nodes[i]
    return CNNode(
        node.relation,
        node.mask,
        tuple(CNChild(e.fk, e.parent_holds, rebuild(lattice, e.child)) for e in node.children),
    )


@pytest.fixture(scope="module", params=[("ecommerce", 3, 4), ("tpch", 2, 5), ("tpch", 3, 4)])
def case(request):
    name, m, tmax = request.param
    schema = load_schema(ECOMMERCE) if name == "ecommerce" else tpch_schema()
    return schema, m, tmax, generate_cns(schema, m, tmax)


def test_every_cn_rebuilds_from_its_root(case):
    schema, m, tmax, cns = case
    lattice = Lattice.build(schema, m, tmax)
    rebuilt = {CandidateNetwork.of(rebuild(lattice, r)).code for r in lattice.roots}
    assert rebuilt == {c.code for c in cns}
    assert len(lattice.roots) == len(cns)
    for r in lattice.roots:
        assert lattice.nodes[r].is_root and lattice.nodes[r].code == CandidateNetwork.of(rebuild(lattice, r)).code


def test_shared_subtrees_stored_once(case):
    schema, m, tmax, cns = case
    lattice = Lattice.build(schema, m, tmax)
    codes = [n.code for n in lattice.nodes]
    assert len(set(codes)) == len(codes)
    # exactly the distinct rooted subtrees of the CNs
    subtrees = set()
    for cn in cns:
        for node in cn.nodes():
            subtrees.add(CandidateNetwork.of(node).code)
    assert set(codes) == subtrees
    counts = lattice.counts()
    assert counts["nodes"] == len(subtrees) < counts["unshared_nodes"] == sum(c.size for c in cns)
    assert counts["roots"] == len(cns)
    assert sum(counts["cns_by_size"].values()) == len(cns)


def test_build_and_from_cns_agree(case):
    schema, m, tmax, cns = case
    built = Lattice.build(schema, m, tmax)
    inserted = Lattice.from_cns(cns)
    assert set(built.codes()) == set(inserted.codes())
    assert {built.codes()[r] for r in built.roots} == {inserted.codes()[r] for r in inserted.roots}
    assert built.counts() == inserted.counts()


def test_ids_topological_parents_and_labels(case):
    schema, m, tmax, _ = case
    lattice = Lattice.build(schema, m, tmax)
    nodes = lattice.nodes
    edges = 0
    for node in nodes:
        assert node.size == 1 + sum(nodes[e.child].size for e in node.children)
        for j, e in enumerate(node.children):
            assert e.child < node.id
            assert (node.id, j) in nodes[e.child].parents
            edges += 1
        for p, j in node.parents:
            assert nodes[p].children[j].child == node.id
        assert node.is_root == (node.id in lattice.roots)
        assert node.id in lattice.by_label(node.relation, node.mask)
        assert lattice.relation_of(node.id) == node.relation and lattice.mask_of(node.id) == node.mask
        assert lattice.children_of(node.id) == node.children
    assert edges == lattice.counts()["edges"]
    assert list(lattice.roots) == [n.id for n in nodes if n.is_root]
    assert all(not nodes[r].parents for r in lattice.roots)
    assert lattice.by_label("nope", 1) == []


def test_only_used_subtrees_are_kept():
    """A sub-CN that no whole CN uses is not a lattice node (every non-root has a parent)."""
    for schema, m, tmax in [(load_schema(ECOMMERCE), 3, 5), (tpch_schema(), 3, 5)]:
        lattice = Lattice.build(schema, m, tmax)
        assert all(n.parents or n.is_root for n in lattice.nodes)


def test_dumps():
    lattice = Lattice.build(load_schema(ECOMMERCE), 2, 3)
    doc = json.loads(json.dumps(lattice.to_json()))
    assert len(doc["nodes"]) == len(lattice) and doc["counts"]["roots"] == 26
    assert len(doc["edges"]) == doc["counts"]["edges"]
    text = lattice.dump_text().splitlines()
    assert len(text) == len(lattice)
    for i, line in enumerate(text):
        node = lattice.nodes[i]
        assert line.startswith(f"#{i} {node.relation}{{{node.mask}}} size={node.size}")
        assert (" root" in line) == node.is_root
        assert line.count(":#") == len(node.children)
