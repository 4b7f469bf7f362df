"""Candidate networks: rooted trees of sub-relations ``R{K'}`` joined by foreign keys.

A CN is an unrooted tree; we keep it rooted at its *centre* (docs/results.md, paper
Sect. 5.1) so that equal CNs have equal rooted forms:

* one centre: that node is the root;
* two centres (joined by an edge): the root is the centre on whose side of
  the central edge keyword 0 lies (the two sides have disjoint, non-empty
  keyword sets, so exactly one side holds keyword 0).

Children are ordered by the lowest keyword of their subtree's keyword union.
Sibling subtrees have disjoint, non-empty unions, so this order is total and
depends only on the tree, which makes the pre-order :func:`node_code` a canonical code: two
CNs are isomorphic (relations, keyword sets, foreign keys and which side holds
each one preserved) iff their codes are equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

__all__ = [
    "CNNode",
    "CNChild",
    "CandidateNetwork",
    "node_code",
    "escape",
    "edge_code",
    "tree_centres",
    "canonical_cn",
]

_SPECIAL = set("\\{}[],:<>")


def escape(name: str) -> str:
    """Backslash-escape the characters a code uses as punctuation."""
    if not _SPECIAL.intersection(name):
        return name
    return "".join("\\" + c if c in _SPECIAL else c for c in name)


def edge_code(fk: str, parent_holds: bool) -> str:
    """``>fk`` when the parent holds ``fk`` (parent -> child), ``<fk`` when the child does."""
    return (">" if parent_holds else "<") + escape(fk)


@dataclass(frozen=True, slots=True)
class CNNode:
    """One node ``relation{mask}`` of a rooted CN with its ordered children."""

    relation: str
    mask: int
    children: tuple["CNChild", ...] = ()

    def union(self) -> int:
        """Keyword union of the subtree rooted here."""
        out = self.mask
        for ch in self.children:
            out |= ch.node.union()
        return out

    def size(self) -> int:
        return 1 + sum(ch.node.size() for ch in self.children)


@dataclass(frozen=True, slots=True)
class CNChild:
    """An edge to a child: ``parent_holds`` tells which side holds ``fk``."""

    fk: str
    parent_holds: bool
    node: CNNode


def node_code(node: CNNode) -> str:
    """Canonical pre-order code of a rooted subtree, e.g. ``Order{0}[<cid:Customer{1},>pid:Product{2}]``.

    ``[...]`` lists the children in their order; ``>fk:`` means the parent
    holds ``fk`` referencing the child, ``<fk:`` the reverse.
    """
    head = f"{escape(node.relation)}{{{node.mask}}}"
    if not node.children:
        return head
    inner = ",".join(f"{edge_code(ch.fk, ch.parent_holds)}:{node_code(ch.node)}" for ch in node.children)
    return f"{head}[{inner}]"


@dataclass(frozen=True, slots=True, eq=False)
class CandidateNetwork:
    """A CN rooted at its centre; ``code`` identifies it up to isomorphism (equality and hash use it)."""

    root: CNNode
    size: int
    code: str

    @classmethod
    def of(cls, root: CNNode) -> "CandidateNetwork":
        return cls(root, root.size(), node_code(root))

    def __hash__(self) -> int:
        return hash(self.code)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CandidateNetwork) and other.code == self.code

    def nodes(self) -> Iterator[CNNode]:
        """Nodes in pre-order."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(ch.node for ch in reversed(node.children))

    def edges(self) -> Iterator[tuple[CNNode, CNNode, str, bool]]:
        """``(parent, child, fk, parent_holds)`` in pre-order."""
        for node in self.nodes():
            for ch in node.children:
                yield node, ch.node, ch.fk, ch.parent_holds

    def describe(self, keywords: Sequence[str] | None = None) -> str:
        """Readable one-line form, e.g. ``Order{}( -cid-> Customer{texas}, -pid-> Product{dress} )``."""

        def label(node: CNNode) -> str:
            bits = [i for i in range(node.mask.bit_length()) if node.mask >> i & 1]
            names = [keywords[i] if keywords is not None else f"k{i + 1}" for i in bits]
            return f"{node.relation}{{{','.join(names)}}}"

        def walk(node: CNNode) -> str:
            if not node.children:
                return label(node)
            parts = []
            for ch in node.children:
                arrow = f"-{ch.fk}->" if ch.parent_holds else f"<-{ch.fk}-"
                parts.append(f"{arrow} {walk(ch.node)}")
            return f"{label(node)}( {', '.join(parts)} )"

        return walk(self.root)


def tree_centres(adjacency: Sequence[Sequence[int]]) -> list[int]:
    """The one or two centres of a tree given as adjacency lists (leaf peeling)."""
    n = len(adjacency)
    if n <= 2:
        return list(range(n))
    degree = [len(a) for a in adjacency]
    layer = [v for v in range(n) if degree[v] <= 1]
    remaining = n
    while remaining > 2:
        remaining -= len(layer)
        nxt = []
        for v in layer:
            for w in adjacency[v]:
                degree[w] -= 1
                if degree[w] == 1:
                    nxt.append(w)
        layer = nxt
    return sorted(layer)


def canonical_cn(
    relations: Sequence[str],
    masks: Sequence[int],
    edges: Sequence[tuple[int, int, str]],
) -> CandidateNetwork:
    """Root an unrooted labelled tree canonically and return it as a CN.

    ``relations[v]`` and ``masks[v]`` label node ``v``; each edge is
    ``(holder, referenced, fk)``. Used to normalise trees built any other way
    (the baseline generator, brute force) into the form InitNTGen emits.
    """
    n = len(relations)
    adjacency: list[list[int]] = [[] for _ in range(n)]
    incident: list[list[tuple[int, str, bool]]] = [[] for _ in range(n)]
    for holder, ref, fk in edges:
        if holder == ref:
            raise ValueError("not a tree: an edge joins a node to itself")
        adjacency[holder].append(ref)
        adjacency[ref].append(holder)
        incident[holder].append((ref, fk, True))
        incident[ref].append((holder, fk, False))
    if len(edges) != n - 1:
        raise ValueError("not a tree: expected n - 1 edges")
    centres = tree_centres(adjacency)
    root = centres[0]
    if len(centres) == 2:
        a, b = centres
        side_a = _side_union(a, b, adjacency, masks)
        root = a if side_a & 1 else b

    def build(v: int, parent: int) -> tuple[CNNode, int]:
        kids = []
        union = masks[v]
        for w, fk, v_holds in incident[v]:
            if w == parent:
                continue
            child, cu = build(w, v)
            union |= cu
            kids.append((cu, CNChild(fk, v_holds, child)))
        kids.sort(key=lambda t: t[0] & -t[0])
        return CNNode(relations[v], masks[v], tuple(k for _, k in kids)), union

    node, _ = build(root, -1)
    if sum(1 for _ in _iter_nodes(node)) != n:
        raise ValueError("not a tree: disconnected")
    return CandidateNetwork.of(node)


def _iter_nodes(node: CNNode) -> Iterator[CNNode]:
    yield node
    for ch in node.children:
        yield from _iter_nodes(ch.node)


def _side_union(a: int, b: int, adjacency: Sequence[Sequence[int]], masks: Sequence[int]) -> int:
    """Keyword union of the component of ``a`` once edge ``a-b`` is removed."""
    seen = {a, b}
    stack = [a]
    union = 0
    while stack:
        v = stack.pop()
        union |= masks[v]
        for w in adjacency[v]:
            if w not in seen:
                seen.add(w)
                stack.append(w)
    return union
