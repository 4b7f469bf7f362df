"""The CN lattice (paper Sect. 5.2): every rooted sub-CN of every CN, stored once.

Node ``i`` is a rooted subtree ``R{K'}`` with its children; a subtree shared by
several CNs (or by several places in one CN) is one node with several parents.
The *roots* are the whole CNs; results are produced there.

Storage is compact (a :class:`~streaming.cn.nt2cn.CNDag`: nodes come in blocks
that share a label and edge labels and whose children range over a cartesian
product of id lists, so nothing is stored per node) because a large query has
over a million CNs; :attr:`Lattice.nodes` materialises :class:`LatticeNode`
objects with codes and parent lists on first access. Ids are topological:
children have smaller ids than their parents, and the roots are the last ids
(``roots`` is a ``range``).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from itertools import product
from typing import Any, Iterable, Iterator, Sequence

from .cn.model import CandidateNetwork, CNNode, edge_code, escape
from .cn.nt2cn import CNDag, Option, Record, build_dag, dag_codes
from .schema import Schema

__all__ = ["Lattice", "LatticeNode", "LatticeEdge"]


@dataclass(frozen=True, slots=True)
class LatticeEdge:
    """A join from a node to its child ``child`` through ``fk``; ``parent_holds`` as in :class:`CNChild`."""

    fk: str
    parent_holds: bool
    child: int


@dataclass(slots=True)
class LatticeNode:
    """One shared rooted sub-CN ``relation{mask}`` with ``size`` nodes."""

    id: int
    relation: str
    mask: int
    size: int
    code: str
    children: tuple[LatticeEdge, ...]
    parents: list[tuple[int, int]]
    is_root: bool


class Lattice:
    """The lattice of a CN set; build it with :meth:`build` or :meth:`from_cns`.

    >>> from streaming.schema import Schema
    >>> from streaming.workloads.ecommerce import SCHEMA_DOC
    >>> lattice = Lattice.build(Schema.from_dict(SCHEMA_DOC), 2, 3)
    >>> lattice.counts()["roots"], len(lattice)
    (26, 34)
    >>> lattice.nodes[lattice.roots[-1]].code
    'Group{0}[>sid:Product{1},>pid:Product{2}]'
    """

    def __init__(self, dag: CNDag):
        self._dag = dag
        self.relations = dag.relations
        self.labels = dag.labels
        self.roots: Sequence[int] = dag.roots
        self._nodes: list[LatticeNode] | None = None
        self._codes: list[str] | None = None
        self._labels_index: dict[tuple[str, int], list[int]] | None = None
        self._edge_rows: list[tuple[str, int, int, tuple[tuple[str, bool, int], ...]]] | None = None

    # -- construction ---------------------------------------------------
    @classmethod
    def build(cls, schema: Schema, m: int, tmax: int) -> "Lattice":
        """InitNTGen + NT2CN straight into the lattice (no CN objects; templates reused per ``(m, tmax)``)."""
        return cls(build_dag(schema, m, tmax))

    @classmethod
    def from_cns(cls, cns: Iterable[CandidateNetwork]) -> "Lattice":
        """Insert rooted CNs one by one, sharing subtrees found by canonical code."""
        cns = list(cns)
        relations: dict[str, int] = {}
        labels: dict[tuple[str, bool], int] = {}
        records: list[Record] = []
        sizes: list[int] = []
        by_code: dict[str, int] = {}

        def intern(node: CNNode) -> tuple[int, str]:
            kid_ids, kid_codes = [], []
            for ch in node.children:
                cid, ccode = intern(ch.node)
                kid_ids.append(cid)
                kid_codes.append(f"{edge_code(ch.fk, ch.parent_holds)}:{ccode}")
            head = f"{escape(node.relation)}{{{node.mask}}}"
            code = f"{head}[{','.join(kid_codes)}]" if kid_codes else head
            hit = by_code.get(code)
            if hit is not None:
                return hit, code
            i = len(records)
            by_code[code] = i
            size = 1 + sum(sizes[c] for c in kid_ids)
            sizes.append(size)
            # one node per record: each child position has the one choice of that child
            positions: tuple[tuple[Option], ...] = tuple(
                ((labels.setdefault((ch.fk, ch.parent_holds), len(labels)), 0, 1, (c,)),)
                for ch, c in zip(node.children, kid_ids)
            )
            records.append((relations.setdefault(node.relation, len(relations)), node.mask, size, positions))
            return i, code

        # sub-CNs first, whole CNs last (a whole CN is never a proper sub-CN:
        # it already holds every keyword), so the roots are the last ids
        for cn in cns:
            for ch in cn.root.children:
                intern(ch.node)
        first_root = len(records)
        for cn in cns:
            intern(cn.root)
        starts = array("q", range(len(records) + 1))
        return cls(CNDag(tuple(relations), tuple(labels), records, starts, range(first_root, len(records))))

    # -- compact access (no materialisation) ----------------------------
    def __len__(self) -> int:
        return len(self._dag)

    def relation_of(self, i: int) -> str:
        return self.relations[self._dag.records[self._dag.record_of(i)][0]]

    def mask_of(self, i: int) -> int:
        return self._dag.records[self._dag.record_of(i)][1]

    def children_of(self, i: int) -> tuple[LatticeEdge, ...]:
        labels = self.labels
        _, _, _, edges, kids = self._dag.node(i)
        return tuple(LatticeEdge(labels[e][0], labels[e][1], c) for e, c in zip(edges, kids))

    def is_root(self, i: int) -> bool:
        return i in self.roots

    def edge_rows(self) -> list[tuple[str, int, int, tuple[tuple[str, bool, int], ...]]]:
        """``(relation, mask, size, ((fk, parent_holds, child id), ...))`` of every node in id order (made once)."""
        if self._edge_rows is None:
            labels = self.labels
            self._edge_rows = [(relation, mask, size, tuple([(*labels[e], c) for e, c in zip(edge_labels, kids)]))
                               for relation, mask, size, edge_labels, kids in self.node_rows()]
        return self._edge_rows

    def codes(self) -> list[str]:
        """Canonical code of every node (computed once)."""
        if self._codes is None:
            self._codes = dag_codes(self._dag)
        return self._codes

    def node_rows(self) -> Iterator[tuple[str, int, int, tuple[int, ...], tuple[int, ...]]]:
        """``(relation, mask, size, edge labels, child ids)`` of every node in id order."""
        rels = self.relations
        for _, rel, mask, size, edges, lists in self._dag.blocks():
            relation = rels[rel]
            for kids in product(*lists):
                yield relation, mask, size, edges, kids

    @property
    def nodes(self) -> list[LatticeNode]:
        """Every node as a :class:`LatticeNode` (index = id), built on first access."""
        if self._nodes is None:
            codes = self.codes()
            labels = self.labels
            nodes: list[LatticeNode] = []
            for i, rel, mask, size, edges, lists in self._dag.blocks():
                relation = self.relations[rel]
                pairs = [labels[e] for e in edges]
                for kids in product(*lists):
                    kid_edges = tuple([LatticeEdge(fk, holds, c) for (fk, holds), c in zip(pairs, kids)])
                    nodes.append(LatticeNode(i, relation, mask, size, codes[i], kid_edges, [], False))
                    for j, c in enumerate(kids):
                        nodes[c].parents.append((i, j))
                    i += 1
            for r in self.roots:
                nodes[r].is_root = True
            self._nodes = nodes
        return self._nodes

    def by_label(self, relation: str, mask: int) -> list[int]:
        """Ids of the nodes labelled ``relation{mask}``."""
        if self._labels_index is None:
            index: dict[tuple[str, int], list[int]] = {}
            dag = self._dag
            starts = dag.starts
            for j, (rel, m, _, _) in enumerate(dag.records):
                if starts[j] != starts[j + 1]:
                    index.setdefault((self.relations[rel], m), []).extend(range(starts[j], starts[j + 1]))
            self._labels_index = index
        return list(self._labels_index.get((relation, mask), ()))

    # -- inspection -------------------------------------------------------
    def counts(self) -> dict[str, Any]:
        """Sizes for the dashboard: nodes, roots, edges, and the nodes the CNs would need unshared."""
        dag = self._dag
        starts = dag.starts
        first_root = dag.record_of(self.roots[0]) if self.roots else len(dag.records)
        by_size: dict[int, int] = {}
        roots_by_size: dict[int, int] = {}
        edges = 0
        for j, (_, _, size, positions) in enumerate(dag.records):
            n = starts[j + 1] - starts[j]
            if n:
                by_size[size] = by_size.get(size, 0) + n
                edges += n * len(positions)
                if j >= first_root:
                    roots_by_size[size] = roots_by_size.get(size, 0) + n
        unshared = sum(s * n for s, n in roots_by_size.items())
        return {
            "nodes": len(self),
            "roots": len(self.roots),
            "edges": edges,
            "unshared_nodes": unshared,
            "nodes_by_size": dict(sorted(by_size.items())),
            "cns_by_size": dict(sorted(roots_by_size.items())),
        }

    def to_json(self) -> dict[str, Any]:
        """The lattice as JSON: L-Node and L-Edge rows (Fig. 9b) plus codes."""
        codes = self.codes()
        roots = self.roots
        nodes = []
        edges = []
        labels = self.labels
        for i, (relation, mask, size, edge_labels, kids) in enumerate(self.node_rows()):
            nodes.append(
                {"id": i, "relation": relation, "mask": mask, "size": size, "root": i in roots, "code": codes[i]}
            )
            edges.extend(
                {"parent": i, "child": c, "fk": labels[e][0], "parent_holds": labels[e][1]}
                for e, c in zip(edge_labels, kids)
            )
        return {"counts": self.counts(), "nodes": nodes, "edges": edges}

    def dump_text(self) -> str:
        """One line per node: id, label, size, root flag and children."""
        lines = []
        roots = self.roots
        labels = self.labels
        for i, (relation, mask, size, edge_labels, kids) in enumerate(self.node_rows()):
            children = " ".join(
                f"{'>' if labels[e][1] else '<'}{labels[e][0]}:#{c}" for e, c in zip(edge_labels, kids)
            )
            flag = " root" if i in roots else ""
            lines.append(f"#{i} {relation}{{{mask}}} size={size}{flag}" + (f" -> {children}" if children else ""))
        return "\n".join(lines)
