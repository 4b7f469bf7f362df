"""InitCNGen (Markowetz et al., paper Sect. 3.1, Alg. 1): CN generation on the expanded graph.

The expanded schema graph G_X has a node ``R{K'}`` for every relation ``R``
and keyword subset ``K'`` (node id ``relation index * 2^m + mask``); its
edges are the schema's foreign keys, each usable in its direction. For every
G_X node holding keyword 0 (each CN has exactly one, so it is the CN's root
here, and it leaves G_X after its turn), CNGen grows trees breadth-first,
one node at a time. As Alg. 1 is written, every G_X node ``u`` is tried
against every tree node ``u'`` and every schema edge between them; ``u`` may be added as a child of ``u'``
("legally") when

1. ``u'`` is on the rightmost root-to-leaf path;
2. ``(fk edge, u)`` is no less than the last child of ``u'``;
3. once the tree holds every keyword, every node's child subtrees are in
   non-decreasing canonical-code order.

The new tree ``C`` is then output if it is a CN, or queued if it has the
potential to become one: fewer than ``tmax`` nodes, pairwise disjoint keyword
sets, every leaf that left the rightmost path non-empty, and Rule-3 (a node
holds each foreign key towards at most one neighbour). A tree holding every
keyword cannot grow (a new leaf would be empty). This is the reference the
template-based generator is measured against; its cost is the
``|V| * 2^m`` candidates tried against the tree at every step.
``eager_keyword_test=True`` drops a candidate ``u`` whose keywords overlap the
tree's before trying it against the tree nodes, an optimisation that is not
in Alg. 1 (the benchmark reports both).
"""

from __future__ import annotations

from collections import deque

from ..schema import Schema
from .model import CandidateNetwork, canonical_cn
from .nt2cn import SchemaEdges

__all__ = ["init_cn_gen", "cn_gen_trees"]


def init_cn_gen(schema: Schema, m: int, tmax: int) -> list[CandidateNetwork]:
    """All CNs by InitCNGen, each converted to the canonical centre-rooted form."""
    graph = SchemaEdges(schema)
    return [_to_cn(graph, tree, 1 << m) for tree in cn_gen_trees(schema, m, tmax)]


def cn_gen_trees(
    schema: Schema, m: int, tmax: int, eager_keyword_test: bool = False
) -> list[tuple[tuple[int, int, int, int, bool], ...]]:
    """InitCNGen's own output: each CN as its pre-order node tuple, rooted at its keyword-0 node.

    A node is ``(parent index, edge label, G_X node id, fk index, parent_holds)``
    (``-1`` for the root's parent, label and fk).
    """
    if m < 1 or tmax < 1:
        raise ValueError("m and tmax must be at least 1")
    graph = SchemaEdges(schema)
    nrel = len(graph.relations)
    full = (1 << m) - 1
    width = 1 << m
    # between[r][s]: (label, fk, r_holds) for each schema edge joining a node of r to a child of s
    between: list[list[list[tuple[int, int, bool]]]] = [[[] for _ in range(nrel)] for _ in range(nrel)]
    for r in range(nrel):
        for label, other, f, holds in graph.incidences[r]:
            between[r][other].append((label, f, holds))
    gx_nodes = [(r, mask) for r in range(nrel) for mask in range(width)]
    # G_X as InitCNGen shrinks it: each start node is removed with its CNGen
    remaining = list(enumerate(gx_nodes))

    out: list[tuple[tuple[int, int, int, int, bool], ...]] = []
    for start_id, (_, mask0) in enumerate(gx_nodes):
        if not mask0 & 1:
            continue
        # removed from G_X now rather than after its CNGen: it holds keyword 0
        # like the root, so it cannot join its own trees anyway
        remaining = [entry for entry in remaining if entry[0] != start_id]
        # a tree: tuple of nodes (parent, label, gx id, fk, parent_holds) in pre-order
        first = ((-1, -1, start_id, -1, False),)
        if mask0 == full:
            out.append(first)
            continue
        queue = deque([(first, (0,), mask0)] if tmax > 1 else [])
        while queue:
            tree, rpath, union = queue.popleft()
            for u_id, (ur, umask) in remaining:
                if eager_keyword_test and umask & union:
                    continue
                for up in range(len(tree)):
                    upr = gx_nodes[tree[up][2]][0]
                    for label, f, up_holds in between[upr][ur]:
                        if not _legal(tree, rpath, up, label, u_id):
                            continue
                        new_tree = tree + ((up, label, u_id, f, up_holds),)
                        new_rpath = rpath[: rpath.index(up) + 1] + (len(tree),)
                        new_union = union | umask
                        if not _potential(new_tree, union, umask, up, gx_nodes):
                            continue
                        if new_union == full:
                            if umask and _canonical(new_tree):
                                out.append(new_tree)
                        elif len(new_tree) < tmax:
                            queue.append((new_tree, new_rpath, new_union))
    return out


def _legal(tree, rpath, up, label, u_id) -> bool:
    """Conditions (1) and (2) for adding ``u_id`` below ``up``."""
    # (1) on the rightmost path
    if up not in rpath:
        return False
    # (2) no less than the last child of ``up`` (siblings are in order already)
    for node in reversed(tree):
        if node[0] == up:
            return (label, u_id) >= (node[1], node[2])
    return True


def _potential(new_tree, union: int, umask: int, up: int, gx_nodes) -> bool:
    """Keyword sets disjoint, leaves off the rightmost path non-empty, Rule-3 at ``up``."""
    if umask & union:
        return False
    # the previous last node left the rightmost path unless ``up`` is it; it
    # is then a leaf for good and must hold a keyword
    last = len(new_tree) - 2
    if up != last and gx_nodes[new_tree[last][2]][1] == 0:
        return False
    _, _, _, f, up_holds = new_tree[-1]
    if up_holds:
        parent, _, _, pf, p_holds = new_tree[up]
        if parent >= 0 and not p_holds and pf == f:
            return False
        for n in new_tree[:-1]:
            if n[0] == up and n[4] and n[3] == f:
                return False
    return True


def _canonical(tree) -> bool:
    """Condition (3): every node's child subtrees in non-decreasing code order."""
    kids: list[list[int]] = [[] for _ in tree]
    for i, node in enumerate(tree):
        if node[0] >= 0:
            kids[node[0]].append(i)
    codes: list[tuple] = [()] * len(tree)
    for i in range(len(tree) - 1, -1, -1):
        child_codes = [codes[c] for c in kids[i]]
        if any(a > b for a, b in zip(child_codes, child_codes[1:])):
            return False
        codes[i] = (tree[i][1], tree[i][2], tuple(child_codes))
    return True


def _to_cn(graph: SchemaEdges, tree, width: int) -> CandidateNetwork:
    relations = [graph.relations[node[2] // width] for node in tree]
    masks = [node[2] % width for node in tree]
    edges = []
    for i, (parent, _, _, f, parent_holds) in enumerate(tree):
        if parent < 0:
            continue
        name = graph.fks[f].name
        edges.append((parent, i, name) if parent_holds else (i, parent, name))
    return canonical_cn(relations, masks, edges)
