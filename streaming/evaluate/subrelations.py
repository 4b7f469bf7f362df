"""The sub-relations of the shared lattice's nodes: the filter phase of its evaluation.

:class:`SubRelations` keeps, for every node ``v`` of a
:class:`~streaming.evaluate.shared_plan.SharedLatticePlan` labelled ``R{L}``,
the sub-relation ``S[v]``: the keys of live ``R`` tuples containing at least
the words of ``L`` that join at least one tuple of ``S[c]`` for every child
``c`` (paper 000's Alg. 5, with a monotone label test so that a node is the
same for every keyword set it serves), with what reads it fast: per node the
keys of ``S[v]`` by the value its parents join on (``index``), its empty
children (``missing``), its parents with no empty child by label (the
paper's Wlist and Rlist) and its parent groups bound to the store; per
stored tuple the nodes it sits in (``member``); per relation and keyword mask
the node labels a tuple carries.

It moves a tuple into and out of one node (``_enter``, ``_leave``), and
follows the plan as keyword sets come and go: new nodes are filled from the
stored tuples (CNEvalStatic: leaves by one scan per relation, inner nodes by
a semijoin from their smallest child), released ones are cleared, and the
nodes every other keyword set uses keep their state.
:class:`~streaming.evaluate.shared.SharedLatticeEvaluator` extends it with the
op path and the results.
"""

from __future__ import annotations

import heapq
from typing import Any

from ..window import LiveStore, LiveTuple
from .shared_plan import CHILD, COLUMN, FK, HOLDS, SharedLatticePlan

__all__ = ["SubRelations", "UP_RELATION", "UP_ROWS", "UP_HOLDERS", "UP_COLUMN", "UP_READY", "UP_FK", "CHECKS",
           "ReadyEdges"]

# The fields of a parent group of _ups, ``(relation, rows, holders, column, ready, fk)``, and where an edge's
# checks start in :data:`ReadyEdges` (after its parent and edge index), which the op path indexes (shared.py
# imports them as C integers, so they stay Python objects here).
UP_RELATION, UP_ROWS, UP_HOLDERS, UP_COLUMN, UP_READY, UP_FK = 0, 1, 2, 3, 4, 5
CHECKS = 2

#: The ready edges into one child of the parents with one label and one way of joining it whose edges have
#: the same number of checks, in one flat tuple: ``(stride, edge, edge, ...)``, each edge ``stride`` fields,
#: ``parent, edge index`` followed by one check per other edge of the parent, three fields each,
#: ``parent_holds, column, what the parent tuple must be in``: the child's sub-relation (a parent holding
#: the FK: its value in ``column``) or the child's index on the FK (the parent's key). Made when a parent
#: becomes ready, so a parent tuple reached through an edge is tested without loading the parent's kids or
#: the children (they are non-empty, and their sub-relation and index objects are kept while they are); one
#: tuple for all of them, as the climb reads thousands of edges per op, most failing their first check, and
#: side by side they share cache lines (a tuple per edge put each in a cold line of its own).
ReadyEdges = tuple[Any, ...]
#: a tuple's node labels, the leaves they put it in, and those of its labels that inner nodes carry
LabelInfo = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
_NONE: LabelInfo = ((), (), ())
# above this many candidate words a tuple's labels are found by scanning the relation's labels
_SUBSET_WORDS = 10
# the sub-relation of a node no tuple has entered (most nodes): one shared empty set, not a set each
_EMPTY: frozenset = frozenset()


class SubRelations:
    """The sub-relation of every node of one stream's shared lattice, with its indexes and readiness."""

    def __init__(self, schema: Any, store: LiveStore):
        self.plan = SharedLatticePlan(schema)
        self.store = store
        self.sub: list[set | frozenset] = []  # an empty node's is _EMPTY until a tuple enters it
        # index[v][fk][value] = keys in S[v] whose column of fk equals value
        self.index: list[dict[str, dict[Any, set]]] = []
        self.missing: list[int] = []
        self.member: dict[str, dict[Any, set[int]]] = {name: {} for name in store.rows}
        # ready[c][(relation, parent_holds, fk)][L]: the edges into c of parents labelled L with no empty child
        # (the paper's Wlist and Rlist; a suspended node is not listed), one :data:`ReadyEdges` per number of
        # checks. A tuple, replaced whole when an edge comes or goes: the op path iterates it while entering
        # nodes can make parents ready, with no copy
        self._ready: list[dict[tuple[str, bool, str], dict[int, tuple[ReadyEdges, ...]]]] = []
        # per node: its parent groups bound to the store's dicts
        # (parent relation, parent rows, holders of the FK value or None, column, ready by label, FK)
        self._ups: list[tuple[tuple[str, dict, dict | None, str, dict, str], ...]] = []
        self._labels: dict[tuple[str, int], LabelInfo] = {}
        self._label_words: dict[str, int] = {}  # per relation: every word of its node labels
        self._labels_version = -1

    # -- the nodes of keyword sets coming and going ---------------------------------------

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
        kids, node = plan.kids[v], plan.ids[v]
        sub, index = self.sub, self.index
        stride = 3 * len(kids) - 1  # parent, edge index, three fields per other kid
        for ei, (c, parent_holds, fk, _) in enumerate(kids):
            by_label = self._ready[c][(relation, parent_holds, fk)]
            bundles = by_label.get(label, ())
            for i, same in enumerate(bundles):
                if same[0] == stride:
                    break
            else:
                i, same = len(bundles), (stride,)
            if ready:
                made: list[Any] = [node, ei]
                for ej, (child, holds, by, column) in enumerate(kids):
                    if ej != ei:
                        made += (holds, column, sub[child] if holds else index[child][by])
                same = same + tuple(made)
            else:
                at = 1
                while same[at] is not node or same[at + 1] != ei:  # ids are one object per node
                    at += stride
                same = same[:at] + same[at + stride:]
            bundles = bundles[:i] + ((same,) if len(same) > 1 else ()) + bundles[i + 1:]
            if bundles:
                by_label[label] = bundles
            else:
                del by_label[label]

    def _bind(self, c: int) -> None:
        """Bind node ``c``'s parent groups to the store and keep the value indexes its parents join on."""
        rows, referencing = self.store.rows, self.store.referencing
        groups = self.plan.up_joins[c]
        ready = self._ready[c]
        for join in [join for join in ready if join not in groups]:
            del ready[join]
        self._ups[c] = tuple((prel, rows[prel], referencing[(prel, fk)] if holds else None, column,
                              ready.setdefault((prel, holds, fk), {}), fk)
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

    def _refill(self) -> None:
        """Empty every live node and fill it afresh over the stored tuples (after the store was reloaded)."""
        plan = self.plan
        alive = [v for v in range(len(plan.rel)) if plan.alive[v]]
        for name in self.member:
            self.member[name].clear()
        for v in alive:
            self.sub[v] = _EMPTY
            self.index[v] = {fk: {} for fk in self.index[v]}
            self.missing[v] = len(plan.kids[v])
            for ready in self._ready[v].values():
                ready.clear()
        self._fill(alive)

    def _fill(self, nodes: list[int]) -> None:
        """CNEvalStatic for ``nodes`` (children before parents) over the stored tuples: new nodes, and
        nodes whose eligibility widened (the tuples they hold stay). A node that gains tuples has its
        parents filled after it too: a stored parent tuple may join only the new ones."""
        plan, rows_of, referencing, sub = self.plan, self.store.rows, self.store.referencing, self.sub
        gained: set[int] = set()
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
                            gained.add(v)
        # inner nodes by id, which puts children first (a node is created after its children); one with an
        # empty child holds nothing until that child gains a tuple, which queues it then (with no stored
        # tuple, as for a plan set before the first op, no node is walked at all)
        todo = [v for v in nodes if plan.kids[v] and not self.missing[v]]
        heapq.heapify(todo)
        queued = set(todo)
        for v in gained:
            self._queue_parents(v, todo, queued)
        while todo:
            v = heapq.heappop(todo)
            if self.missing[v]:
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
            entered = False
            for key in candidates:
                row = rows.get(key)
                if (row is not None and row.mask & label == label and key not in sub[v]
                        and plan.eligible(v, row.mask) and self._supported(v, key, row)):
                    self._enter(v, key, row)
                    entered = True
            if entered:
                self._queue_parents(v, todo, queued)

    def _queue_parents(self, v: int, todo: list[int], queued: set[int]) -> None:
        """Put the parents of ``v`` not yet queued on the fill's heap."""
        for _, by_label in self.plan.up_joins[v].values():
            for parents in by_label.values():
                for p, _ in parents:
                    if p not in queued:
                        queued.add(p)
                        heapq.heappush(todo, p)

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

    # -- one tuple into and out of one node --------------------------------------------

    def _enter(self, v: int, key: Any, row: LiveTuple) -> None:
        plan = self.plan
        if self.sub[v]:
            sub = self.sub[v]
            sub.add(key)
        else:  # the set first: a parent made ready here checks its tuples against it
            sub = self.sub[v] = {key}
            missing = self.missing
            for _, by_label in plan.up_joins[v].values():
                for parents in by_label.values():
                    for p, _ in parents:
                        missing[p] -= 1
                        if not missing[p]:
                            self._set_ready(p, True)
        members, node = self.member[plan.rel[v]], plan.ids[v]
        nodes = members.get(key)
        if nodes is None:
            members[key] = {node}
        else:
            nodes.add(node)
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
        nodes.discard(plan.ids[v])
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

    def _supported(self, v: int, key: Any, row: LiveTuple) -> bool:
        """Whether the tuple joins at least one tuple of every child's sub-relation (filling a node; the
        climb tests a ready edge's checks instead: :data:`ReadyEdges`)."""
        sub, index = self.sub, self.index
        for kid in self.plan.kids[v]:
            if kid[HOLDS]:
                if row.values[kid[COLUMN]] not in sub[kid[CHILD]]:
                    return False
            elif key not in index[kid[CHILD]][kid[FK]]:
                return False
        return True
