"""CNEvalDynamic over the lattice of many keyword sets: the join work of a tuple done once for every query.

:class:`SharedLatticeEvaluator` keeps, for every node ``v`` of a
:class:`~streaming.evaluate.shared_plan.SharedLatticePlan` labelled ``R{L}``,
the sub-relation ``S[v]``: the keys of live ``R`` tuples containing at least
the words of ``L`` that join at least one tuple of ``S[c]`` for every child
``c`` — the filter phase of paper 000's Alg. 5, with a monotone label test so
that a node is the same for every keyword set it serves. A tuple entering a
node that is a whole CN of keyword set ``K`` (a root of ``K``) joins its
results top-down along the path it came up (EvalPath), and only trees whose
tuples each hold *exactly* their node's words of ``K`` are results of ``K``:
with pairwise disjoint labels covering ``K`` they are the MTJNTs of ``K``,
each found at its one CN.

As in :class:`~streaming.evaluate.dynamic.DynamicEvaluator` (the
single-query evaluator this one generalises), a tuple touches only the nodes
that can use it: the leaves of its labels directly, an inner node only when a
neighbour sits in one of its children (``member`` and the plan's
``up_joins``). A tuple's labels (the node labels present that its words
contain) are computed once per relation and keyword mask.

Keyword sets are added and removed while the stream runs
(:meth:`SharedLatticeEvaluator.set_keyword_set`,
:meth:`~SharedLatticeEvaluator.remove_keyword_set`): new nodes are filled
from the stored tuples (CNEvalStatic: leaves by one scan per relation, inner
nodes by a semijoin from their smallest child), released ones are cleared,
and the nodes every other keyword set uses keep their state.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..lattice import Lattice
from ..window import LiveStore, LiveTuple
from .results import Result, SharedResults, make_result
from .shared_plan import SharedLatticePlan

__all__ = ["SharedLatticeEvaluator"]

# Fields of an edge of SharedLatticePlan.kids, ``(child, parent_holds, fk, column)``, of a parent
# group of _ups, ``(relation, rows, holders, column, ready)``, and of a ready edge ``(parent, edge
# index)``: the hot loops index them (the compiled module reads a tuple's item directly).
CHILD, HOLDS, FK, COLUMN = 0, 1, 2, 3
UP_RELATION, UP_ROWS, UP_HOLDERS, UP_COLUMN, UP_READY = 0, 1, 2, 3, 4
PARENT, EDGE = 0, 1

#: a tuple's node labels, the leaves they put it in, and those of its labels that inner nodes carry
LabelInfo = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
_NONE: LabelInfo = ((), (), ())
# above this many candidate words a tuple's labels are found by scanning the relation's labels
_SUBSET_WORDS = 10
# the sub-relation of a node no tuple has entered (most nodes): one shared empty set, not a set each
_EMPTY: frozenset = frozenset()


class SharedLatticeEvaluator:
    """Sub-relations of every node of the shared lattice, and every keyword set's live results."""

    def __init__(self, schema: Any, store: LiveStore):
        self.plan = plan = SharedLatticePlan(schema)
        self.store = store
        self.sub: list[set | frozenset] = []  # an empty node's is _EMPTY until a tuple enters it
        # index[v][fk][value] = keys in S[v] whose column of fk equals value
        self.index: list[dict[str, dict[Any, set]]] = []
        self.missing: list[int] = []
        self.member: dict[str, dict[Any, set[int]]] = {name: {} for name in store.rows}
        self.results = SharedResults()
        self._added: list[tuple[int, Result]] = []
        # ready[c][(relation, parent_holds, fk)][L]: the edges (parent, edge index) into c of parents
        # labelled L with no empty child (the paper's Wlist and Rlist; a suspended node is not listed)
        self._ready: list[dict[tuple[str, bool, str], dict[int, dict[tuple[int, int], None]]]] = []
        # per node: its parent groups bound to the store's dicts
        # (parent relation, parent rows, holders of the FK value or None, column, ready by label)
        self._ups: list[tuple[tuple[str, dict, dict | None, str, dict], ...]] = []
        self._labels: dict[tuple[str, int], LabelInfo] = {}
        self._label_words: dict[str, int] = {}  # per relation: every word of its node labels
        self._labels_version = -1
        rows, referencing, member = store.rows, store.referencing, self.member
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
        plan = self.plan
        alive = [v for v in range(len(plan.rel)) if plan.alive[v]]
        for name in self.member:
            self.member[name].clear()
        self.results = SharedResults()
        for v in alive:
            self.sub[v] = _EMPTY
            self.index[v] = {fk: {} for fk in self.index[v]}
            self.missing[v] = len(plan.kids[v])
            for ready in self._ready[v].values():
                ready.clear()
        self._fill(alive)
        return {kid: self._enumerate(kid) for kid in plan.roots}

    def _grow(self, created: list[int]) -> None:
        plan = self.plan
        for v in created:
            while len(self.sub) <= v:
                self.sub.append(_EMPTY)
                self.index.append({})
                self.missing.append(0)
                self._ready.append({})
                self._ups.append(())
            empty = 0
            for kid in plan.kids[v]:
                if not self.sub[kid[CHILD]]:
                    empty += 1
            self.missing[v] = empty
        bound = dict.fromkeys(created)
        for v in created:
            for kid in plan.kids[v]:
                bound[kid[CHILD]] = None
        ups = self._ups
        for v in bound:
            # a node gains parent groups here (it loses them only in _clear, which binds it again): one whose
            # groups are all bound already keeps its binding, the new parents' edges join groups it has
            if len(ups[v]) != len(plan.up_joins[v]):
                self._bind(v)
        for v in created:
            if plan.kids[v] and not self.missing[v]:
                self._set_ready(v, True)

    def _set_ready(self, v: int, ready: bool) -> None:
        """List node ``v`` among its children's ready parents (its children are all non-empty), or not."""
        plan = self.plan
        relation, label = plan.rel[v], plan.mask[v]
        for ei, (c, parent_holds, fk, _) in enumerate(plan.kids[v]):
            by_label = self._ready[c][(relation, parent_holds, fk)]
            if ready:
                edges = by_label.get(label)
                if edges is None:
                    by_label[label] = {(v, ei): None}
                else:
                    edges[(v, ei)] = None
            else:
                edges = by_label[label]
                del edges[(v, ei)]
                if not edges:
                    del by_label[label]

    def _bind(self, c: int) -> None:
        """Bind node ``c``'s parent groups to the store and keep the value indexes its parents join on."""
        rows, referencing = self.store.rows, self.store.referencing
        groups = self.plan.up_joins[c]
        ready = self._ready[c]
        for join in [join for join in ready if join not in groups]:
            del ready[join]
        self._ups[c] = tuple((prel, rows[prel], referencing[(prel, fk)] if holds else None, column,
                              ready.setdefault((prel, holds, fk), {}))
                             for (prel, holds, fk), (column, _) in groups.items())
        wanted = {fk for (_, holds, fk) in groups if not holds}
        index = self.index[c]
        for fk in [fk for fk in index if fk not in wanted]:
            del index[fk]
        if wanted - set(index):
            column_of = self.plan.fk_column_of[self.plan.rel[c]]
            crows = rows[self.plan.rel[c]]
            for fk in wanted - set(index):
                values: dict[Any, set] = {}
                column = column_of[fk]
                for key in self.sub[c]:
                    value = crows[key].values[column]
                    if value is not None:
                        values.setdefault(value, set()).add(key)
                index[fk] = values

    def _clear(self, released: list[int]) -> None:
        """Empty the released nodes (they have no parents left) and rebind their children."""
        plan = self.plan
        for v in released:
            if plan.kids[v] and not self.missing[v]:
                self._set_ready(v, False)
        for v in released:
            members = self.member[plan.rel[v]]
            for key in self.sub[v]:
                nodes = members[key]
                nodes.discard(v)
                if not nodes:
                    del members[key]
            self.sub[v] = _EMPTY
            self.index[v] = {}
            self._ups[v] = ()
        for v in released:
            for c, *_ in plan.kids[v]:
                if plan.alive[c]:
                    self._bind(c)

    def _fill(self, nodes: list[int]) -> None:
        """CNEvalStatic for ``nodes`` (children before parents) over the stored tuples: new nodes, and
        nodes whose eligibility widened (the tuples they hold stay)."""
        plan, rows_of, referencing, sub = self.plan, self.store.rows, self.store.referencing, self.sub
        leaves: dict[str, dict[int, list[int]]] = {}
        for v in nodes:
            if not plan.kids[v]:
                leaves.setdefault(plan.rel[v], {}).setdefault(plan.mask[v], []).append(v)
        for relation, by_label in leaves.items():
            for key, row in rows_of[relation].items():
                for label in self._info(relation, row.mask)[0]:
                    for v in by_label.get(label, ()):
                        if key not in sub[v] and plan.eligible(v, row.mask):
                            self._enter(v, key, row)
        for v in nodes:
            if not plan.kids[v] or self.missing[v]:
                continue
            relation, label = plan.rel[v], plan.mask[v]
            rows = rows_of[relation]
            # semijoin from the smallest child: only tuples joining it can qualify
            c, parent_holds, fk, column = min(plan.kids[v], key=lambda kid: len(sub[kid[0]]))
            if parent_holds:
                index = referencing[(relation, fk)]
                candidates = {key for ck in sub[c] for key in index.get(ck, ())}
            else:
                crows = rows_of[plan.rel[c]]
                candidates = {crows[ck].values[column] for ck in sub[c]}
            for key in candidates:
                row = rows.get(key)
                if (row is not None and row.mask & label == label and key not in sub[v]
                        and plan.eligible(v, row.mask) and self._supported(v, key, row, -1)):
                    self._enter(v, key, row)

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

    # -- labels ------------------------------------------------------------------------

    def _info(self, relation: str, mask: int) -> LabelInfo:
        """The node labels a tuple of ``relation`` with keyword ``mask`` carries (its words contain them)."""
        if self._labels_version != self.plan.version:
            self._labels.clear()
            self._label_words.clear()
            self._labels_version = self.plan.version
        info = self._labels.get((relation, mask))
        if info is not None:
            return info
        plan = self.plan
        present = plan.labels[relation]
        if not present:
            info = _NONE
        else:
            words = self._label_words.get(relation)
            if words is None:
                words = 0
                for label in present:
                    words |= label
                self._label_words[relation] = words
            candidates = mask & words
            if candidates.bit_count() <= _SUBSET_WORDS:
                labels, sub = [], candidates
                while True:  # every subset of the candidate words, the empty one included
                    if sub in present:
                        labels.append(sub)
                    if not sub:
                        break
                    sub = (sub - 1) & candidates
            else:
                labels = [label for label in present if label & ~mask == 0]
            labels.sort()
            leaves = tuple([v for label in labels for v in plan.leaves.get((relation, label), ())
                            if plan.eligible(v, mask)])
            inner = tuple([label for label in labels if (relation, label) in plan.inner])
            info = (tuple(labels), leaves, inner)
        self._labels[(relation, mask)] = info
        return info

    def _labels_of(self, relation: str, row: LiveTuple) -> tuple[int, ...]:
        """A stored tuple's labels (:meth:`_info`), kept on the tuple while the lattice is unchanged."""
        version = self.plan.version
        if row.labels_version != version:
            row.labels = self._info(relation, row.mask)[0]
            row.labels_version = version
        return row.labels

    # -- sub-relation bookkeeping -------------------------------------------------------

    def _enter(self, v: int, key: Any, row: LiveTuple) -> None:
        plan = self.plan
        if self.sub[v]:
            sub = self.sub[v]
        else:
            missing = self.missing
            for _, by_label in plan.up_joins[v].values():
                for parents in by_label.values():
                    for p, _ in parents:
                        missing[p] -= 1
                        if not missing[p]:
                            self._set_ready(p, True)
            sub = self.sub[v] = set()
        sub.add(key)
        members = self.member[plan.rel[v]]
        nodes = members.get(key)
        if nodes is None:
            members[key] = {v}
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
            missing = self.missing
            for _, by_label in plan.up_joins[v].values():
                for parents in by_label.values():
                    for p, _ in parents:
                        if not missing[p]:
                            self._set_ready(p, False)
                        missing[p] += 1
        members = self.member[plan.rel[v]]
        nodes = members[key]
        nodes.discard(v)
        if not nodes:
            del members[key]
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

    def _supported(self, v: int, key: Any, row: LiveTuple, known: int) -> bool:
        """Whether the tuple joins at least one tuple of every child's sub-relation (edge ``known`` it is
        known to join: the one it was reached through, or -1)."""
        sub, index = self.sub, self.index
        kids = self.plan.kids[v]
        for ei, kid in enumerate(kids):
            if ei == known:
                continue
            if kid[HOLDS]:
                if row.values[kid[COLUMN]] not in sub[kid[CHILD]]:
                    return False
            elif key not in index[kid[CHILD]][kid[FK]]:
                return False
        return True

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
            plan = self.plan
            sub, full = self.sub, plan.full
            for v, joined in self._candidates(relation, key, row, inner).items():
                if key in sub[v]:
                    self._climb(v, key, row, [(v, key, -1)])
                elif joined == full[v] and plan.eligible(v, row.mask):  # a neighbour in every child
                    self._enter(v, key, row)
                    self._climb(v, key, row, [(v, key, -1)])
        if len(added) > 1:
            added.sort(key=_order)
        return added

    def _candidates(self, relation: str, key: Any, row: LiveTuple, inner: tuple[int, ...]) -> dict[int, int]:
        """Inner nodes of the tuple's labels with a neighbour of the tuple in one of their children, each
        with the bitmask of its edges such a neighbour joins (all of them: the tuple is supported)."""
        ready = self._ready
        found: dict[int, int] = {}  # (a suspended node, with an empty child, is not among the ready)
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
                                for edge in by_label.get(label, ()):
                                    v = edge[PARENT]
                                    found[v] = found.get(v, 0) | 1 << edge[EDGE]
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
                                    for edge in by_label.get(label, ()):
                                        v = edge[PARENT]
                                        found[v] = found.get(v, 0) | 1 << edge[EDGE]
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
                    targets = ready.get(label)
                    if not targets:
                        continue
                    # a snapshot: entering a node may list its parents as ready (they are reached from it)
                    snapshot = tuple(targets)
                    for edge in snapshot:
                        v = edge[PARENT]
                        if pk not in sub[v]:
                            # support first: most parents reached lack a partner in another child, and
                            # the word test allocates (masks are big integers)
                            if not self._supported(v, pk, prow, edge[EDGE]) or not plan.eligible(v, prow.mask):
                                continue
                            self._enter(v, pk, prow)
                        path.append((v, pk, edge[EDGE]))
                        self._climb(v, pk, prow, path)
                        path.pop()

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
                for tuples, edges in self._expand(c, ck, crows[ck], path, child_at, bits):
                    edges.append(edge)
                    below.append((tuples, edges))
            if not below:
                return []
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
        delete); parents first, while ``c`` still lists them as ready."""
        plan, sub = self.plan, self.sub
        ups = self._ups[c]
        for up in ups:
            ready = up[UP_READY]
            if not ready:
                continue
            holders, prows, relation = up[UP_HOLDERS], up[UP_ROWS], up[UP_RELATION]
            if holders is not None:
                # parents hold the FK: this tuple was their only partner (keys are unique)
                parents = holders.get(key)
                if not parents:
                    continue
                for pk in list(parents):
                    prow = prows[pk]
                    for label in self._labels_of(relation, prow):
                        for edge in tuple(ready.get(label, ())):
                            v = edge[PARENT]
                            if pk in sub[v]:
                                self._drop(v, pk, prow)
            else:
                # this tuple holds the FK: the parent keeps S[v] if another tuple of S[c] references it
                pk = row.values[up[UP_COLUMN]]
                if pk is None or pk not in prows:
                    continue
                prow = prows[pk]
                for label in self._labels_of(relation, prow):
                    for edge in tuple(ready.get(label, ())):
                        v = edge[PARENT]
                        if pk in sub[v] and len(self.index[c][plan.kids[v][edge[EDGE]][FK]][pk]) == 1:
                            self._drop(v, pk, prow)
        self._leave(c, key, row)

    # -- inspection --------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        plan, sub, missing = self.plan, self.sub, self.missing
        alive = [v for v in range(len(plan.rel)) if plan.alive[v]]
        ready = sum(1 for v in alive if not missing[v] and sub[v])
        waiting = sum(1 for v in alive if not missing[v] and not sub[v])
        return {**plan.stats(), "rlist": ready, "wlist": waiting, "slist": len(alive) - ready - waiting,
                "subrelation_tuples": sum(len(sub[v]) for v in alive), "live_results": len(self.results)}


def _order(item: tuple[int, Result]) -> tuple:
    return (item[1].tuples, item[1].edges, item[0])
