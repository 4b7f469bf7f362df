"""The baseline: Markowetz et al.'s Full-Mesh of left-deep operator trees (paper Sect. 3.1).

Every CN becomes a left-deep join sequence in the order InitCNGen grows it
(pre-order from the node that holds the first keyword). Sequences with a common prefix share operators, so
the mesh is a trie: operator ``o`` at level ``i`` holds every *partial* join
of the first ``i + 1`` nodes (a tuple of keys) over the live tuples, plus
hash indexes on the join attribute each of its successors needs. A new tuple
enters every level-0 operator of its label and every operator whose right
input has its label; each new partial flows on to the successors. Results
are the partials of operators that complete a CN. A deleted tuple removes
all partials that contain it. This is the materialise-everything strategy
CNEvalDynamic is measured against: correct, with shared prefixes and hash
joins, but no semijoin filtering.
"""

from __future__ import annotations

from typing import Any

from ..window import LiveStore, LiveTuple
from .plan import LatticePlan
from .results import Result, ResultSet, make_result

__all__ = ["MeshEvaluator", "left_deep_order"]


class _Operator:
    __slots__ = ("id", "parent", "rel", "mask", "attach", "new_holds", "fk", "column", "level",
                 "relations", "children", "index_specs", "out", "indexes", "final")

    def __init__(self, op_id: int, parent: "_Operator | None", rel: str, mask: int,
                 attach: int, new_holds: bool, fk: str, column: str):
        self.id = op_id
        self.parent = parent
        self.rel, self.mask = rel, mask
        self.attach, self.new_holds, self.fk, self.column = attach, new_holds, fk, column
        self.level = 0 if parent is None else parent.level + 1
        self.relations: tuple[str, ...] = (parent.relations if parent else ()) + (rel,)
        self.children: list[_Operator] = []
        self.index_specs: dict[tuple[int, bool, str], str] = {}
        self.out: set[tuple] = set()
        self.indexes: dict[tuple[int, bool, str], dict[Any, set[tuple]]] = {}
        self.final: list[tuple[int, int, str]] | None = None


def _positions(plan: LatticePlan, root: int) -> tuple[list[tuple[str, int]], list[tuple[int, int, str, str]]]:
    """A CN's nodes as positions (relation, mask) and edges (holder pos, target pos, fk, column)."""
    labels: list[tuple[str, int]] = []
    edges: list[tuple[int, int, str, str]] = []

    def walk(v: int) -> int:
        me = len(labels)
        labels.append((plan.rel[v], plan.mask[v]))
        for c, parent_holds, fk, column in plan.kids[v]:
            child = walk(c)
            edges.append((me, child, fk, column) if parent_holds else (child, me, fk, column))
        return me

    walk(root)
    return labels, edges


def left_deep_order(labels: list[tuple[str, int]], edges: list[tuple[int, int, str, str]]) -> list[int]:
    """Join order of a CN's positions, as InitCNGen builds the CN: pre-order from the node holding keyword 0.

    Markowetz et al. root every CN at a node containing the first keyword and
    grow it in pre-order; the left-deep operator tree joins in that order.
    Siblings are visited by the lowest keyword of their subtree (a total,
    shape-only order, so equal prefixes of different CNs share operators).
    """
    adjacent: dict[int, list[int]] = {p: [] for p in range(len(labels))}
    for h, t, _, _ in edges:
        adjacent[h].append(t)
        adjacent[t].append(h)

    def union(p: int, came_from: int) -> int:
        out = labels[p][1]
        for q in adjacent[p]:
            if q != came_from:
                out |= union(q, p)
        return out

    def lowest(mask: int) -> int:
        return (mask & -mask).bit_length()

    start = next(p for p, (_, mask) in enumerate(labels) if mask & 1)
    order: list[int] = []

    def visit(p: int, came_from: int) -> None:
        order.append(p)
        for q in sorted((q for q in adjacent[p] if q != came_from), key=lambda q: lowest(union(q, p))):
            visit(q, p)

    visit(start, -1)
    return order


class MeshEvaluator:
    """All partial joins of all CNs' left-deep operator trees, maintained per op."""

    def __init__(self, plan: LatticePlan, store: LiveStore):
        self.plan = plan
        self.store = store
        self.operators: list[_Operator] = []
        self.level0: dict[tuple[str, int], list[_Operator]] = {}
        self.by_right: dict[tuple[str, int], list[_Operator]] = {}
        self.containing: dict[str, dict[Any, list[tuple[_Operator, tuple]]]] = {name: {} for name in store.rows}
        self.results = ResultSet()
        self.peak_partials = 0
        self._partials = 0
        self._added: list[Result] = []
        trie: dict[tuple, _Operator] = {}
        for root in plan.roots:
            self._add_cn(trie, *_positions(plan, root))

    def _add_cn(self, trie: dict, labels: list, edges: list) -> None:
        order = left_deep_order(labels, edges)
        where = {p: i for i, p in enumerate(order)}
        prefix: tuple = ()
        op: _Operator | None = None
        for i, p in enumerate(order):
            rel, mask = labels[p]
            if i == 0:
                step: tuple = (rel, mask)
                attach, new_holds, fk, column = -1, False, "", ""
            else:
                h, t, fk, column = next(e for e in edges if p in e[:2] and (e[0] if e[1] == p else e[1]) in where
                                        and where[e[0] if e[1] == p else e[1]] < i)
                other = h if t == p else t
                attach, new_holds = where[other], h == p
                step = (rel, mask, attach, new_holds, fk)
            prefix = prefix + (step,)
            nxt = trie.get(prefix)
            if nxt is None:
                nxt = _Operator(len(self.operators), op, rel, mask, attach, new_holds, fk, column)
                self.operators.append(nxt)
                trie[prefix] = nxt
                if op is None:
                    self.level0.setdefault((rel, mask), []).append(nxt)
                else:
                    op.children.append(nxt)
                    spec = (attach, new_holds, fk)
                    op.index_specs[spec] = column
                    op.indexes.setdefault(spec, {})
                    self.by_right.setdefault((rel, mask), []).append(nxt)
            op = nxt
        assert op is not None
        op.final = [(where[h], where[t], fk) for h, t, fk, _ in edges]

    # -- partial joins ------------------------------------------------------------

    def _index_value(self, op: _Operator, spec: tuple[int, bool, str], column: str, partial: tuple) -> Any:
        attach, new_holds, _ = spec
        if new_holds:
            return partial[attach]
        return self.store.rows[op.relations[attach]][partial[attach]].values[column]

    def _add(self, op: _Operator, partial: tuple) -> None:
        if partial in op.out:
            return
        op.out.add(partial)
        self._partials += 1
        if self._partials > self.peak_partials:
            self.peak_partials = self._partials
        for spec, column in op.index_specs.items():
            value = self._index_value(op, spec, column, partial)
            if value is not None:
                op.indexes[spec].setdefault(value, set()).add(partial)
        containing = self.containing
        for rel, key in zip(op.relations, partial):
            containing[rel].setdefault(key, []).append((op, partial))
        if op.final is not None:
            tuples = list(zip(op.relations, partial))
            edges = [(tuples[h], tuples[t], fk) for h, t, fk in op.final]
            result = make_result(tuples, edges)
            if result is not None and self.results.add(result):
                self._added.append(result)
        rows, referencing = self.store.rows, self.store.referencing
        for child in op.children:
            attach_key = partial[child.attach]
            crows = rows[child.rel]
            if child.new_holds:
                keys = referencing[(child.rel, child.fk)].get(attach_key, ())
            else:
                value = rows[op.relations[child.attach]][attach_key].values[child.column]
                keys = (value,) if value is not None and value in crows else ()
            for key in list(keys):
                if crows[key].mask == child.mask and not self._clash(child, partial, key):
                    self._add(child, partial + (key,))

    @staticmethod
    def _clash(op: _Operator, partial: tuple, key: Any) -> bool:
        """Whether the new tuple of ``op`` is already bound in ``partial`` (not a tree of distinct tuples)."""
        rel = op.rel
        relations = op.relations
        for i, other in enumerate(partial):
            if other == key and relations[i] == rel:
                return True
        return False

    def insert(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        self._added = []
        label = (relation, row.mask)
        for op in self.level0.get(label, ()):
            self._add(op, (key,))
        values = row.values
        for op in self.by_right.get(label, ()):
            parent = op.parent
            spec = (op.attach, op.new_holds, op.fk)
            probe = values[op.column] if op.new_holds else key
            if probe is None:
                continue
            matches = parent.indexes[spec].get(probe)
            if matches:
                for partial in list(matches):
                    if not self._clash(op, partial, key):
                        self._add(op, partial + (key,))
        return self._added

    def delete(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        for op, partial in self.containing[relation].pop(key, ()):
            if partial in op.out:
                op.out.discard(partial)
                self._partials -= 1
                for spec, column in op.index_specs.items():
                    value = self._index_value(op, spec, column, partial)
                    if value is not None:
                        bucket = op.indexes[spec][value]
                        bucket.discard(partial)
                        if not bucket:
                            del op.indexes[spec][value]
        return self.results.remove_containing((relation, key))

    def snapshot(self) -> list[Result]:
        return sorted(self.results, key=lambda r: (r.tuples, r.edges))

    def stats(self) -> dict[str, Any]:
        return {
            "mesh_operators": len(self.operators),
            "intermediate_tuples": self._partials,
            "peak_intermediate_tuples": self.peak_partials,
            "live_results": len(self.results),
        }
