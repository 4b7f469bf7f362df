"""CNEvalDynamic over the lattice of many keyword sets: the join work of a tuple done once for every query.

:class:`SharedLatticeEvaluator` extends the sub-relations of the shared
lattice's nodes (:class:`~streaming.evaluate.subrelations.SubRelations`, the
filter phase) with the op path and every keyword set's live results. A tuple
entering a node that is a whole CN of keyword set ``K`` (a root of ``K``)
joins its results top-down along the path it came up (EvalPath), and only
trees whose tuples each hold *exactly* their node's words of ``K`` are
results of ``K``: with pairwise disjoint labels covering ``K`` they are the
MTJNTs of ``K``, each found at its one CN.

As in :class:`~streaming.evaluate.dynamic.DynamicEvaluator` (the
single-query evaluator this one generalises), a tuple touches only the nodes
that can use it: the leaves of its labels directly, an inner node only when a
neighbour sits in one of its children (``member`` and the plan's
``up_joins``).

Keyword sets are added and removed while the stream runs
(:meth:`SharedLatticeEvaluator.set_keyword_set`,
:meth:`~SharedLatticeEvaluator.remove_keyword_set`): the nodes they newly
need are filled from the stored tuples, and their results joined from their
roots' sub-relations.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..lattice import Lattice
from ..window import LiveStore, LiveTuple
from .results import Result, SharedResults, make_result
from .shared_plan import EDGE, PARENT
from .subrelations import CHECKS, UP_COLUMN, UP_FK, UP_HOLDERS, UP_READY, UP_RELATION, UP_ROWS, SubRelations

__all__ = ["SharedLatticeEvaluator"]


class SharedLatticeEvaluator(SubRelations):
    """The shared lattice's sub-relations kept op by op, and every keyword set's live results."""

    def __init__(self, schema: Any, store: LiveStore):
        super().__init__(schema, store)
        plan, member = self.plan, self.member
        self.results = SharedResults()
        self._added: list[tuple[int, Result]] = []
        rows, referencing = store.rows, store.referencing
        self._out_probes = {
            name: tuple((column, member[target], (name, True, fk)) for fk, column, target in plan.out_fks[name])
            for name in rows
        }
        self._in_probes = {
            name: tuple((referencing[(holder, fk)], member[holder], (name, False, fk))
                        for holder, fk in plan.in_fks[name])
            for name in rows
        }

    # -- keyword sets ------------------------------------------------------------------

    def set_keyword_set(self, kid: int, bits: Sequence[int], lattice: Lattice) -> list[Result]:
        """(Re-)register keyword set ``kid`` (``bits``: the vocabulary bit of each of its keywords, in the
        lattice's order) and evaluate what it newly needs over the stored tuples; its live results."""
        created, released, widened = self.plan.register(kid, bits, lattice)
        self._clear(released)
        self._grow(created)
        self._fill(widened + created)
        return self._enumerate(kid)

    def remove_keyword_set(self, kid: int) -> None:
        """Forget keyword set ``kid``: its results, and the nodes no other keyword set uses."""
        self.results.drop(kid)
        self._clear(self.plan.unregister(kid))

    def rebuild(self) -> dict[int, list[Result]]:
        """Evaluate every node afresh over the stored tuples (after the store was reloaded); every
        keyword set's live results."""
        self.results = SharedResults()
        self._refill()
        return {kid: self._enumerate(kid) for kid in self.plan.roots}

    def _enumerate(self, kid: int) -> list[Result]:
        """Join every result of keyword set ``kid`` from its roots' sub-relations (its live set afresh)."""
        self.results.drop(kid)
        plan, rows, results = self.plan, self.store.rows, self.results
        bits = plan.keyword_bits[kid]
        for root in plan.roots[kid]:
            relation = plan.rel[root]
            for key in self.sub[root]:
                for tuples, edges in self._expand(root, key, rows[relation][key], [], -1, bits):
                    result = make_result(tuples, edges)
                    if result is not None:
                        results.add(kid, result)
        return sorted(results.of.get(kid, ()), key=lambda r: (r.tuples, r.edges))

    # -- insert ------------------------------------------------------------------------

    def insert(self, relation: str, key: Any, row: LiveTuple) -> list[tuple[int, Result]]:
        """Evaluate a tuple just added to the store; the new ``(keyword set, result)`` pairs, sorted."""
        labels, leaves, inner = self._info(relation, row.mask)
        if not labels:
            return []
        self._added = added = []
        for v in leaves:
            self._enter(v, key, row)
            self._climb(v, key, row, [(v, key, -1)])
        if inner:
            plan, sub = self.plan, self.sub
            for v in self._candidates(relation, key, row, inner):
                if key in sub[v]:
                    self._climb(v, key, row, [(v, key, -1)])
                elif plan.eligible(v, row.mask):
                    self._enter(v, key, row)
                    self._climb(v, key, row, [(v, key, -1)])
        if len(added) > 1:
            added.sort(key=_order)
        return added

    def _candidates(self, relation: str, key: Any, row: LiveTuple, inner: tuple[int, ...]) -> dict[int, None]:
        """Inner nodes of the tuple's labels with a neighbour of the tuple in every child (the tuple is
        supported there), in the order found: through the ready parents of the nodes a neighbour sits in,
        the parent edge reached through one neighbour, its other children tested by the edge's checks
        (:data:`~streaming.evaluate.subrelations.ReadyEdges`; a suspended node, with an empty child, is not
        among the ready)."""
        ready = self._ready
        found: dict[int, None] = {}
        values = row.values
        probes = self._out_probes[relation]
        for probe in probes:
            members, join = probe[1], probe[2]
            value = values[probe[0]]
            if value is not None:
                nodes = members.get(value)
                if nodes:
                    for c in nodes:
                        by_label = ready[c].get(join)
                        if by_label:
                            for label in inner:
                                for edges in by_label.get(label, ()):
                                    _supported_parents(edges, key, values, found)
        probes = self._in_probes[relation]
        for probe in probes:
            members, join = probe[1], probe[2]
            keys = probe[0].get(key)
            if keys:
                for other in keys:
                    nodes = members.get(other)
                    if nodes:
                        for c in nodes:
                            by_label = ready[c].get(join)
                            if by_label:
                                for label in inner:
                                    for edges in by_label.get(label, ()):
                                        _supported_parents(edges, key, values, found)
        return found

    def _climb(self, c: int, key: Any, row: LiveTuple, path: list[tuple[int, Any, int]]) -> None:
        """``key`` is in ``S[c]`` and new results through it may exist: go up (Alg. 5 lines 19-28)."""
        plan = self.plan
        kid = plan.root_of[c]
        if kid >= 0:
            self._eval_path(c, key, row, path, kid)
        sub = self.sub
        ups = self._ups[c]
        for up in ups:
            ready = up[UP_READY]
            if not ready:
                continue
            holders, prows = up[UP_HOLDERS], up[UP_ROWS]
            if holders is not None:
                parents = holders.get(key)
                if not parents:
                    continue
            else:
                pk = row.values[up[UP_COLUMN]]
                if pk is None or pk not in prows:
                    continue
                parents = (pk,)
            for pk in parents:
                prow = prows[pk]
                for label in self._labels_of(up[UP_RELATION], prow):
                    # entering a node may list its parents as ready (they are reached from it): that replaces
                    # the tuples, and this loop goes on over the edges that were ready when it began
                    for edges in ready.get(label, ()):
                        stride, end = edges[0], len(edges)
                        at = 1
                        while at < end:
                            # support first: most parents reached lack a partner in another child (a parent
                            # tuple in S[v] has one in every child), and the word test allocates (masks are big
                            # integers)
                            if _joins(edges, at + CHECKS, at + stride, pk, prow.values):
                                v = edges[at + PARENT]
                                held = pk in sub[v]
                                if not held and plan.eligible(v, prow.mask):
                                    self._enter(v, pk, prow)
                                    held = True
                                if held:
                                    path.append((v, pk, edges[at + EDGE]))
                                    self._climb(v, pk, prow, path)
                                    path.pop()
                            at += stride

    def _eval_path(self, root: int, key: Any, row: LiveTuple, path: list[tuple[int, Any, int]], kid: int) -> None:
        """Join the results of keyword set ``kid`` at root tuple ``key`` that contain the tuples on ``path``."""
        results, added = self.results, self._added
        for tuples, edges in self._expand(root, key, row, path, len(path) - 1, self.plan.keyword_bits[kid]):
            result = make_result(tuples, edges)
            if result is not None and results.add(kid, result):
                added.append((kid, result))

    def _expand(self, v: int, key: Any, row: LiveTuple, path: list, at: int, bits: int) -> list[tuple[list, list]]:
        """All joined subtrees below ``(v, key)`` whose tuples hold exactly their node's words of ``bits``;
        on the path (``at >= 0``) one child is fixed."""
        plan = self.plan
        if row.mask & bits != plan.mask[v]:
            return []
        sub, index, rows = self.sub, self.index, self.store.rows
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
                for pair in self._expand(c, ck, crows[ck], path, child_at, bits):
                    pair[1].append(edge)
                    below.append(pair)
            if not below:
                return []
            if len(below) == 1:  # most joins: one subtree below, added to each partial tree in place
                t2, e2 = below[0]
                for t1, e1 in partial:
                    t1.extend(t2)
                    e1.extend(e2)
            else:
                partial = [(t1 + t2, e1 + e2) for t1, e1 in partial for t2, e2 in below]
        return partial

    # -- delete ------------------------------------------------------------------------

    def delete(self, relation: str, key: Any, row: LiveTuple) -> list[tuple[int, Result]]:
        """Withdraw a tuple about to leave the store; the ``(keyword set, result)`` pairs that die with it."""
        nodes = self.member[relation].get(key)
        if nodes:
            sub = self.sub
            for v in list(nodes):
                if key in sub[v]:
                    self._drop(v, key, row)
        return self.results.remove_containing((relation, key))

    def _drop(self, c: int, key: Any, row: LiveTuple) -> None:
        """Remove ``key`` from ``S[c]`` after every parent tuple that loses its only support (Alg. 5
        delete); parents first, while ``c`` still lists them as ready. A parent tuple is in ``S[v]``
        exactly when ``v`` is among its nodes (``member``): one small set per parent tuple, tested for
        each ready edge instead of each edge's parent sub-relation (most parents are not in it)."""
        member = self.member
        ups = self._ups[c]
        for up in ups:
            ready = up[UP_READY]
            if not ready:
                continue
            holders, prows = up[UP_HOLDERS], up[UP_ROWS]
            if holders is not None:
                # parents hold the FK: this tuple was their only partner (keys are unique)
                parents = holders.get(key)
                if not parents:
                    continue
                parents = tuple(parents)
            else:
                # this tuple holds the FK: the parent keeps S[v] if another tuple of S[c] references it
                # (every parent of the group joins c on the group's FK)
                pk = row.values[up[UP_COLUMN]]
                if pk is None or pk not in prows or len(self.index[c][up[UP_FK]][pk]) != 1:
                    continue
                parents = (pk,)
            prel = up[UP_RELATION]
            members = member[prel]
            for pk in parents:
                nodes = members.get(pk)
                if not nodes:
                    continue
                prow = prows[pk]
                for label in self._labels_of(prel, prow):
                    for edges in ready.get(label, ()):
                        stride, end = edges[0], len(edges)
                        at = 1
                        while at < end:
                            parent = edges[at + PARENT]
                            if parent in nodes:
                                self._drop(parent, pk, prow)
                            at += stride
        self._leave(c, key, row)

    # -- inspection --------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        plan, sub, missing = self.plan, self.sub, self.missing
        alive = [v for v in range(len(plan.rel)) if plan.alive[v]]
        ready = sum(1 for v in alive if not missing[v] and sub[v])
        waiting = sum(1 for v in alive if not missing[v] and not sub[v])
        return {**plan.stats(), "rlist": ready, "wlist": waiting, "slist": len(alive) - ready - waiting,
                "subrelation_tuples": sum(len(sub[v]) for v in alive), "live_results": len(self.results)}


def _joins(edges: tuple, at: int, end: int, key: Any, values: dict) -> bool:
    """Whether a parent tuple (``key``, ``values``) reached through a ready edge has a partner in each of
    the parent's other children: the edge's checks, ``edges[at:end]``
    (:data:`~streaming.evaluate.subrelations.ReadyEdges`)."""
    while at < end:
        if edges[at]:
            if values[edges[at + 1]] not in edges[at + 2]:
                return False
        elif key not in edges[at + 2]:
            return False
        at += 3
    return True


def _supported_parents(edges: tuple, key: Any, values: dict, found: dict) -> None:
    """Add to ``found`` the parents of ``edges`` (:data:`~streaming.evaluate.subrelations.ReadyEdges`)
    where a tuple (``key``, ``values``) joining the edges' child has a partner in every other child."""
    stride, end = edges[0], len(edges)
    at = 1
    while at < end:
        v = edges[at + PARENT]
        if v not in found and _joins(edges, at + CHECKS, at + stride, key, values):
            found[v] = None
        at += stride


def _order(item: tuple[int, Result]) -> tuple:
    return (item[1].tuples, item[1].edges, item[0])
