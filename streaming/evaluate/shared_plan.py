"""The lattice of many keyword sets at once: every rooted sub-CN of every registered keyword set, stored once.

Paper 000's lattice shares sub-CNs among the CNs of one query; this one
shares them among queries. A node is a rooted subtree ``R{L}`` with its
children, where the label ``L`` is a set of the stream's vocabulary words (a
bitmask) and the node stands for the tuples of ``R`` that contain **at
least** the words of ``L``, joined with at least one tuple of every child.
That set does not depend on which query's lattice the node came from, so the
node is stored and evaluated once for all of them: an Order joined with a
Customer holding *texas* is one node for every keyword set containing
*texas*. A node that is a whole CN of keyword set ``K`` is a *root* of ``K``;
exactness (each tuple of a result holds exactly its node's words of ``K``,
which makes the trees MTJNTs and each found once) is applied where ``K``'s
results are formed (:class:`~streaming.evaluate.shared.SharedLatticeEvaluator`).

"At least" alone would let a node keep tuples no keyword set can use: with
one keyword set ``{a, b}``, a tuple holding both words sits in ``R{a}`` too,
where it can never be part of a result. So each node also keeps the words it
*forbids*: for every keyword set ``K`` reaching it, ``K``'s words outside its
label. A tuple is *eligible* at a node when, for some such ``K``, it holds
none of them (it is exact for ``K`` there); only eligible tuples enter. A
keyword set that starts to reach a node can only make more tuples eligible
(the node's eligibility *widened*, :meth:`SharedLatticePlan.register` says
which nodes); one that leaves makes fewer, and the tuples that were eligible
stay until they go (a superset of what every keyword set needs is still
correct, as results are formed exactly).

Keyword sets come and go with the plan: :meth:`SharedLatticePlan.register`
interns a keyword set's own :class:`~streaming.lattice.Lattice` node by node
(a node is its relation, label and children), :meth:`unregister` releases
its roots; a node lives while a registered root reaches it (reference
counts). The tables an evaluator walks (parents grouped by how a parent
tuple joins, leaves by label, labels per relation) follow each change.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..lattice import Lattice
from ..schema import Schema

__all__ = ["SharedLatticePlan", "spread", "CHILD", "HOLDS", "FK", "COLUMN", "PARENT", "EDGE"]

#: ``(child, parent_holds, fk, column)``: an edge from a node to a child
Kid = tuple[int, bool, str, str]
# The fields of a Kid and of a parent edge ``(parent, edge index)``, which the evaluator's hot loops index: its
# compiled modules import them as C integers (declared in their .pxd), so they stay Python objects here.
CHILD, HOLDS, FK, COLUMN = 0, 1, 2, 3
PARENT, EDGE = 0, 1
#: ``(relation, parent_holds, fk)``: how a parent tuple joins a child tuple
JoinKey = tuple[str, bool, str]
#: what interns a node: ``(relation, label, fk, parent_holds, child, fk, parent_holds, child, ...)``, its
#: children sorted, flat (one tuple per node: the plan holds one for each of tens of thousands of nodes)
NodeKey = tuple[Any, ...]
_NOTHING: frozenset[int] = frozenset()  # what an unregistered keyword set reaches


def spread(mask: int, bits: Sequence[int]) -> int:
    """Move bit ``i`` of ``mask`` to bit ``bits[i]``."""
    out = 0
    for i, b in enumerate(bits):
        if mask >> i & 1:
            out |= 1 << b
    return out


class SharedLatticePlan:
    """Interned nodes of every registered keyword set, with per-node tables (index = node id).

    * ``kids[v]``: ``(child, parent_holds, fk, column)`` per edge (``column``:
      the FK column in the holder, the parent if ``parent_holds``);
    * ``up_joins[c][(relation, parent_holds, fk)] = (column, by_label)``: the
      parents of ``c`` by how a parent tuple joins a tuple of ``c``;
      ``by_label[L]`` lists their ``(parent, edge index)`` labelled ``L``;
    * ``root_of[v]``: the keyword set (its id) ``v`` is a whole CN of, or -1;
    * ``leaves[(relation, L)]``: childless nodes; ``labels[relation][L]``:
      how many live nodes of the relation carry label ``L``, and ``inner``
      the labels of nodes with children;
    * ``alive[v]``: False once the node was released (ids are not reused);
    * ``forbids[v]``: the distinct forbidden-word masks of the keyword sets
      reaching ``v`` (a tuple is eligible when it holds none of one of them),
      counted in ``_forbid_counts[v]`` (a tuple aligned with it).

    ``version`` counts changes, so an evaluator's caches keyed on labels know
    when to start afresh.
    """

    def __init__(self, schema: Schema):
        self.schema = schema
        self.rel: list[str] = []
        # each node's id as one int object, which every set, dict and tuple holding the node shares: a lookup
        # finds it by identity, and the ids of a lattice's nodes sit together in memory (an int made at each
        # use would be compared by value, in a cold object of its own)
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.size: list[int] = []
        self.kids: list[tuple[Kid, ...]] = []
        self.up_joins: list[dict[JoinKey, tuple[str, dict[int, list[tuple[int, int]]]]]] = []
        self.refs: list[int] = []
        self.root_of: list[int] = []
        self.alive: list[bool] = []
        self.forbids: list[tuple[int, ...]] = []
        self._forbid_counts: list[tuple[int, ...]] = []  # per node, how many keyword sets forbid each mask
        self._key_of: list[NodeKey] = []
        self._by_key: dict[NodeKey, int] = {}
        self.leaves: dict[tuple[str, int], list[int]] = {}
        self.labels: dict[str, dict[int, int]] = {name: {} for name in schema.relations}
        self.inner: dict[tuple[str, int], int] = {}
        self.roots: dict[int, list[int]] = {}
        self.keyword_bits: dict[int, int] = {}
        self.live_nodes = 0
        self.version = 0
        self._reached: dict[int, set[int]] = {}  # keyword set -> the nodes its roots reach (nodes_of)
        self.fk_column_of: dict[str, dict[str, str]] = {
            name: {fk.name: fk.column for fk in rel.foreign_keys} for name, rel in schema.relations.items()
        }
        self.out_fks: dict[str, tuple[tuple[str, str, str], ...]] = {
            name: tuple((fk.name, fk.column, fk.target) for fk in rel.foreign_keys)
            for name, rel in schema.relations.items()
        }
        self.in_fks: dict[str, tuple[tuple[str, str], ...]] = {
            name: tuple((fk.holder, fk.name) for fk in schema.foreign_keys if fk.target == name)
            for name in schema.relations
        }

    # -- keyword sets ------------------------------------------------------------------

    def register(self, kid: int, bits: Sequence[int],
                 lattice: Lattice) -> tuple[list[int], list[int], list[int]]:
        """(Re-)register keyword set ``kid`` with its own lattice; ``bits[i]`` is the vocabulary bit of
        the lattice's keyword ``i``. Returns the nodes created (children before parents), the nodes
        released (those only the keyword set's previous registration reached) and the nodes that
        were there before whose eligibility widened (children before parents)."""
        before = self._unreach(kid)
        label_of = [spread(mask, bits) for mask in range(1 << len(bits))]
        ids: list[int] = []
        created: list[int] = []
        for relation, mask, size, edges in lattice.edge_rows():
            key = (relation, label_of[mask], *[x for edge in sorted([(fk, holds, ids[c]) for fk, holds, c in edges])
                                              for x in edge])
            v = self._by_key.get(key)
            if v is None:
                v = self._create(key, size)
                created.append(v)
            ids.append(v)
        roots = [ids[r] for r in lattice.roots]
        for v in roots:
            self.refs[v] += 1
        previous = self.roots.get(kid, [])
        for v in previous:
            self.root_of[v] = -1
        for v in roots:
            if self.root_of[v] not in (-1, kid):
                raise ValueError(f"node {v} is a whole CN of keyword sets {self.root_of[v]} and {kid}")
            self.root_of[v] = kid
        self.roots[kid] = roots
        # every node of a keyword set's lattice is a sub-CN of one of its CNs: its roots reach them all
        self._reached[kid] = set(ids)
        self.keyword_bits[kid] = sum(1 << b for b in bits)
        released: list[int] = []
        for v in previous:
            self._release(v, released)
        self.version += 1
        fresh, bits = set(created), self.keyword_bits[kid]
        widened = [v for v in sorted(self.nodes_of(kid))
                   if v not in fresh and _widens(before.get(v, self.forbids[v]), bits & ~self.mask[v])]
        self._reach(kid)
        return created, released, widened

    def unregister(self, kid: int) -> list[int]:
        """Forget keyword set ``kid``; returns the nodes released (parents before children)."""
        self._unreach(kid)
        released: list[int] = []
        self._reached.pop(kid, None)
        for v in self.roots.pop(kid, []):
            self.root_of[v] = -1
            self._release(v, released)
        self.keyword_bits.pop(kid, None)
        self.version += 1
        return released

    # -- nodes -------------------------------------------------------------------------

    def _create(self, key: NodeKey, size: int) -> int:
        relation, label = key[0], key[1]
        v = len(self.rel)
        kids: list[Kid] = []
        for ei in range((len(key) - 2) // 3):
            fk, parent_holds, c = key[2 + 3 * ei], key[3 + 3 * ei], key[4 + 3 * ei]
            holder = relation if parent_holds else self.rel[c]
            column = self.fk_column_of[holder][fk]
            kids.append((c, parent_holds, fk, column))
            self.refs[c] += 1
            groups = self.up_joins[c]
            join = (relation, parent_holds, fk)
            group = groups.get(join)
            if group is None:
                group = groups[join] = (column, {})
            parents_by_label = group[1]
            parents = parents_by_label.get(label)
            if parents is None:
                parents_by_label[label] = [(v, ei)]
            else:
                parents.append((v, ei))
        self.ids.append(v)
        self.rel.append(relation)
        self.mask.append(label)
        self.size.append(size)
        self.kids.append(tuple(kids))
        self.up_joins.append({})
        self.refs.append(0)
        self.root_of.append(-1)
        self.alive.append(True)
        self.forbids.append(())
        self._forbid_counts.append(())
        self._key_of.append(key)
        self._by_key[key] = v
        by_label = self.labels[relation]
        by_label[label] = by_label.get(label, 0) + 1
        if kids:
            self.inner[(relation, label)] = self.inner.get((relation, label), 0) + 1
        else:
            self.leaves.setdefault((relation, label), []).append(v)
        self.live_nodes += 1
        return v

    def _release(self, v: int, released: list[int]) -> None:
        self.refs[v] -= 1
        if self.refs[v] or self.root_of[v] != -1:
            return
        released.append(v)
        self.alive[v] = False
        del self._by_key[self._key_of[v]]
        relation, label = self.rel[v], self.mask[v]
        by_label = self.labels[relation]
        by_label[label] -= 1
        if not by_label[label]:
            del by_label[label]
        if self.kids[v]:
            self.inner[(relation, label)] -= 1
            if not self.inner[(relation, label)]:
                del self.inner[(relation, label)]
        else:
            leaves = self.leaves[(relation, label)]
            leaves.remove(v)
            if not leaves:
                del self.leaves[(relation, label)]
        self.live_nodes -= 1
        for ei, (c, parent_holds, fk, _) in enumerate(self.kids[v]):
            groups = self.up_joins[c]
            column, by_label_c = groups[(relation, parent_holds, fk)]
            parents = by_label_c[label]
            parents.remove((v, ei))
            if not parents:
                del by_label_c[label]
                if not by_label_c:
                    del groups[(relation, parent_holds, fk)]
            self._release(c, released)

    # -- eligibility -------------------------------------------------------------------

    def eligible(self, v: int, mask: int) -> bool:
        """Whether a tuple holding the words ``mask`` (at least ``v``'s label) is exact at ``v`` for one of
        the keyword sets reaching it."""
        for forbid in self.forbids[v]:
            if not mask & forbid:
                return True
        return False

    def _unreach(self, kid: int) -> dict[int, tuple[int, ...]]:
        """Take keyword set ``kid``'s forbidden words off the nodes it reaches; their masks before."""
        if kid not in self.roots:
            return {}
        before = {v: self.forbids[v] for v in self.nodes_of(kid)}
        self._count_forbids(kid, -1)
        return before

    def _reach(self, kid: int) -> None:
        """Put keyword set ``kid``'s forbidden words on the nodes it reaches (the lattice has changed)."""
        self._count_forbids(kid, 1)

    def _count_forbids(self, kid: int, step: int) -> None:
        """Count keyword set ``kid``'s forbidden words at each node it reaches ``step`` (1 or -1) more times."""
        bits = self.keyword_bits[kid]
        forbid_of: dict[int, int] = {}  # label -> the words forbidden there: one mask object for the nodes sharing it
        for v in self.nodes_of(kid):
            label = self.mask[v]
            forbid = forbid_of.get(label)
            if forbid is None:
                forbid = forbid_of[label] = bits & ~label
            masks, counts = self.forbids[v], self._forbid_counts[v]
            if forbid not in masks:
                self.forbids[v] = masks + (forbid,)
                self._forbid_counts[v] = counts + (step,)
                continue
            i = masks.index(forbid)
            if counts[i] + step:
                self._forbid_counts[v] = counts[:i] + (counts[i] + step,) + counts[i + 1:]
            else:
                self.forbids[v] = masks[:i] + masks[i + 1:]
                self._forbid_counts[v] = counts[:i] + counts[i + 1:]

    # -- inspection --------------------------------------------------------------------

    def nodes_of(self, kid: int) -> set[int] | frozenset[int]:
        """Every node a keyword set's roots reach, recorded when it registers (every node of its lattice:
        each is a sub-CN of one of its CNs). A node's children never change, and a node lives while a
        root reaches it."""
        return self._reached.get(kid, _NOTHING)

    def stats(self) -> dict[str, Any]:
        return {"lattice_nodes": self.live_nodes, "keyword_sets": len(self.roots),
                "roots": sum(len(r) for r in self.roots.values())}


def _widens(before: tuple[int, ...], forbid: int) -> bool:
    """Whether a keyword set forbidding the words ``forbid`` at a node makes tuples eligible there that
    were not with the masks ``before`` (a mask forbidding a subset of ``forbid`` admits them all)."""
    if forbid in before:
        return False
    for old in before:
        if not old & ~forbid:
            return False
    return True
