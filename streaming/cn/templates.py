"""Network templates (NTs): the CNs of the one-relation schema G1 (paper Sect. 4.1, 5.1).

An NT is an unrooted tree whose nodes carry pairwise disjoint keyword sets
(bitmasks) with union ``K`` and a non-empty set on every leaf, with at most
``tmax`` nodes; its edges are unlabelled and undirected (G1 has one relation
and one edge, and an NT counts every shape a CN may take, Table 1).

InitNTGen enumerates them once each, already rooted at their centre (see
:mod:`streaming.cn.model` for the rooting and child order). Rather than
growing trees node by node on the rightmost path and testing isomorphism, it
builds them bottom-up from *hanging subtrees* (a subtree below some parent)
grouped by keyword union and size, and assembles each tree from an exact
cover of the keywords by its root's children. Subtrees are shared objects:
one hanging subtree appears in many NTs, which is what NT2CN's dynamic
program and the lattice exploit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["NTNode", "NTForest", "generate_nts", "templates", "count_nts"]


@dataclass(eq=False, slots=True)
class NTNode:
    """A rooted NT subtree: keyword ``mask`` at the root, children in canonical order."""

    id: int
    mask: int
    children: tuple["NTNode", ...]
    union: int
    size: int
    height: int

    def code(self) -> str:
        """Pre-order code, e.g. ``0[1,2]`` (masks in decimal)."""
        if not self.children:
            return str(self.mask)
        return f"{self.mask}[{','.join(c.code() for c in self.children)}]"


@dataclass(slots=True)
class NTForest:
    """Every NT for ``(m, tmax)``; ``nodes`` lists each shared subtree once, children first."""

    m: int
    tmax: int
    roots: list[NTNode]
    nodes: list[NTNode] = field(repr=False)


def _submasks(mask: int):
    """All submasks of ``mask`` including 0 and ``mask``."""
    sub = mask
    while True:
        yield sub
        if sub == 0:
            return
        sub = (sub - 1) & mask


def generate_nts(m: int, tmax: int) -> NTForest:
    """All NTs with ``m`` keywords and at most ``tmax`` nodes, each rooted at its centre."""
    if m < 1:
        raise ValueError("m must be at least 1")
    if tmax < 1:
        raise ValueError("tmax must be at least 1")
    full = (1 << m) - 1
    nodes: list[NTNode] = []
    # hanging[u][s]: subtrees (below a parent) with keyword union u and s nodes.
    # A subtree of height h inside an NT of <= tmax nodes centred at its root
    # has at most tmax - h - 1 nodes (the other side of the centre is at least
    # as deep); this bound is hereditary, so larger ones are never built.
    hanging: list[list[list[NTNode]]] = [[[] for _ in range(tmax)] for _ in range(full + 1)]
    covers_memo: dict[tuple[int, int], list[tuple[NTNode, ...]]] = {}

    def new_node(mask: int, children: tuple[NTNode, ...]) -> NTNode:
        union, size, height = mask, 1, 0
        for c in children:
            union |= c.union
            size += c.size
            if c.height + 1 > height:
                height = c.height + 1
        node = NTNode(len(nodes), mask, children, union, size, height)
        nodes.append(node)
        return node

    def covers(rest: int, budget: int) -> list[tuple[NTNode, ...]]:
        """Tuples of hanging subtrees with disjoint unions covering ``rest`` exactly, ``budget`` nodes in all.

        The first subtree holds the lowest keyword of ``rest``, so the tuple is
        in canonical child order and each set of children comes out once.
        Memoised: the same remainders recur across subtrees and templates.
        """
        key = (rest, budget)
        hit = covers_memo.get(key)
        if hit is None:
            hit = list(iter_covers(rest, budget))
            covers_memo[key] = hit
        return hit

    def iter_covers(rest: int, budget: int):
        if rest == 0:
            if budget == 0:
                yield ()
            return
        low = rest & -rest
        for sub in _submasks(rest ^ low):
            u = sub | low
            for t in range(1, budget + 1):
                subtrees = hanging[u][t]
                if not subtrees:
                    continue
                tails = covers(rest ^ u, budget - t)
                for child in subtrees:
                    for tail in tails:
                        yield (child,) + tail

    # a hanging subtree never holds every keyword (the rest of the tree holds a keyword too)
    for size in range(1, tmax):
        for u in range(1, full):
            bucket = hanging[u][size]
            if size == 1:
                bucket.append(new_node(u, ()))
                continue
            for r in _submasks(u):
                if r == u:
                    continue
                for children in covers(u ^ r, size - 1):
                    height = 1 + max(c.height for c in children)
                    if size <= tmax - height - 1:
                        bucket.append(new_node(r, children))

    roots: list[NTNode] = [new_node(full, ())]
    for size in range(2, tmax + 1):
        for r in _submasks(full):
            if r == full:
                continue
            # the whole tree's covers are used once: not memoised
            for children in iter_covers(full ^ r, size - 1):
                if _centred(r, children, full):
                    roots.append(new_node(r, children))
    used = _reachable(roots)
    return NTForest(m, tmax, roots, [n for n in nodes if n.id in used])


@lru_cache(maxsize=64)
def templates(m: int, tmax: int) -> NTForest:
    """:func:`generate_nts`, computed once per ``(m, tmax)``: templates do not depend on the schema.

    The forest is shared between callers and must not be modified.
    """
    return generate_nts(m, tmax)


def _centred(mask: int, children: tuple[NTNode, ...], full: int) -> bool:
    """True if a root with these children is the canonical root (a centre) of the tree."""
    if len(children) == 1:
        # the root is a leaf: a centre only of a two-node tree, and then the
        # chosen one only if it holds keyword 0
        return mask != 0 and children[0].height == 0 and bool(mask & 1)
    heights = sorted((c.height for c in children), reverse=True)
    if heights[0] == heights[1]:
        return True
    if heights[0] == heights[1] + 1:
        deep = next(c for c in children if c.height == heights[0])
        return bool((full ^ deep.union) & 1)
    return False


def _reachable(roots: list[NTNode]) -> set[int]:
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node.id in seen:
            continue
        seen.add(node.id)
        stack.extend(node.children)
    return seen


def count_nts(m: int, tmax: int) -> int:
    """Number of NTs (paper Table 1)."""
    return len(generate_nts(m, tmax).roots)
