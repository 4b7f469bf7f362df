"""An independent CN enumerator for tests: every labelled tree, deduplicated by brute force.

It shares no code with :mod:`streaming.cn`: trees come from Pruefer sequences,
labels from plain cartesian products, and isomorphism classes from the
minimum over all rootings of a sorted-children string (AHU). Only for tiny
schemas and bounds.
"""

from __future__ import annotations

import itertools
from typing import Iterable, Sequence

from streaming.cn.model import CandidateNetwork
from streaming.schema import Schema


def tree_shapes(n: int) -> list[list[tuple[int, int]]]:
    """One edge list per unlabelled tree shape on ``n`` nodes."""
    if n == 1:
        return [[]]
    if n == 2:
        return [[(0, 1)]]
    shapes: dict[str, list[tuple[int, int]]] = {}
    for seq in itertools.product(range(n), repeat=n - 2):
        degree = [1] * n
        for x in seq:
            degree[x] += 1
        edges = []
        for x in seq:
            leaf = min(i for i in range(n) if degree[i] == 1)
            edges.append((leaf, x))
            degree[leaf] -= 1
            degree[x] -= 1
        a, b = [i for i in range(n) if degree[i] == 1]
        edges.append((a, b))
        shapes.setdefault(invariant(["x"] * n, [(u, v, "") for u, v in edges], directed=False), edges)
    return list(shapes.values())


def invariant(labels: Sequence[str], edges: Sequence[tuple[int, int, str]], directed: bool = True) -> str:
    """Isomorphism invariant of a node- and edge-labelled tree; edges are ``(holder, referenced, fk)``.

    With ``directed`` false the edges are undirected and unlabelled.
    """
    n = len(labels)
    adjacency: list[list[tuple[int, str]]] = [[] for _ in range(n)]
    for holder, ref, fk in edges:
        adjacency[holder].append((ref, f"out:{fk}" if directed else ""))
        adjacency[ref].append((holder, f"in:{fk}" if directed else ""))

    def code(v: int, parent: int) -> str:
        parts = sorted(f"{lab}/{code(w, v)}" for w, lab in adjacency[v] if w != parent)
        return f"({labels[v]}" + "".join(parts) + ")"

    return min(code(r, -1) for r in range(n))


def reference_cns(schema: Schema, m: int, tmax: int) -> set[str]:
    """Invariants of every CN (docs/results.md) of an ``m``-keyword query."""
    rels = list(schema.relations)
    fks = schema.foreign_keys
    out: set[str] = set()
    for n in range(1, tmax + 1):
        for shape in tree_shapes(n):
            degree = [0] * n
            for a, b in shape:
                degree[a] += 1
                degree[b] += 1
            for owner in itertools.product(range(n), repeat=m):
                masks = [0] * n
                for k, v in enumerate(owner):
                    masks[v] |= 1 << k
                if n > 1 and any(degree[v] == 1 and masks[v] == 0 for v in range(n)):
                    continue
                for assign in itertools.product(rels, repeat=n):
                    options = []
                    for a, b in shape:
                        opts = [(a, b, fk.name) for fk in fks if fk.holder == assign[a] and fk.target == assign[b]]
                        opts += [(b, a, fk.name) for fk in fks if fk.holder == assign[b] and fk.target == assign[a]]
                        options.append(opts)
                    for edges in itertools.product(*options):
                        if not rule3(edges):
                            continue
                        labels = [f"{assign[v]}#{masks[v]}" for v in range(n)]
                        out.add(invariant(labels, list(edges)))
    return out


def rule3(edges: Iterable[tuple[int, int, str]]) -> bool:
    """No node holds the same foreign key towards two neighbours."""
    held = set()
    for holder, _, fk in edges:
        if (holder, fk) in held:
            return False
        held.add((holder, fk))
    return True


def cn_invariant(cn: CandidateNetwork) -> str:
    """The same invariant for a generated CN."""
    labels: list[str] = []
    edges: list[tuple[int, int, str]] = []

    def walk(node) -> int:
        v = len(labels)
        labels.append(f"{node.relation}#{node.mask}")
        for ch in node.children:
            w = walk(ch.node)
            edges.append((v, w, ch.fk) if ch.parent_holds else (w, v, ch.fk))
        return v

    walk(cn.root)
    return invariant(labels, edges)
