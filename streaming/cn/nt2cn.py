"""NT2CN: label network templates with relations and foreign keys (Alg. 3, lines 7-16).

The paper's recursive NT2CN(T, R) returns the CNs matching template ``T``
whose root is relation ``R``. Both ``T``'s subtrees and the partial CNs they
yield are shared across templates, so we run it as a dynamic program over
``(NT subtree, relation)`` and keep every partial CN once: the results *are*
the lattice nodes (Sect. 5.2) with their sharing already found.

The labelled subtrees of one ``(NT subtree s, relation R)`` pair come in
*blocks*: one block per choice of schema edge for each child of ``s``. Inside a
block the children range independently over the compatible labelled subtrees
of each child, so a block holds the full cartesian product of those lists and
is described by them alone. Rule-3 is checked per block: the root may hold
each foreign key towards at most one child, and a child that holds ``fk``
towards its parent may not also hold ``fk`` towards one of its own children.

Nothing is stored per node: a *record* stands for a set of blocks that
share a label ``R{K'}`` and lists, per child position, the edge choices its
nodes may take (each choice naming the child records it draws from). The
partial CNs of a hanging pair are split by the foreign keys their root holds
(parents filter on them): per position, the choices holding nothing form one
set and each choice holding a key stands alone. A whole-CN pair has no parent,
so all its blocks form one record whose size is counted in closed form
(Rule-3 only removes the combinations holding one key twice). Records are
expanded into blocks and nodes only when read (:meth:`CNDag.blocks`,
:meth:`CNDag.node`). Two passes: (1) records and their sizes, bottom-up over
the NT subtrees; (2) the records some whole CN uses, top-down, which fixes
the node ids (children first, whole CNs last).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate, chain, product
from math import prod
from operator import mul
from typing import Iterator, Sequence

from ..schema import Schema
from ..tuning import collector_paused
from .model import CandidateNetwork, CNChild, CNNode, edge_code, escape
from .templates import NTForest, NTNode, generate_nts, templates

__all__ = [
    "SchemaEdges",
    "CNDag",
    "Block",
    "Option",
    "Record",
    "valid_combinations",
    "nt2cn",
    "build_dag",
    "build_dag_cold",
    "dag_codes",
    "dag_cns",
]

# An edge choice for a child position: (edge label, foreign-key bit the parent
# holds or 0, number of child nodes, child records).
Option = tuple[int, int, int, tuple[int, ...]]
# A record: (relation index, keyword mask, size, edge choices per child position).
Record = tuple[int, int, int, tuple[Sequence[Option], ...]]
# A block: (first node id, relation index, mask, size, edge labels, child ids per position).
Block = tuple[int, int, int, int, tuple[int, ...], tuple[Sequence[int], ...]]


class SchemaEdges:
    """The schema's foreign keys seen from each relation, as edge choices for a child.

    ``incidences[r]`` lists ``(label, other, fk, parent_holds)``: a node of
    relation ``r`` may have a child of relation ``other`` joined by foreign
    key number ``fk`` (global index), held by the parent if ``parent_holds``.
    ``labels[label]`` is ``(fk name, parent_holds)``. A self-reference gives
    both directions.
    """

    def __init__(self, schema: Schema):
        self.relations: tuple[str, ...] = tuple(schema.relations)
        index = {name: i for i, name in enumerate(self.relations)}
        self.fks = schema.foreign_keys
        labels: dict[tuple[str, bool], int] = {}
        self.incidences: list[list[tuple[int, int, int, bool]]] = [[] for _ in self.relations]
        for f, fk in enumerate(self.fks):
            h, t = index[fk.holder], index[fk.target]
            for rel, other, holds in ((h, t, True), (t, h, False)):
                label = labels.setdefault((fk.name, holds), len(labels))
                self.incidences[rel].append((label, other, f, holds))
        self.labels: tuple[tuple[str, bool], ...] = tuple(labels)


@dataclass(slots=True)
class CNDag:
    """Every partial CN once, children before parents; the last ``len(roots)`` ids are whole CNs.

    Record ``j`` owns the ids ``starts[j]`` to ``starts[j + 1] - 1`` (none if no
    whole CN uses it). Its nodes are ``relations[rel]{mask}`` with ``size``
    nodes; their child at position ``p`` is joined by one of the edge choices
    ``positions[p]``. Each valid combination of choices (the parent holds no
    foreign key twice) is a block, blocks in :func:`itertools.product` order;
    a block's nodes are the product of the child ids of its choices, in
    product order too. :meth:`blocks` and :meth:`node` read them back.
    """

    relations: tuple[str, ...]
    labels: tuple[tuple[str, bool], ...]
    records: list[Record]
    starts: array
    roots: range
    _ids: dict[int, Sequence[int]] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return self.starts[-1]

    def record_of(self, i: int) -> int:
        """Index of the record holding node ``i``."""
        if not 0 <= i < self.starts[-1]:
            raise IndexError(f"node {i} out of range")
        return bisect_right(self.starts, i) - 1

    def child_ids(self, choice: Option) -> Sequence[int]:
        """Node ids of the child records of an edge choice, in order."""
        ids = self._ids.get(id(choice))
        if ids is None:
            starts = self.starts
            kids = choice[3]
            if len(kids) == 1:
                ids = range(starts[kids[0]], starts[kids[0] + 1])
            else:
                ids = list(chain.from_iterable([range(starts[k], starts[k + 1]) for k in kids]))
            # keyed by identity: one choice serves many blocks, and the records keep it alive
            self._ids[id(choice)] = ids
        return ids

    def record_blocks(self, j: int) -> Iterator[Block]:
        """The blocks of record ``j`` in id order."""
        rel, mask, size, positions = self.records[j]
        start = self.starts[j]
        memo = self._ids
        if not positions:
            yield start, rel, mask, size, (), ()
        elif len(positions) == 1:
            for o in positions[0]:
                ids = memo.get(id(o))
                if ids is None:
                    ids = self.child_ids(o)
                yield start, rel, mask, size, (o[0],), (ids,)
                start += len(ids)
        elif len(positions) == 2:
            second = []
            for o in positions[1]:
                ids = memo.get(id(o))
                second.append((o, self.child_ids(o) if ids is None else ids))
            for a in positions[0]:
                first = memo.get(id(a))
                if first is None:
                    first = self.child_ids(a)
                for b, ids in second:
                    if not a[1] & b[1]:
                        yield start, rel, mask, size, (a[0], b[0]), (first, ids)
                        start += len(first) * len(ids)
        else:
            for combo in valid_combinations(positions):
                lists = tuple([self.child_ids(o) for o in combo])
                yield start, rel, mask, size, tuple([o[0] for o in combo]), lists
                start += prod([len(ids) for ids in lists])

    def blocks(self) -> Iterator[Block]:
        """Every block in id order; ``product(*block[5])`` lists its nodes' children."""
        starts = self.starts
        for j in range(len(self.records)):
            if starts[j] != starts[j + 1]:
                yield from self.record_blocks(j)

    def node(self, i: int) -> tuple[int, int, int, tuple[int, ...], tuple[int, ...]]:
        """``(relation index, mask, size, edge labels, child ids)`` of node ``i``."""
        for start, rel, mask, size, labels, lists in self.record_blocks(self.record_of(i)):
            offset = i - start
            count = prod([len(ids) for ids in lists])
            if offset < count:
                kids = []
                for ids in reversed(lists):
                    offset, digit = divmod(offset, len(ids))
                    kids.append(ids[digit])
                kids.reverse()
                return rel, mask, size, labels, tuple(kids)
        raise AssertionError(f"node {i} is in no block of its record")


def valid_combinations(positions: Sequence[Sequence[Option]]) -> list[tuple[Option, ...]]:
    """Combinations of one edge choice per position in which the parent holds no foreign key twice."""
    if len(positions) == 1:
        return [(o,) for o in positions[0]]
    if len(positions) == 2:
        first, second = positions
        return [(a, b) for a in first for b in second if not a[1] & b[1]]
    return [combo for combo in product(*positions) if _holds_each_once(combo)]


def _holds_each_once(combo: Sequence[Option]) -> bool:
    held = 0
    for o in combo:
        if o[1] & held:
            return False
        held |= o[1]
    return True


def _conflicts(first: Sequence[Option], second: Sequence[Option]) -> int:
    """Nodes of the two-position combinations whose choices hold the same foreign key (Rule-3 forbids them)."""
    n = 0
    for _, bit, count, _ in first:
        if bit:
            for o in second:
                if o[1] == bit:
                    n += count * o[2]
    return n


def _group_count(positions: Sequence[Sequence[Option]]) -> int:
    """Number of nodes over all valid combinations: a dynamic program over the foreign keys held so far."""
    states = {0: 1}
    for opts in positions:
        nxt: dict[int, int] = {}
        for held, ways in states.items():
            for _, bit, count, _ in opts:
                if not bit & held:
                    nxt[held | bit] = nxt.get(held | bit, 0) + ways * count
        states = nxt
    return sum(states.values())


def _usable(positions: Sequence[Sequence[Option]]) -> list[Option]:
    """The edge choices that are part of some valid combination."""
    seen: dict[int, Option] = {}
    for combo in valid_combinations(positions):
        for o in combo:
            seen[id(o)] = o
    return list(seen.values())


class _Choices:
    """The edge choices for one child NT subtree below a node of one relation."""

    __slots__ = ("options", "total", "bits", "free", "_variants")

    def __init__(self) -> None:
        self.options: list[Option] = []
        self.total = 0  # child nodes over all choices
        self.bits = 0  # fks held by some choice
        self.free = False  # some choice holds nothing
        self._variants: list[tuple[tuple[Option, ...], int, int]] | None = None

    def variants(self) -> list[tuple[tuple[Option, ...], int, int]]:
        """``(choices, held bit, node count)`` a partial CN's record may take at this position.

        Parents filter partial CNs on the fks their root holds, so a record
        has one held set: all the choices holding nothing together, or one
        choice holding an fk.
        """
        if self._variants is None:
            free = tuple([o for o in self.options if not o[1]])
            out = [(free, 0, sum([o[2] for o in free]))] if free else []
            out.extend([((o,), o[1], o[2]) for o in self.options if o[1]])
            self._variants = out
        return self._variants


def nt2cn(schema: Schema, forest: NTForest) -> CNDag:
    """Label every NT of ``forest`` with every fitting relation and foreign key.

    The cyclic garbage collector is paused meanwhile: the DP allocates
    millions of acyclic tuples for large queries, and every collection would
    rescan all of them.
    """
    with collector_paused():
        return _nt2cn(schema, forest)


def _nt2cn(schema: Schema, forest: NTForest) -> CNDag:
    """Pass 1 over the NT subtrees bottom-up (roots come last in ``forest.nodes``), then pass 2."""
    labeller = _Labeller(SchemaEdges(schema))
    records = labeller.records
    leaf_records, root_records, inner_records = labeller.leaf_records, labeller.root_records, labeller.inner_records
    choices_of, choices = labeller.choices_of, labeller.choices
    root_ids = {n.id for n in forest.roots}
    first_root = -1
    for s in forest.nodes:
        is_root = s.id in root_ids
        if is_root and first_root < 0:
            first_root = len(records)
        if not s.children:
            leaf_records(s, is_root)
            continue
        tables = []  # the edge choices per parent relation of each child, made once per child subtree
        for c in s.children:
            table = choices_of.get(c.id)
            tables.append(choices(c.id) if table is None else table)
        if is_root:
            root_records(s, tables)
        else:
            inner_records(s, tables)
    return labeller.dag(len(records) if first_root < 0 else first_root)


class _Labeller:
    """The tables of the NT2CN dynamic program over ``(NT subtree, relation)``.

    Pass 1 appends records bottom-up: ``records[j]`` has ``counts[j]`` nodes,
    and a partial-CN record (they precede the whole-CN ones) has its root's
    held foreign keys in ``helds[j]``. ``records_of[s][r]`` lists the records
    of NT subtree ``s`` labelled with relation ``r``; ``choices_of[s][r]`` the
    edge choices for ``s`` as a child of a node of relation ``r``. ``to_mark``
    keeps (by id, alive) the choice lists whose every choice some whole CN
    uses; pass 2 (:meth:`used`) starts from them.
    """

    __slots__ = ("graph", "nrel", "towards", "records", "counts", "helds", "records_of", "choices_of", "to_mark")

    def __init__(self, graph: SchemaEdges) -> None:
        self.graph = graph
        self.nrel = nrel = len(graph.relations)
        # towards[x]: (label, r, fk, r holds it) for each way a node of relation x hangs below one of relation r
        self.towards: list[list[tuple[int, int, int, bool]]] = [[] for _ in range(nrel)]
        for r in range(nrel):
            for label, other, f, holds in graph.incidences[r]:
                self.towards[other].append((label, r, f, holds))
        self.records: list[Record] = []
        self.counts: list[int] = []
        self.helds: list[int] = []
        self.records_of: dict[int, list[list[int]]] = {}
        self.choices_of: dict[int, dict[int, _Choices]] = {}
        self.to_mark: dict[int, Sequence[Option]] = {}

    def choices(self, child: int) -> dict[int, _Choices]:
        """The edge choices for this child NT subtree per parent relation."""
        counts, helds, towards = self.counts, self.helds, self.towards
        table: dict[int, _Choices] = {}
        for x, cands in enumerate(self.records_of[child]):
            if not cands:
                continue
            every = tuple(cands)
            count_every = sum([counts[b] for b in cands])
            held_any = 0
            for b in cands:
                held_any |= helds[b]
            for label, r, f, holds in towards[x]:
                bit = 1 << f
                if holds:
                    o = (label, bit, count_every, every)
                elif held_any & bit:
                    # the child holds fk towards this parent, so not also towards one of its children
                    kids = tuple([b for b in cands if not helds[b] & bit])
                    if not kids:
                        continue
                    o = (label, 0, sum([counts[b] for b in kids]), kids)
                else:
                    o = (label, 0, count_every, every)
                entry = table.get(r)
                if entry is None:
                    entry = table[r] = _Choices()
                entry.options.append(o)
                entry.total += o[2]
                if o[1]:
                    entry.bits |= o[1]
                else:
                    entry.free = True
        self.choices_of[child] = table
        return table

    def leaf_records(self, s: NTNode, is_root: bool) -> None:
        """One single-node record per relation; a hanging leaf's roots hold no foreign key."""
        nrel, records, mask, size = self.nrel, self.records, s.mask, s.size
        if not is_root:
            self.records_of[s.id] = [[len(records) + r] for r in range(nrel)]
            self.helds.extend([0] * nrel)
        records.extend([(r, mask, size, ()) for r in range(nrel)])
        self.counts.extend([1] * nrel)

    def root_records(self, s: NTNode, tables: list[dict[int, _Choices]]) -> None:
        """The records of a whole-CN pair: every block is kept, one record per relation with any CN.

        Its size is counted in closed form, and the choices some valid
        combination uses go to ``to_mark``.
        """
        records, counts, to_mark, mask, size = self.records, self.counts, self.to_mark, s.mask, s.size
        if len(tables) == 1:
            table = tables[0]
            for r in sorted(table):
                opts = table[r].options
                records.append((r, mask, size, (opts,)))
                counts.append(table[r].total)
                to_mark[id(opts)] = opts
        elif len(tables) == 2:
            first, second = tables
            for r in sorted(first.keys() & second.keys()):
                x, y = first[r], second[r]
                a, b = x.options, y.options
                count = x.total * y.total
                if x.bits & y.bits:
                    count -= _conflicts(a, b)
                    if not count:
                        continue
                    # a choice is unusable only if the other position's sole choice holds its fk
                    if len(b) == 1 and b[0][1]:
                        a = [o for o in a if o[1] != b[0][1]]
                    if len(x.options) == 1 and x.options[0][1]:
                        b = [o for o in b if o[1] != x.options[0][1]]
                to_mark[id(a)] = a
                to_mark[id(b)] = b
                records.append((r, mask, size, (x.options, y.options)))
                counts.append(count)
        else:
            for r in sorted(set(tables[0]).intersection(*tables[1:])):
                entries = [t[r] for t in tables]
                per_position = tuple([e.options for e in entries])
                count = _group_count(per_position)
                if not count:
                    continue
                records.append((r, mask, size, per_position))
                counts.append(count)
                if all([e.free for e in entries]):
                    # with the others holding nothing, any one choice is part of a valid combination
                    for opts in per_position:
                        to_mark[id(opts)] = opts
                else:
                    usable = _usable(per_position)
                    to_mark[id(usable)] = usable

    def inner_records(self, s: NTNode, tables: list[dict[int, _Choices]]) -> None:
        """The records of a hanging pair: per relation, one per combination of held sets holding no fk twice.

        A record's size is the product of its positions' node counts and
        ``helds`` gets the fks its root holds (parents filter on them).
        """
        records, counts, helds, mask, size = self.records, self.counts, self.helds, s.mask, s.size
        mine: list[list[int]] = [[] for _ in range(self.nrel)]
        self.records_of[s.id] = mine
        for r in sorted(set(tables[0]).intersection(*tables[1:])):
            made = mine[r]
            if len(tables) == 1:
                for choice_set, held, count in tables[0][r].variants():
                    made.append(len(records))
                    records.append((r, mask, size, (choice_set,)))
                    counts.append(count)
                    helds.append(held)
                continue
            for combo in product(*[t[r].variants() for t in tables]):
                held = 0
                for _, bit, _ in combo:
                    if bit & held:
                        break
                    held |= bit
                else:
                    made.append(len(records))
                    records.append((r, mask, size, tuple([v[0] for v in combo])))
                    counts.append(prod([v[2] for v in combo]))
                    helds.append(held)

    def used(self, first_root: int) -> bytearray:
        """Pass 2: ``used[j]`` is 1 if some whole CN uses record ``j`` (they start at ``first_root``).

        Whole-CN records are used; a block uses every child record of its
        choices, so the choices in ``to_mark`` mark their child records, and
        each used partial-CN record marks those of its choices, top-down.
        """
        records = self.records
        used = bytearray(len(records))
        used[first_root:] = b"\x01" * (len(records) - first_root)
        for opts in self.to_mark.values():
            for o in opts:
                for k in o[3]:
                    used[k] = 1
        for j in range(first_root - 1, -1, -1):
            if used[j]:
                for opts in records[j][3]:
                    for o in opts:
                        for k in o[3]:
                            used[k] = 1
        return used

    def dag(self, first_root: int) -> CNDag:
        """The records with node ids fixed: a used record owns ``counts[j]`` consecutive ids."""
        used = self.used(first_root)
        starts = array("q", list(accumulate(map(mul, self.counts, used), initial=0)))
        roots = range(starts[first_root], starts[-1])
        return CNDag(self.graph.relations, self.graph.labels, self.records, starts, roots)


def build_dag(schema: Schema, m: int, tmax: int) -> CNDag:
    """InitNTGen: every CN of an ``m``-keyword query with at most ``tmax`` nodes, as a shared DAG.

    The templates depend on ``(m, tmax)`` only (Theorem 5.2) and are reused
    across calls; :func:`build_dag_cold` regenerates them.
    """
    return nt2cn(schema, templates(m, tmax))


def build_dag_cold(schema: Schema, m: int, tmax: int) -> CNDag:
    """:func:`build_dag` with the templates generated afresh (for timing the whole of InitNTGen)."""
    return nt2cn(schema, generate_nts(m, tmax))


def dag_codes(dag: CNDag) -> list[str]:
    """Canonical code (:func:`~streaming.cn.model.node_code`) of every node, children first."""
    out: list[str] = []
    rels = [escape(r) for r in dag.relations]
    labs = [edge_code(fk, holds) for fk, holds in dag.labels]
    for _, rel, mask, _, labels, lists in dag.blocks():
        head = f"{rels[rel]}{{{mask}}}"
        prefixes = [labs[e] + ":" for e in labels]
        # children have smaller ids, so their codes are in ``out`` already
        if not lists:
            out.append(head)
        elif len(lists) == 1:
            head += "[" + prefixes[0]
            out.extend([f"{head}{out[c]}]" for c in lists[0]])
        elif len(lists) == 2:
            head += "[" + prefixes[0]
            second = "," + prefixes[1]
            out.extend([f"{head}{out[c]}{second}{out[d]}]" for c, d in product(*lists)])
        else:
            out.extend(
                [f"{head}[{','.join([p + out[c] for p, c in zip(prefixes, kids)])}]" for kids in product(*lists)]
            )
    return out


def dag_cns(dag: CNDag, codes: list[str] | None = None) -> list[CandidateNetwork]:
    """The whole CNs of ``dag`` as objects; sub-CN node objects are shared."""
    codes = dag_codes(dag) if codes is None else codes
    labels = dag.labels
    first_root = dag.roots.start
    made: list[CNNode] = []
    sizes: list[int] = []  # of the roots
    for start, rel, mask, size, edges, lists in dag.blocks():
        relation = dag.relations[rel]
        edge_labels = [labels[e] for e in edges]
        block = [
            CNNode(relation, mask, tuple([CNChild(fk, holds, made[c]) for (fk, holds), c in zip(edge_labels, kids)]))
            for kids in product(*lists)
        ]
        made.extend(block)
        if start >= first_root:
            sizes.extend([size] * len(block))
    return [CandidateNetwork(made[r], sizes[r - first_root], codes[r]) for r in dag.roots]
