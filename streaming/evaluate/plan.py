"""A CN lattice compiled into flat per-node tables for the evaluators.

Node ``v`` of the lattice stands for the sub-relation ``R{K'}`` joined with
its children. The tables resolve, once, every edge to the column that holds
its foreign key, and index each node's parents by *how* a tuple joins it
(``(relation, mask, parent_holds, fk)``), so an evaluator going up from a
child tuple finds the parent nodes that can use a neighbour with one lookup.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..schema import Schema

__all__ = ["LatticePlan"]


class LatticePlan:
    """Flat view of a :class:`streaming.lattice.Lattice` for one schema.

    * ``kids[v]``: ``(child, parent_holds, fk, column)`` per edge, in lattice order;
      ``column`` is the FK column in the holder (the parent if ``parent_holds``).
    * ``ups[c]``: ``(parent, edge index, parent_holds, fk, column)`` for every
      edge that has ``c`` as its child.
    * ``up_joins[c][(relation, parent_holds, fk)] = (column, by_mask)``: the edges
      of ``ups[c]`` grouped by how a parent tuple joins a tuple of ``c``;
      ``by_mask[mask]`` lists their ``(parent, edge index)`` whose parent is
      labelled ``relation{mask}``. Going up from a tuple costs one lookup of
      parent tuples per group, then one dict lookup per parent tuple.
    * ``leaves[(relation, mask)]``: nodes without children (filled directly).
    * ``indexed_fks[c]``: FKs held by ``c``'s tuples that some parent joins on
      (``parent_holds`` false), for which the evaluator keeps a value index.
    * ``inner_labels``: labels ``(relation, mask)`` of nodes with children.
    * ``order``: node ids, children before parents.

    Masks are the lattice's (bit ``i`` = keyword ``i`` of the query) unless
    ``bits`` is given: then keyword ``i`` is bit ``bits[i]`` of a wider
    vocabulary (a stream's, shared by several keyword sets), every mask in
    the tables is in that space, and an evaluator reads a tuple's label as
    ``tuple mask & keyword_bits``.
    """

    def __init__(self, lattice: Any, schema: Schema, bits: Sequence[int] | None = None):
        self.lattice = lattice
        self.schema = schema
        nodes = lattice.nodes
        n = len(nodes)
        self.size = n
        self.rel = [nd.relation for nd in nodes]
        self.mask = [nd.mask if bits is None else _spread(nd.mask, bits) for nd in nodes]
        self.keyword_bits = 0  # the roots hold every keyword
        for mask in self.mask:
            self.keyword_bits |= mask
        self.is_root = [bool(nd.is_root) for nd in nodes]
        self.node_size = [nd.size for nd in nodes]
        self.kids: list[tuple[tuple[int, bool, str, str], ...]] = []
        self.ups: list[list[tuple[int, int, bool, str, str]]] = [[] for _ in range(n)]
        self.up_joins: list[dict[tuple[str, bool, str], tuple[str, dict[int, list[tuple[int, int]]]]]] = [
            {} for _ in range(n)
        ]
        self.indexed_fks: list[set[str]] = [set() for _ in range(n)]
        self.leaves: dict[tuple[str, int], list[int]] = {}
        for v, nd in enumerate(nodes):
            kids = []
            for ei, edge in enumerate(nd.children):
                c = edge.child
                holder = nd.relation if edge.parent_holds else nodes[c].relation
                column = self._column(holder, edge.fk)
                kids.append((c, edge.parent_holds, edge.fk, column))
                self.ups[c].append((v, ei, edge.parent_holds, edge.fk, column))
                group = self.up_joins[c].setdefault((nd.relation, edge.parent_holds, edge.fk), (column, {}))
                group[1].setdefault(self.mask[v], []).append((v, ei))
                if not edge.parent_holds:
                    self.indexed_fks[c].add(edge.fk)
            self.kids.append(tuple(kids))
            if not kids:
                self.leaves.setdefault((nd.relation, self.mask[v]), []).append(v)
        self.inner_labels = {(self.rel[v], self.mask[v]) for v in range(n) if self.kids[v]}
        self.order = sorted(range(n), key=lambda v: self.node_size[v])
        self.roots = [v for v in range(n) if self.is_root[v]]
        # Joins a tuple of a relation can take part in, seen from that tuple:
        # FKs it holds (it is the holder) and FKs of others that reference it.
        self.out_fks: dict[str, tuple[tuple[str, str, str], ...]] = {
            name: tuple((fk.name, fk.column, fk.target) for fk in rel.foreign_keys)
            for name, rel in schema.relations.items()
        }
        self.fk_column_of: dict[str, dict[str, str]] = {
            name: {fk.name: fk.column for fk in rel.foreign_keys} for name, rel in schema.relations.items()
        }
        self.in_fks: dict[str, tuple[tuple[str, str], ...]] = {
            name: tuple((fk.holder, fk.name) for fk in schema.foreign_keys if fk.target == name)
            for name in schema.relations
        }

    def _column(self, holder: str, fk: str) -> str:
        for candidate in self.schema.relations[holder].foreign_keys:
            if candidate.name == fk:
                return candidate.column
        raise ValueError(f"lattice edge uses foreign key {fk!r} that {holder} does not hold")

    def label(self, v: int) -> str:
        return f"{self.rel[v]}{{{self.mask[v]}}}"


def _spread(mask: int, bits: Sequence[int]) -> int:
    """Move bit ``i`` of ``mask`` to bit ``bits[i]``."""
    out = 0
    for i, b in enumerate(bits):
        if mask >> i & 1:
            out |= 1 << b
    return out
