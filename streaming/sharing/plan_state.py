"""The shared engine's plan state: what a plan change sets up and every op reads.

:class:`PlanState` holds, over one stream's store and window: each query's
bit (``queries``, ``bit_of``), the sharing classes (``classes``,
``class_of``), the stream's vocabulary (one bit per keyword of any query)
and the query predicates (``admission``) every stored tuple is masked with,
the keyword sets the shared lattice evaluates (``network``), the routes an
op follows to the classes, the aggregate classes, the event-time timers the
classes schedule on (:mod:`streaming.sharing.timers`), and the store's
retention (the widest class window). :meth:`PlanState.set_plan` adopts a new
plan and rebuilds only what the change touches; how the queries are
regrouped into classes is :mod:`streaming.sharing.regrouping`.

:class:`~streaming.sharing.engine.SharedEngine` extends it with the op path,
which reads these attributes on ``self`` (no indirection per op), delivers
the classes' changes (:meth:`PlanState._deliver`) and takes tuples out of the
store (``_delete``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ..clock import ClockGuard
from ..engine import StreamRules
from ..evaluate.results import Result
from ..evaluate.shared import SharedLatticeEvaluator
from ..keywords import tokens
from ..lattice import Lattice
from ..schema import Schema
from ..tuning import building_long_lived
from ..window import SlidingWindow
from .admission import Admission
from .aggregates import AggregateClass
from .classes import ClassRuntime, Clock, FilterClass, KeywordClass
from .matching import ClassProperties, NarrowingRule, registration_aggregate_classes
from .properties import AggregateProperties, QueryProperties
from .regrouping import SHARING_MODES, Regrouping
from .timers import EventTimers

__all__ = ["PlanState"]

# up to this many vocabulary words a text is tested for each as a substring before it is tokenized
_PREFILTER_WORDS = 16
# the vocabulary bits of this many distinct text values are kept (text columns repeat: states, titles, notes),
# of values up to this long (a long text rarely repeats; kept, 16,384 of them would hold megabytes)
_TEXT_MASKS = 16_384
_TEXT_KEPT_CHARS = 256

#: the groups of a plan change: class index -> (properties, members by query bit)
Groups = Mapping[int, tuple[ClassProperties, Mapping[int, QueryProperties]]]


class PlanState(StreamRules):
    """The queries, sharing classes, vocabulary, lattice keyword sets, routes and aggregate classes of one
    stream's plan, over its store and window; :meth:`set_plan` changes them.

    ``selection`` is the (kind, period, mu) of the query predicates'
    adaptive selection (:class:`~streaming.sharing.admission.Admission`).
    """

    def __init__(self, schema: Schema, mode: str, aggregate_sink: Callable[[int, float, Any], None],
                 selection: tuple[str, int, float], narrowing: NarrowingRule, guard: ClockGuard | None):
        if mode not in SHARING_MODES:
            raise ValueError(f"sharing mode must be one of {', '.join(SHARING_MODES)}, got {mode!r}")
        super().__init__(schema, None, guard)
        self.mode = mode
        self.aggregate_sink = aggregate_sink
        self.selection_args = selection
        self.narrowing = narrowing
        self.clock = Clock()
        self.timers = EventTimers(self.store)
        self.queries: dict[int, QueryProperties] = {}  # bit -> properties
        self.bit_of: dict[int, int] = {}  # query id -> bit
        self._query_bits = 0  # the bits of self.queries
        self._aggregate_bits = 0  # the bits of the queries feeding an aggregate subscription
        self.class_of: dict[int, ClassRuntime] = {}  # query id -> class
        self.classes: list[ClassRuntime | None] = []
        self.vocabulary: dict[str, int] = {}
        self._keyword_words: tuple[str, ...] = ()
        self._text_masks: dict[str, int] = {}  # a text value -> its vocabulary bits, while the vocabulary holds
        self._searchable = {name: rel.searchable for name, rel in schema.relations.items()}
        self.network = SharedLatticeEvaluator(schema, self.store)
        self._kids: dict[frozenset[str], int] = {}  # keyword set -> its id in the shared lattice
        self._kid_tmax: dict[int, int] = {}
        self._lattices: dict[tuple[int, int], Lattice] = {}
        self._classes_of_kid: dict[int, list[KeywordClass]] = {}
        self._filter_classes: dict[str, int] = {}  # relation -> the bits of its filter classes
        self.admission = Admission(schema, {})
        self.aggregates: dict[int, AggregateProperties] = {}
        self.aggregate_classes: list[AggregateClass] = []
        self._aggregates_by_relation: dict[str, list[AggregateClass]] = {}
        self._aggregates_by_query: dict[int, list[AggregateClass]] = {}

    def _deliver(self, mask: int, kind: str, result: Result) -> None:
        """A class's change reaching the queries of ``mask`` (their bits): the sink every class is given."""
        raise NotImplementedError

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
        with building_long_lived():  # the plan's tables and lattice nodes live until the plan changes
            return self._set_plan(queries, aggregates, narrow_now, others)

    def _set_plan(self, queries: Sequence[QueryProperties], aggregates: Sequence[AggregateProperties],
                  narrow_now: bool, others: Sequence[QueryProperties]) -> set[int]:
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
        self._text_masks = {}
        for relation, rows in self.store.rows.items():
            for row in rows.values():
                row.mask = self._classify(relation, row.values)

    def _classify(self, relation: str, values: dict) -> int:
        """The tuple's keywords as bits of the stream's vocabulary (each distinct short text value's bits
        are kept, up to :data:`_TEXT_MASKS` of them, and found once)."""
        mask = 0
        if not self._keyword_words:
            return 0
        known = self._text_masks
        for attr in self._searchable[relation]:
            value = values.get(attr)
            if value.__class__ is str:
                bits = known.get(value)
                if bits is None:
                    bits = self._text_bits(value)
                    if len(value) <= _TEXT_KEPT_CHARS:
                        if len(known) >= _TEXT_MASKS:
                            known.clear()
                        known[value] = bits
                mask |= bits
        return mask

    def _text_bits(self, value: str) -> int:
        """One text value's vocabulary bits (with a few words, a substring test skips most text; with
        many, each token is looked up)."""
        words = self._keyword_words
        low = value.casefold()
        if len(words) <= _PREFILTER_WORDS:
            for word in words:
                if word in low:
                    break
            else:
                return 0
        vocabulary = self.vocabulary
        bits = 0
        for token in tokens(low):
            bit = vocabulary.get(token)
            if bit is not None:
                bits |= 1 << bit
        return bits

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
