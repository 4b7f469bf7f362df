"""Candidate networks of a plan's queries as a join plan: what the Pathway dataflow of the comparison builds.

Each query's CNs come from kwmonitor's own generation (:class:`streaming.lattice.Lattice`,
InitNTGen + NT2CN), so the dataflow evaluates exactly the CNs the engine does.
A lattice node ``R{K'}`` with children becomes a join *node*: the
sub-relation ``R{K'}`` (live tuples of ``R`` in the query's window that its
predicates admit and whose keyword set, restricted to the query, is exactly
``K'``) joined with each child node on the edge's foreign key. Nodes are shared
wherever the lattice shares a sub-CN and across queries whose sub-relations are
the same (same relation, keywords, window and predicates on ``R``).

A node's rows bind its subtree's *positions* in pre-order (``k0`` its own
tuple, then each child's positions in child order). Two positions of the same
relation that are both keyword-free could bind one tuple, which a result may
not (a tree of distinct tuples, docs/results.md): the node where they first
meet lists them in ``distinct``. The other positions cannot collide: a tuple
has one keyword set, and the non-empty ones of a CN are pairwise disjoint.

Keyword sets are bit masks over the plan's *vocabulary* (every keyword of
every query, in first-seen order): a sub-relation keeps the tuples whose
vocabulary mask ``& bits`` equals ``mask`` (``bits``: its query's keywords).

The plan is JSON (the dataflow runs in Pathway's own virtualenv, without
kwmonitor): see :func:`join_plan`.
"""

from __future__ import annotations

from typing import Any

from streaming.keywords import parse_keywords
from streaming.lattice import Lattice
from streaming.schema import Schema
from streaming.sharing.properties import SharingPlan, query_properties

__all__ = ["PlanError", "join_plan"]


class PlanError(ValueError):
    """A plan the comparison cannot express (filter subscriptions, aggregates)."""


def join_plan(plan: SharingPlan) -> dict[str, Any]:
    """The join plan of every query of ``plan``, as JSON.

    ``relations``: per relation its key, attribute types, searchable and FK
    columns; ``vocabulary``; ``windows`` (the queries' distinct windows, ``null``
    first for none); ``subrelations``: ``{relation, window, predicates, bits, mask}``;
    ``nodes`` (children before parents): ``{sub, size, children: [{node,
    column, parent_holds}], distinct: [[a, b], ...]}`` where ``column`` is the
    FK column in the holder (the parent when ``parent_holds``, else the child's
    ``k0`` tuple); ``queries``: ``{id, cns: [{node, tuples, edges}]}`` with, per
    CN, the relation of every position and its edges ``[holder, referenced, fk]``.
    """
    if plan.aggregates:
        raise PlanError("aggregate subscriptions are not part of the Pathway comparison")
    schema = Schema.from_dict(plan.schema_)
    builder = _Builder(schema)
    queries = []
    for entry in plan.queries:
        if not entry.keywords:
            raise PlanError(f"query {entry.id}: filter subscriptions are not part of the Pathway comparison")
        props = query_properties(entry, schema)
        keywords = parse_keywords(entry.keywords)
        queries.append({"id": entry.id, "cns": builder.query_cns(keywords, entry.tmax, entry.window_seconds,
                                                                props.predicates)})
    return {
        "relations": {
            name: {"key": rel.key, "attributes": dict(rel.attributes), "searchable": list(rel.searchable),
                   "fk_columns": [fk.column for fk in rel.foreign_keys]}
            for name, rel in schema.relations.items()
        },
        "vocabulary": builder.vocabulary,
        "windows": sorted({q.window_seconds for q in plan.queries}, key=lambda w: (w is not None, w or 0.0)),
        "subrelations": builder.subrelations,
        "nodes": builder.nodes,
        "queries": queries,
    }


class _Builder:
    """Interns sub-relations and join nodes so that equal ones are built once."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.vocabulary: list[str] = []
        self.subrelations: list[dict[str, Any]] = []
        self.nodes: list[dict[str, Any]] = []
        self._subs: dict[tuple, int] = {}
        self._nodes: dict[tuple, int] = {}
        self._lattices: dict[tuple[int, int], Lattice] = {}
        self._columns = {name: {fk.name: fk.column for fk in rel.foreign_keys}
                         for name, rel in schema.relations.items()}

    def query_cns(self, keywords: tuple[str, ...], tmax: int, window: float | None,
                  predicates: tuple[Any, ...]) -> list[dict[str, Any]]:
        """Intern the query's lattice; return its CNs (one per lattice root) with positions and edges."""
        bits = [self._bit(k) for k in keywords]
        lattice = self._lattice(len(keywords), tmax)
        by_relation: dict[str, list[dict[str, Any]]] = {}
        for p in predicates:
            by_relation.setdefault(p.relation, []).append(p.to_json())
        ids: dict[int, int] = {}
        shapes: dict[int, tuple[list[str], list[int], list[list[Any]]]] = {}
        for node in lattice.nodes:  # children have smaller ids than their parents
            sub = self._sub(node.relation, window, by_relation.get(node.relation, []), bits, node.mask)
            children = []
            relations, masks, edges = [node.relation], [node.mask], []
            distinct: list[list[int]] = []
            for edge in node.children:
                child_relations, child_masks, child_edges = shapes[edge.child]
                offset = len(relations)
                holder = node.relation if edge.parent_holds else child_relations[0]
                children.append({"node": ids[edge.child], "column": self._columns[holder][edge.fk],
                                 "parent_holds": edge.parent_holds})
                for b, (relation, mask) in enumerate(zip(child_relations, child_masks)):
                    distinct.extend([a, offset + b] for a in range(offset)
                                    if mask == 0 and masks[a] == 0 and relations[a] == relation)
                edges.append([0, offset, edge.fk] if edge.parent_holds else [offset, 0, edge.fk])
                edges.extend([h + offset, r + offset, fk] for h, r, fk in child_edges)
                relations += child_relations
                masks += child_masks
            shapes[node.id] = (relations, masks, edges)
            ids[node.id] = self._node(sub, len(relations), children, distinct)
        return [{"node": ids[r], "tuples": shapes[r][0], "edges": shapes[r][2]} for r in lattice.roots]

    def _bit(self, keyword: str) -> int:
        if keyword not in self.vocabulary:
            self.vocabulary.append(keyword)
        return self.vocabulary.index(keyword)

    def _lattice(self, m: int, tmax: int) -> Lattice:
        if (m, tmax) not in self._lattices:
            self._lattices[(m, tmax)] = Lattice.build(self.schema, m, tmax)
        return self._lattices[(m, tmax)]

    def _sub(self, relation: str, window: float | None, predicates: list[dict[str, Any]], bits: list[int],
             mask: int) -> int:
        spread = sum(1 << b for i, b in enumerate(bits) if mask >> i & 1)
        doc = {"relation": relation, "window": window, "predicates": predicates,
               "bits": sum(1 << b for b in bits), "mask": spread}
        key = (relation, window, repr(predicates), doc["bits"], spread)
        if key not in self._subs:
            self._subs[key] = len(self.subrelations)
            self.subrelations.append(doc)
        return self._subs[key]

    def _node(self, sub: int, size: int, children: list[dict[str, Any]], distinct: list[list[int]]) -> int:
        key = (sub, tuple((c["node"], c["column"], c["parent_holds"]) for c in children))
        if key not in self._nodes:
            self._nodes[key] = len(self.nodes)
            self.nodes.append({"sub": sub, "size": size, "children": children, "distinct": distinct})
        return self._nodes[key]
