"""Canonical rooting and codes of CNs."""

from __future__ import annotations

import random

import pytest

from streaming.cn import generate_cns
from streaming.cn.model import CandidateNetwork, CNChild, CNNode, canonical_cn, escape, node_code, tree_centres
from streaming.schema import load_schema

from tests.examples import ECOMMERCE


def flatten(cn: CandidateNetwork):
    relations, masks, edges = [], [], []

    def walk(node: CNNode) -> int:
        v = len(relations)
        relations.append(node.relation)
        masks.append(node.mask)
        for ch in node.children:
            w = walk(ch.node)
            edges.append((v, w, ch.fk) if ch.parent_holds else (w, v, ch.fk))
        return v

    walk(cn.root)
    return relations, masks, edges


@pytest.mark.parametrize("m,tmax", [(2, 5), (3, 4)])
def test_canonical_form_ignores_node_numbering(m, tmax):
    """Renumbering a CN's nodes and shuffling its edges gives back the same rooted CN."""
    rng = random.Random(7)
    for cn in generate_cns(load_schema(ECOMMERCE), m, tmax):
        relations, masks, edges = flatten(cn)
        perm = list(range(len(relations)))
        rng.shuffle(perm)
        inv = {old: new for new, old in enumerate(perm)}
        rel2 = [relations[old] for old in perm]
        mask2 = [masks[old] for old in perm]
        edges2 = [(inv[h], inv[r], fk) for h, r, fk in edges]
        rng.shuffle(edges2)
        again = canonical_cn(rel2, mask2, edges2)
        assert again.code == cn.code
        assert again.root == cn.root


def test_bicentral_root_is_on_keyword_0_side():
    # A{2} - B{0} - C{0} - D{1}: centres B and C; keyword 0 (mask 1) is on C's side
    cn = canonical_cn(["A", "B", "C", "D"], [2, 0, 0, 1], [(1, 0, "x"), (1, 2, "y"), (3, 2, "z")])
    assert cn.root.relation == "C"
    assert cn.code == "C{0}[<z:D{1},<y:B{0}[>x:A{2}]]"


def test_centres():
    assert tree_centres([[1], [0, 2], [1]]) == [1]
    assert tree_centres([[1], [0, 2], [1, 3], [2]]) == [1, 2]
    assert tree_centres([[]]) == [0]


def test_code_escapes_punctuation():
    node = CNNode("a{b}", 1, (CNChild("f:g", True, CNNode("c,d", 2)),))
    assert node_code(node) == "a\\{b\\}{1}[>f\\:g:c\\,d{2}]"
    assert escape("plain") == "plain"


def test_describe_and_not_a_tree():
    cn = canonical_cn(["Order", "Customer"], [1, 2], [(0, 1, "cid")])
    assert cn.describe(["dress", "texas"]) == "Order{dress}( -cid-> Customer{texas} )"
    assert [e[2] for e in cn.edges()] == ["cid"]
    with pytest.raises(ValueError):
        canonical_cn(["A", "B", "C"], [1, 0, 2], [(0, 1, "x")])
    with pytest.raises(ValueError):
        canonical_cn(["A", "B"], [1, 2], [(0, 0, "x")])
