"""CNEvalDynamic (paper Alg. 5): semijoin-reduced sub-relations kept up to date per op.

For every lattice node ``v`` labelled ``R{K'}`` the evaluator keeps ``S[v]``:
the keys of live ``R`` tuples with keyword set exactly ``K'`` that join at
least one tuple of ``S[c]`` for every child ``c`` (the filter phase). A tuple
entering a root node means new results, which :meth:`DynamicEvaluator._expand`
joins top-down along the path the insertion came up (EvalPath), so no
intermediate result is ever built that is not part of an answer.

Touching only the nodes that can use a tuple (Sect. 6.2): a new tuple goes
straight into the leaf nodes of its label; an inner node is tried only when
a neighbour of the tuple (a tuple it references or that references it)
already sits in one of that node's children, found through ``member`` (tuple
-> nodes holding it) and the plan's ``up_joins``. ``missing[v]`` counts
children of ``v`` whose sub-relation is empty: ``missing > 0`` is the paper's
Slist (suspended: skipped without looking at the tuple), ``missing == 0``
with ``S[v]`` empty is Wlist and with ``S[v]`` non-empty Rlist. A keyword-free
tuple whose neighbours sit in no node costs a few dict lookups.

Shared by several keyword sets (``streaming.sharing``), the evaluator reads a
stream-wide store: tuple masks are over the stream's vocabulary (the plan's
``keyword_bits`` select this lattice's keywords), ``admits`` hides the tuples
outside the class's window and selection from the joins, and ``class_bit``
is set in :attr:`~streaming.window.LiveTuple.classes` of every tuple sitting
in at least one node (so the stream routes ops only to classes a neighbour
sits in); ``on_join`` hears of each tuple's first node.
"""

from __future__ import annotations

from typing import Any, Callable

from ..window import LiveStore, LiveTuple
from .plan import LatticePlan
from .results import Result, ResultSet, make_result
from .static import evaluate_static

__all__ = ["DynamicEvaluator"]


class DynamicEvaluator:
    """Sub-relations of every lattice node plus the live results, updated op by op."""

    def __init__(self, plan: LatticePlan, store: LiveStore,
                 admits: Callable[[str, LiveTuple], bool] | None = None, class_bit: int = 0,
                 on_join: Callable[[str, Any, LiveTuple], None] | None = None):
        self.plan = plan
        self.store = store
        self.kb = plan.keyword_bits
        self.admits = admits
        self.class_bit = class_bit
        self.on_join = on_join
        n = plan.size
        self.sub: list[set] = [set() for _ in range(n)]
        # index[v][fk][value] = keys in S[v] whose column of fk equals value
        self.index: list[dict[str, dict[Any, set]]] = [{fk: {} for fk in plan.indexed_fks[v]} for v in range(n)]
        self.member: dict[str, dict[Any, set[int]]] = {name: {} for name in store.rows}
        self.missing = [len(k) for k in plan.kids]
        self.results = ResultSet()
        self._added: list[Result] = []
        rows, referencing, member = store.rows, store.referencing, self.member
        # per node: the groups of plan.up_joins bound to the store's dicts
        # (parent relation, parent rows, index of parent tuples by the FK value or None, column, by_mask)
        self._ups: list[tuple[tuple[str, dict, dict | None, str, dict], ...]] = [
            tuple((prel, rows[prel], referencing[(prel, fk)] if holds else None, column, by_mask)
                  for (prel, holds, fk), (column, by_mask) in plan.up_joins[c].items())
            for c in range(n)
        ]
        # per relation: how a new tuple finds neighbours sitting in lattice nodes
        self._out_probes = {
            name: tuple((column, member[target], (name, True, fk)) for fk, column, target in plan.out_fks[name])
            for name in rows
        }
        self._in_probes = {
            name: tuple((referencing[(holder, fk)], member[holder], (name, False, fk))
                        for holder, fk in plan.in_fks[name])
            for name in rows
        }

    # -- sub-relation bookkeeping -------------------------------------------------

    def enter(self, v: int, key: Any, row: LiveTuple) -> None:
        """Put a tuple into ``S[v]`` (the caller checked it belongs there)."""
        plan = self.plan
        sub = self.sub[v]
        if not sub:
            for p, *_ in plan.ups[v]:
                self.missing[p] -= 1
        sub.add(key)
        nodes = self.member[plan.rel[v]].get(key)
        if nodes is None:
            self.member[plan.rel[v]][key] = {v}
            row.classes |= self.class_bit
            if self.on_join is not None:
                self.on_join(plan.rel[v], key, row)
        else:
            nodes.add(v)
        index = self.index[v]
        if index:
            columns = plan.fk_column_of[plan.rel[v]]
            for fk, values in index.items():
                value = row.values[columns[fk]]
                if value is not None:
                    bucket = values.get(value)
                    if bucket is None:
                        values[value] = {key}
                    else:
                        bucket.add(key)

    def _leave(self, v: int, key: Any, row: LiveTuple) -> None:
        plan = self.plan
        sub = self.sub[v]
        sub.discard(key)
        if not sub:
            for p, *_ in plan.ups[v]:
                self.missing[p] += 1
        members = self.member[plan.rel[v]]
        nodes = members[key]
        nodes.discard(v)
        if not nodes:
            del members[key]
            row.classes &= ~self.class_bit
        index = self.index[v]
        if index:
            columns = plan.fk_column_of[plan.rel[v]]
            for fk, values in index.items():
                value = row.values[columns[fk]]
                if value is not None:
                    bucket = values[value]
                    bucket.discard(key)
                    if not bucket:
                        del values[value]

    def supports(self, v: int, key: Any, row: LiveTuple) -> bool:
        """Whether the tuple joins at least one tuple of every child's sub-relation."""
        sub, index = self.sub, self.index
        for c, parent_holds, fk, column in self.plan.kids[v]:
            if parent_holds:
                if row.values[column] not in sub[c]:
                    return False
            elif key not in index[c][fk]:
                return False
        return True

    # -- insert -------------------------------------------------------------------

    def insert(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        """Evaluate a tuple just added to the store; return the new results."""
        plan = self.plan
        self._added = added = []
        label = (relation, row.mask & self.kb)
        leaves = plan.leaves.get(label)
        if leaves:
            for v in leaves:
                self.enter(v, key, row)
                self._climb(v, key, row, [(v, key, -1)])
        if label in plan.inner_labels:
            candidates = self._candidates(relation, key, row)
            if candidates:
                sub, missing = self.sub, self.missing
                for v in candidates:
                    if key in sub[v]:
                        self._climb(v, key, row, [(v, key, -1)])
                    elif missing[v] == 0 and self.supports(v, key, row):
                        self.enter(v, key, row)
                        self._climb(v, key, row, [(v, key, -1)])
        return added

    def _candidates(self, relation: str, key: Any, row: LiveTuple) -> list[int]:
        """Inner nodes of the tuple's label with a neighbour of the tuple in one of their children."""
        up_joins, mask = self.plan.up_joins, row.mask & self.kb
        found: dict[int, None] = {}
        values = row.values
        for column, members, join in self._out_probes[relation]:
            value = values[column]
            if value is not None:
                nodes = members.get(value)
                if nodes:
                    for c in nodes:
                        group = up_joins[c].get(join)
                        if group is not None:
                            for v, _ in group[1].get(mask, ()):
                                found[v] = None
        for index, members, join in self._in_probes[relation]:
            keys = index.get(key)
            if keys:
                for other in keys:
                    nodes = members.get(other)
                    if nodes:
                        for c in nodes:
                            group = up_joins[c].get(join)
                            if group is not None:
                                for v, _ in group[1].get(mask, ()):
                                    found[v] = None
        return list(found)

    def _climb(self, c: int, key: Any, row: LiveTuple, path: list[tuple[int, Any, int]]) -> None:
        """``key`` is in ``S[c]`` and new results through it may exist: go up (Alg. 5 lines 19-28)."""
        if self.plan.is_root[c]:
            self._eval_path(c, key, row, path)
        sub, missing, kb, admits = self.sub, self.missing, self.kb, self.admits
        for prel, prows, index, column, by_mask in self._ups[c]:
            if index is not None:
                parents = index.get(key)
                if not parents:
                    continue
            else:
                pk = row.values[column]
                if pk is None or pk not in prows:
                    continue
                parents = (pk,)
            for pk in parents:
                prow = prows[pk]
                targets = by_mask.get(prow.mask & kb)
                if not targets or (admits is not None and not admits(prel, prow)):
                    continue
                for v, ei in targets:
                    if pk not in sub[v]:
                        if missing[v] or not self.supports(v, pk, prow):
                            continue
                        self.enter(v, pk, prow)
                    path.append((v, pk, ei))
                    self._climb(v, pk, prow, path)
                    path.pop()

    def _eval_path(self, root: int, key: Any, row: LiveTuple, path: list[tuple[int, Any, int]]) -> None:
        """Join the results of root tuple ``key`` that contain the tuples fixed on ``path``."""
        results, added = self.results, self._added
        for tuples, edges in self._expand(root, key, row, path, len(path) - 1):
            result = make_result(tuples, edges)
            if result is not None and results.add(result):
                added.append(result)

    def _expand(self, v: int, key: Any, row: LiveTuple, path: list, at: int) -> list[tuple[list, list]]:
        """All joined subtrees below ``(v, key)``; on the path (``at >= 0``) one child is fixed."""
        plan, sub, index, rows = self.plan, self.sub, self.index, self.store.rows
        me = (plan.rel[v], key)
        partial: list[tuple[list, list]] = [([me], [])]
        fixed_edge = path[at][2] if at >= 0 else -1
        for ei, (c, parent_holds, fk, column) in enumerate(plan.kids[v]):
            crel = plan.rel[c]
            crows = rows[crel]
            if ei == fixed_edge:
                ckeys: Any = (path[at - 1][1],)
                child_at = at - 1
            else:
                child_at = -1
                if parent_holds:
                    ck = row.values[column]
                    ckeys = (ck,) if ck in sub[c] else ()
                else:
                    ckeys = index[c][fk].get(key, ())
            below: list[tuple[list, list]] = []
            for ck in ckeys:
                edge = (me, (crel, ck), fk) if parent_holds else ((crel, ck), me, fk)
                for tuples, edges in self._expand(c, ck, crows[ck], path, child_at):
                    edges.append(edge)
                    below.append((tuples, edges))
            if not below:
                return []
            partial = [(t1 + t2, e1 + e2) for t1, e1 in partial for t2, e2 in below]
        return partial

    def expand_root(self, root: int, key: Any, row: LiveTuple) -> list[tuple[list, list]]:
        """Every joined tree of root tuple ``key`` as (tuples, edges)."""
        return self._expand(root, key, row, [], -1)

    def bulk_load(self) -> list[Result]:
        """Evaluate every tuple of the store at once with CNEvalStatic (``streaming.evaluate.static``); the
        evaluator must have seen no tuple. Returns the results found."""
        return evaluate_static(self)

    # -- delete -------------------------------------------------------------------

    def delete(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        """Withdraw a tuple about to leave the store; return the results that die with it."""
        nodes = self.member[relation].get(key)
        if nodes:
            sub = self.sub
            for v in list(nodes):
                if key in sub[v]:
                    self._drop(v, key, row)
        return self.results.remove_containing((relation, key))

    def _drop(self, c: int, key: Any, row: LiveTuple) -> None:
        """Remove ``key`` from ``S[c]`` and every parent tuple that loses its only support (Alg. 5 delete)."""
        self._leave(c, key, row)
        plan, sub, kb = self.plan, self.sub, self.kb
        for _, prows, index, column, by_mask in self._ups[c]:
            if index is not None:
                # parents hold the FK: this tuple was their only partner (keys are unique)
                parents = index.get(key)
                if not parents:
                    continue
                for pk in list(parents):
                    for v, _ in by_mask.get(prows[pk].mask & kb, ()):
                        if pk in sub[v]:
                            self._drop(v, pk, prows[pk])
            else:
                # this tuple holds the FK: the parent keeps S[v] if another tuple of S[c] references it
                pk = row.values[column]
                if pk is None or pk not in prows:
                    continue
                for v, ei in by_mask.get(prows[pk].mask & kb, ()):
                    if pk in sub[v] and pk not in self.index[c][plan.kids[v][ei][2]]:
                        self._drop(v, pk, prows[pk])

    # -- inspection ---------------------------------------------------------------

    def snapshot(self) -> list[Result]:
        return sorted(self.results, key=lambda r: (r.tuples, r.edges))

    def stats(self) -> dict[str, Any]:
        plan, sub, missing = self.plan, self.sub, self.missing
        ready = sum(1 for v in range(plan.size) if not missing[v] and sub[v])
        waiting = sum(1 for v in range(plan.size) if not missing[v] and not sub[v])
        return {
            "rlist": ready,
            "wlist": waiting,
            "slist": plan.size - ready - waiting,
            "subrelation_tuples": sum(len(s) for s in sub),
            "live_results": len(self.results),
        }
