"""The shared evaluation of a stream: every saved query of a plan over one store, one window, one parse.

:class:`SharedEngine` is the state machine an evaluator (or ``run-plan``)
drives with ``apply(op)``. Per stream it keeps one tuple store and one
sliding window whose retention is the widest class window, classifies each
inserted tuple once against the stream's vocabulary (a bitmask: one bit per
keyword of any query) and once against every query's predicates (the query
mask, :mod:`streaming.sharing.admission`). Queries are grouped into sharing
classes (:mod:`streaming.sharing.matching`, mode ``match`` or ``widen``), each
evaluated once (:mod:`streaming.sharing.classes`) and filtered per member
(:mod:`streaming.sharing.delivery`); aggregate subscriptions share relaxed
windows (:mod:`streaming.sharing.windows`).

An op costs work only where it can matter: a tuple goes to the classes whose
keywords it contains and to those where one of its neighbours (a tuple it
references or that references it) sits in a lattice node (``LiveTuple.classes``);
a delete or an expiry goes to the classes the tuple sits in; event-time work
(a class or member window passing a tuple or result, a time window closing)
waits on one timer heap. A keyword-free tuple whose neighbours sit nowhere
costs the store and a few lookups, however many queries and classes there are.

Stream rules are those of :class:`~streaming.engine.StreamRules` (the op
moves the clock, then is judged against the store), so with queries of
different windows an op gets one verdict, against the widest window:
re-inserting a key that left a narrow window but not the widest is rejected
for every query (the one deliberate difference from running each query
alone; see ``docs/sharing.md``).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..clock import ClockGuard
from ..engine import StreamRules
from ..evaluate.results import Result
from ..evaluate.shared import SharedLatticeEvaluator
from ..keywords import tokens
from ..lattice import Lattice
from ..ops import Op, OpRejected
from ..schema import Schema
from ..window import SlidingWindow
from .admission import Admission
from .aggregates import AggregateClass
from .classes import ClassRuntime, Clock, FilterClass, KeywordClass
from .matching import ClassProperties, NarrowingRule, registration_aggregate_classes
from .properties import AggregateProperties, QueryProperties
from .regrouping import SHARING_MODES, Regrouping
from .timers import EventTimers

__all__ = ["SHARING_MODES", "SharedEngine"]

# up to this many vocabulary words a text is tested for each as a substring before it is tokenized
_PREFILTER_WORDS = 16

#: ``sink(query id, "add" | "remove", result)``
QuerySink = Callable[[int, str, Result], None]
#: ``sink(receivers, "add" | "remove", result)``: ``receivers`` is the mask of the bits of the queries the
#: change reaches (:meth:`SharedEngine.query_ids` names them)
DeliverySink = Callable[[int, str, Result], None]
#: ``sink(aggregate id, window end, value)``
AggregateSink = Callable[[int, float, Any], None]
#: the groups of a plan change: class index -> (properties, members by query bit)
Groups = Mapping[int, tuple[ClassProperties, Mapping[int, QueryProperties]]]


def _ignore(*_: Any) -> None:
    return None


class SharedEngine(StreamRules):
    """All queries and aggregate subscriptions of one stream, evaluated with sharing.

    Build it, call :meth:`set_plan` (again whenever the plan changes), then
    :meth:`apply` ops in order. Changes go to ``sink`` (one call per query,
    or, given ``delivery_sink``, one per change with the mask of the queries
    it reaches: a result of a class reaches many members at once) and window
    values to ``aggregate_sink`` as they happen, and ``forget`` hears of
    every tuple that leaves the store (deleted or expired); :meth:`results`
    gives a query's live set.
    """

    def __init__(self, schema: Schema, mode: str = "widen", sink: QuerySink = _ignore,
                 aggregate_sink: AggregateSink = _ignore, forget: Callable[[str, Any], None] = _ignore,
                 selection_kind: str = "hybrid",
                 selection_period: int = 10_000, selection_mu: float = 0.1,
                 narrowing: NarrowingRule = NarrowingRule(), guard: ClockGuard | None = None,
                 delivery_sink: DeliverySink | None = None):
        if mode not in SHARING_MODES:
            raise ValueError(f"sharing mode must be one of {', '.join(SHARING_MODES)}, got {mode!r}")
        super().__init__(schema, None, guard)
        self.mode = mode
        self.sink = sink
        self.delivery_sink = delivery_sink
        self.aggregate_sink = aggregate_sink
        self.forget = forget
        self.selection_args = (selection_kind, selection_period, selection_mu)
        self.narrowing = narrowing
        self.clock = Clock()
        self.timers = EventTimers(self.store)
        self._timer_heap = self.timers.heap  # read on every op (is a timer due?), not through self.timers
        self.queries: dict[int, QueryProperties] = {}  # bit -> properties
        self.bit_of: dict[int, int] = {}  # query id -> bit
        self._query_bits = 0  # the bits of self.queries
        self._aggregate_bits = 0  # the bits of the queries feeding an aggregate subscription
        self.class_of: dict[int, ClassRuntime] = {}  # query id -> class
        self.classes: list[ClassRuntime | None] = []
        self.vocabulary: dict[str, int] = {}
        self._keyword_words: tuple[str, ...] = ()
        self.network = SharedLatticeEvaluator(schema, self.store)
        self.network_busy = 0.0  # seconds the shared lattice spent evaluating ops
        self._kids: dict[frozenset[str], int] = {}  # keyword set -> its id in the shared lattice
        self._kid_tmax: dict[int, int] = {}
        self._classes_of_kid: dict[int, list[KeywordClass]] = {}
        self._filter_classes: dict[str, int] = {}
        self.admission = Admission(schema, {})
        self.aggregates: dict[int, AggregateProperties] = {}
        self.aggregate_classes: list[AggregateClass] = []
        self._aggregates_by_relation: dict[str, list[AggregateClass]] = {}
        self._aggregates_by_query: dict[int, list[AggregateClass]] = {}
        self._lattices: dict[tuple[int, int], Lattice] = {}
        self._searchable = {name: rel.searchable for name, rel in schema.relations.items()}
        self.class_evaluations = 0

    # -- the plan ----------------------------------------------------------------------

    def set_plan(self, queries: Sequence[QueryProperties], aggregates: Sequence[AggregateProperties] = (),
                 narrow_now: bool = False, others: Sequence[QueryProperties] = ()) -> set[int]:
        """Adopt a new plan; returns the ids of queries whose live sets were rebuilt (not sent to the sink).

        ``others`` are the stream's queries evaluated elsewhere (another
        evaluator of the stream): they are not evaluated here, but the store
        keeps tuples as long as their windows need, so this engine stores
        and judges every op as one engine of all the stream's queries would,
        and a class moved here is built over the same tuples.

        Queries keep their class while they stay unchanged; joining (or
        changed) queries are placed in registration order by the sharing
        mode; a class left by a member keeps its properties until
        :func:`~streaming.sharing.matching.should_narrow` (or ``narrow_now``)
        says to narrow it. The shared lattice evaluates each keyword set the
        classes need, at the largest Tmax of its classes (what a keyword set
        newly needs is evaluated over the stored tuples with CNEvalStatic);
        a class whose properties change is handed its results afresh.
        """
        wanted = {q.id: q for q in queries}
        if len(wanted) != len(queries):
            raise ValueError("query ids must be unique")
        old = {q.id: q for q in self.queries.values()}
        regrouping = Regrouping(self.live_classes(), self.mode)
        joining = [q for q in queries if old.get(q.id) != q]
        self._set_bits([qid for qid in old if wanted.get(qid) != old[qid]], joining, regrouping)
        self._set_vocabulary()
        self._set_admission()
        regrouping.join((self.bit_of[q.id], q) for q in joining)
        regrouping.narrow_classes(self.narrowing, narrow_now)
        touched = regrouping.touched
        retention = regrouping.retention(others)
        if retention != self.window.seconds:
            self._set_retention(retention)
            touched = set(regrouping.groups)  # every class's retention changed
        self._set_keyword_sets(regrouping.groups)
        rebuilt = {q.id for q in joining}
        rebuilt.update(self._set_classes(regrouping.groups, touched))
        self._set_routes()
        self._set_aggregates(aggregates)
        return rebuilt

    def _set_bits(self, leaving: Sequence[int], joining: Sequence[QueryProperties], regrouping: Regrouping) -> None:
        """Take the leaving queries (by id) out of their classes and free their bits; give each joining
        query the lowest bit not taken, but not a freed one (it may still sit in a class's delivery)."""
        freed = set()
        for qid in leaving:
            index = self.class_of.pop(qid).index
            bit = self.bit_of.pop(qid)
            del self.queries[bit]
            regrouping.leave(index, bit)
            freed.add(bit)
        taken = set(self.queries) | freed
        bit = 0
        for q in joining:
            while bit in taken:
                bit += 1
            taken.add(bit)
            self.bit_of[q.id] = bit
            self.queries[bit] = q
        self._query_bits = sum(1 << b for b in self.queries)

    def _set_admission(self) -> None:
        """The new plan's query predicates, and every stored tuple's query mask under them."""
        self.admission = Admission(self.schema, self.queries, *self.selection_args)
        for relation, rows in self.store.rows.items():
            for row in rows.values():
                row.qmask = self.admission.qmask(relation, row.values, observe=False)

    def _set_classes(self, groups: Groups, touched: set[int]) -> list[int]:
        """Make the touched classes what the regrouping says: drop the emptied ones, hand one whose
        properties and retention are unchanged its new members, build the others anew. Returns the ids
        of the members of the classes built anew."""
        rebuilt: list[int] = []
        for index in sorted(touched):
            props, members = groups[index]
            current = self._class(index)
            if not members:
                if current is not None:
                    current.detach()
                    self.classes[index] = None
                continue
            if current is not None and current.props == props and current.retention == self.window.seconds:
                current.set_members(members, self._deliver)
            else:
                if current is not None:
                    current.detach()
                current = self._new_class(index, props, members)
                current.build()
                rebuilt.extend(q.id for q in members.values())
            for q in members.values():
                self.class_of[q.id] = current
        return rebuilt

    def _rebuild_classes(self) -> None:
        """Evaluate the shared lattice and every class anew over the stored tuples (CNEvalStatic)."""
        self.network.rebuild()
        for cls in self.live_classes():
            cls.detach()
            rebuilt = self._new_class(cls.index, cls.props, cls.members)
            rebuilt.build()
            for q in rebuilt.members.values():
                self.class_of[q.id] = rebuilt
        self._set_routes()

    def _class(self, index: int) -> ClassRuntime | None:
        return self.classes[index] if index < len(self.classes) else None

    def _new_class(self, index: int, props: ClassProperties, members: Mapping[int, QueryProperties]) -> ClassRuntime:
        while len(self.classes) <= index:
            self.classes.append(None)
        common = (index, props, members, self.store, self.clock, self.window.seconds, self._deliver,
                  self.timers.schedule)
        cls: ClassRuntime
        if props.output == "results":
            cls = KeywordClass(*common, network=self.network, kid=self._kids[props.keywords])
        else:
            cls = FilterClass(*common)
        self.classes[index] = cls
        return cls

    def live_classes(self) -> list[ClassRuntime]:
        return [c for c in self.classes if c is not None]

    def _set_keyword_sets(self, groups: Groups) -> None:
        """Register with the shared lattice every keyword set the classes need, at the largest Tmax of
        its classes, and forget the others (first: a word's bit may be reused by a new word)."""
        needed: dict[frozenset[str], int] = {}
        for props, members in groups.values():
            if members and props.output == "results":
                needed[props.keywords] = max(needed.get(props.keywords, 0), props.tmax)
        for words in [w for w in self._kids if w not in needed]:
            kid = self._kids.pop(words)
            del self._kid_tmax[kid]
            self.network.remove_keyword_set(kid)
        for words, tmax in needed.items():
            kid = self._kids.get(words)
            if kid is None:
                kid = self._kids[words] = min(set(range(len(self._kids) + 1)) - set(self._kids.values()))
            elif self._kid_tmax[kid] == tmax:
                continue
            self._kid_tmax[kid] = tmax
            ordered = sorted(words)
            self.network.set_keyword_set(kid, [self.vocabulary[w] for w in ordered], self.lattice(len(ordered), tmax))

    def lattice(self, m: int, tmax: int) -> Lattice:
        """The CN lattice of ``m`` keywords and ``tmax`` on this schema (built once)."""
        key = (m, tmax)
        lattice = self._lattices.get(key)
        if lattice is None:
            lattice = self._lattices[key] = Lattice.build(self.schema, m, tmax)
        return lattice

    def _set_vocabulary(self) -> None:
        """Keep each keyword's bit while some query has it; new keywords take free bits; reclassify."""
        words = {k for q in self.queries.values() for k in q.keywords}
        vocabulary = {k: b for k, b in self.vocabulary.items() if k in words}
        for word in sorted(words - set(vocabulary)):
            vocabulary[word] = min(set(range(len(vocabulary) + 1)) - set(vocabulary.values()))
        if vocabulary == self.vocabulary:
            return
        self.vocabulary = vocabulary
        self._keyword_words = tuple(vocabulary)
        for relation, rows in self.store.rows.items():
            for row in rows.values():
                row.mask = self._classify(relation, row.values)

    def _set_retention(self, seconds: float | None) -> None:
        """A new widest window: re-queue the stored tuples and let the ones now too old expire."""
        self.window = SlidingWindow(seconds)
        stored = sorted(((row.ts, row.serial, relation, key, row) for relation, rows in self.store.rows.items()
                         for key, row in rows.items()), key=lambda item: (item[0], item[1]))
        for _, _, relation, key, row in stored:
            self.window.push(relation, key, row)
        if self.last_ts is not None and self.window.pending(self.last_ts):
            self._expire(self.last_ts)

    def _set_routes(self) -> None:
        """Which classes an op goes to: the keyword classes of each lattice keyword set, the filter
        classes of each relation."""
        self._classes_of_kid = {}
        self._filter_classes = {}
        for cls in self.live_classes():
            if isinstance(cls, KeywordClass):
                self._classes_of_kid.setdefault(cls.kid, []).append(cls)
            else:
                for relation in cls.props.relations:
                    self._filter_classes[relation] = self._filter_classes.get(relation, 0) | cls.bit

    def _set_aggregates(self, subs: Sequence[AggregateProperties]) -> None:
        """Group the aggregate subscriptions into shared windows; unchanged groups keep their state."""
        groups = registration_aggregate_classes(subs, self.mode)
        current = {(c.props, tuple(m.id for m in c.members)): c for c in self.aggregate_classes}
        classes = []
        for props, members in groups:
            cls = current.pop((props, tuple(m.id for m in members)), None)
            if cls is not None and cls.members != members:
                cls.alive = False
                cls = None
            if cls is None:
                cls = AggregateClass(props, members, self.aggregate_sink)
                if self.last_ts is not None:
                    self.timers.arm(cls, cls.start(self.last_ts))
            classes.append(cls)
        for cls in current.values():
            cls.alive = False
        self.aggregates = {s.id: s for s in subs}
        self.aggregate_classes = classes
        self._aggregates_by_relation = {}
        self._aggregates_by_query = {}
        for cls in classes:
            if cls.source_relation is not None:
                self._aggregates_by_relation.setdefault(cls.source_relation, []).append(cls)
            else:
                assert cls.source_query is not None
                self._aggregates_by_query.setdefault(cls.source_query, []).append(cls)
        self._aggregate_bits = sum(1 << self.bit_of[qid] for qid in self._aggregates_by_query if qid in self.bit_of)

    # -- ops ---------------------------------------------------------------------------

    def _classify(self, relation: str, values: dict) -> int:
        """The tuple's keywords as bits of the stream's vocabulary (with a few words, a substring test
        skips most text; with many, each token is looked up)."""
        mask = 0
        words = self._keyword_words
        if not words:
            return 0
        vocabulary = self.vocabulary
        prefilter = len(words) <= _PREFILTER_WORDS
        for attr in self._searchable[relation]:
            value = values.get(attr)
            if value.__class__ is str:
                low = value.casefold()
                if prefilter:
                    for word in words:
                        if word in low:
                            break
                    else:
                        continue
                for token in tokens(low):
                    bit = vocabulary.get(token)
                    if bit is not None:
                        mask |= 1 << bit
        return mask

    def apply(self, op: Op, qmask: int | None = None,
              hits: Iterable[str] | None = None) -> list:
        """Apply one op (changes go to the sinks).

        ``qmask`` is the global-result bitmap and ``hits`` the keywords of
        the stream's vocabulary the tuple contains, when the executors
        computed them with the current plan (else they are computed here).

        The op moves the stream clock first (docs/ops.md, "The stream
        clock"): what that time expires or closes goes to the sinks whatever
        the op's verdict. A late op or one the guard refuses raises
        :class:`~streaming.ops.OpRejected` and changes nothing; an insert of a
        live key or a delete of a missing key raises it after the clock moved.
        """
        relation, key, ts = op.relation, op.key, op.ts
        first = self.last_ts is None
        self._move_clock(op)
        self._time_passes(ts, first)
        insert = op.kind == "insert"
        if insert == (key in self.store.rows[relation]):
            self.rejected += 1
            raise OpRejected(self._refused_by_key(op))
        if insert:
            values = op.values
            assert values is not None
            q = (self.admission.qmask(relation, values) if qmask is None
                 else self.admission.from_bitmap(relation, qmask))
            if hits is None:
                mask = self._classify(relation, values)
            else:
                mask = 0
                for word in hits:
                    mask |= 1 << self.vocabulary[word]
            row = self.store.add(relation, key, values, mask, ts, q)
            self.window.push(relation, key, row)
            self._route_insert(relation, key, row)
            for agg in self._aggregates_by_relation.get(relation, ()):
                self.timers.arm(agg, agg.offer(ts, values))
        else:
            self._delete(relation, key)
        self.applied += 1
        return []

    def advance(self, ts: float) -> list:
        """Let event time reach ``ts`` with no op (windows expire, timers fire); a late time, or one the
        guard refuses, raises :class:`OpRejected` and changes nothing."""
        reason = self.clock_reason(ts)
        if reason is not None:
            raise OpRejected(reason)
        first = self.last_ts is None
        self.last_ts = ts
        self._time_passes(ts, first)
        return []

    def _time_passes(self, ts: float, first: bool) -> None:
        """The clock moved to ``ts``: aggregate windows start (``first``: the stream's first time),
        tuples leave the window and the timers due fire."""
        self.clock.now = ts
        if first:
            for cls in self.aggregate_classes:
                self.timers.arm(cls, cls.start(ts))
        if self.window.pending(ts):
            self._expire(ts)
        heap = self._timer_heap
        if heap and heap[0][0] <= ts:
            self.timers.fire(ts)

    def _route_insert(self, relation: str, key: Any, row: Any) -> None:
        """Evaluate an inserted tuple: the shared lattice once for every keyword set, and the filter
        classes of its relation that admit it."""
        if self._kids:
            started = perf_counter()
            added = self.network.insert(relation, key, row)
            self.class_evaluations += 1
            if added:
                now = self.clock.now
                classes_of = self._classes_of_kid
                for kid, result in added:
                    for cls in classes_of[kid]:
                        if cls.takes(result):
                            cls.delivery.add(result, now)
            self.network_busy += perf_counter() - started
        route = self._filter_classes.get(relation, 0)
        classes = self.classes
        while route:  # each filter class of the relation, lowest bit first
            low = route & -route
            route ^= low
            cls = classes[low.bit_length() - 1]
            if isinstance(cls, FilterClass) and cls.admits_new(relation, row):
                self.class_evaluations += 1
                cls.insert(relation, key, row)

    def _delete(self, relation: str, key: Any) -> list:
        row = self.store.rows[relation][key]
        if key in self.network.member[relation]:
            started = perf_counter()
            self.class_evaluations += 1
            classes_of = self._classes_of_kid
            for kid, result in self.network.delete(relation, key, row):
                for cls in classes_of[kid]:
                    cls.delivery.remove(result)
            self.network_busy += perf_counter() - started
        classes = self.classes
        member_of = row.classes
        while member_of:
            low = member_of & -member_of
            member_of ^= low
            cls = classes[low.bit_length() - 1]
            if isinstance(cls, FilterClass):
                self.class_evaluations += 1
                cls.delete(relation, key, row)
        self.store.remove(relation, key)
        self.forget(relation, key)
        return []

    def restore(self, ops: Iterable[Op], clock: float | None) -> None:
        """Take back stored tuples (inserts, in event-time order) with no evaluation, then evaluate
        every class at once (CNEvalStatic); ``clock`` is the stream time the evaluator had reached.

        For a restarted evaluator: the plan is set, nothing applied yet.
        """
        if self.applied or len(self.store):
            raise RuntimeError("restore() starts an engine: it must come before any op")
        store, window = self.store, self.window
        for op in ops:
            assert op.values is not None
            for relation, key in list(window.due(op.ts, store)):
                store.remove(relation, key)
                self.forget(relation, key)
            row = store.add(op.relation, op.key, op.values, self._classify(op.relation, op.values), op.ts,
                            self.admission.qmask(op.relation, op.values, observe=False))
            window.push(op.relation, op.key, row)
            self.last_ts = op.ts
        if clock is not None:
            self.last_ts = clock if self.last_ts is None else max(self.last_ts, clock)
            for relation, key in list(window.due(self.last_ts, store)):
                store.remove(relation, key)
                self.forget(relation, key)
        if self.last_ts is not None:
            self.clock.now = self.last_ts
        self._rebuild_classes()

    # -- event-time work -----------------------------------------------------------------

    def aggregate_state(self) -> dict[str, Any]:
        """The running windows of every aggregate class (JSON), keyed by the class's signature."""
        return {cls.signature: cls.aggregator.state() for cls in self.aggregate_classes}

    def restore_aggregates(self, states: Mapping[str, Any]) -> int:
        """Take back saved windows of the classes whose signature is unchanged; returns how many."""
        restored = 0
        for cls in self.aggregate_classes:
            state = states.get(cls.signature)
            cls.pending = None
            if state is not None:
                cls.aggregator.restore(state)
                self.timers.arm(cls, cls.aggregator.next_close)
                restored += 1
            elif self.last_ts is not None:  # a class without saved windows starts now
                self.timers.arm(cls, cls.start(self.last_ts))
        return restored

    # -- output ------------------------------------------------------------------------

    def _deliver(self, mask: int, kind: str, result: Result) -> None:
        """A class's change reaching the queries of ``mask`` (their bits)."""
        mask &= self._query_bits  # not a query that left, while its class waits to be rebuilt
        if not mask:
            return
        if self.delivery_sink is not None:
            self.delivery_sink(mask, kind, result)
        else:
            sink = self.sink
            for qid in self.query_ids(mask):
                sink(qid, kind, result)
        if kind == "add" and mask & self._aggregate_bits:
            rows, now = self.store.rows, self.clock.now
            for qid in self.query_ids(mask & self._aggregate_bits):
                for agg in self._aggregates_by_query[qid]:
                    self.timers.arm(agg, agg.offer_result(now, result, rows))

    def query_ids(self, mask: int) -> list[int]:
        """The ids of the queries whose bits ``mask`` has, lowest bit first."""
        queries = self.queries
        ids = []
        while mask:
            low = mask & -mask
            mask ^= low
            ids.append(queries[low.bit_length() - 1].id)
        return ids

    def results(self, query_id: int) -> list[Result]:
        """The live results of one query, sorted."""
        cls = self.class_of[query_id]
        return cls.delivery.results_of(self.bit_of[query_id])

    def apportion_busy(self) -> None:
        """Share the shared lattice's measured time among the keyword classes (what placement reads as
        each class's cost): each node's part split evenly among the keyword sets that use it, and a
        keyword set's part evenly among its classes."""
        plan = self.network.plan
        nodes = {kid: plan.nodes_of(kid) for kid in self._kids.values()}
        users: dict[int, int] = {}
        for reached in nodes.values():
            for v in reached:
                users[v] = users.get(v, 0) + 1
        total = len(users) or 1
        for kid, reached in nodes.items():
            share = sum(1 / users[v] for v in reached) / total
            classes = self._classes_of_kid.get(kid, [])
            for cls in classes:
                cls.busy = self.network_busy * share / len(classes)

    def stats(self) -> dict[str, Any]:
        classes = self.live_classes()
        self.apportion_busy()
        return {
            "sharing": self.mode,
            "queries": len(self.queries),
            "classes": len(classes),
            "lattices": len(self._kids),
            "network": self.network.stats(),
            "store_tuples": len(self.store),
            "window_seconds": self.window.seconds,
            "vocabulary": len(self.vocabulary),
            "ops_applied": self.applied,
            "ops_rejected": self.rejected,
            "class_evaluations": self.class_evaluations,
            "pending_timers": len(self._timer_heap),
            "aggregate_classes": len(self.aggregate_classes),
            "class_details": [c.stats() for c in classes],
        }

