"""Shared evaluation of a group: one pass over the input produces the group's stream, post-processed per member.

* **items** (structure-preserving stream): an item is in the stream if one
  of the group's output conditions holds; it is projected to the outputs
  whose condition holds (Fig. 5's template). Each member runs its own query
  on that stream (post-processing, Sect. 3.2.3); windowed members build their
  windows from it.
* **aggregates**: one :class:`SharedWindowAggregator` per aggregated source
  (path and pre-selection) over the group's relaxed window (RELAXWINDOW,
  SELECTWINDOWS); a member's values come from the relaxed instances' partials,
  then its post-selection (existence per comparison, kept as ``max`` of 0/1),
  its conditions on values and its element construction.
* **join** (full or selective join-result sharing): one step join over the
  group's windows (the larger sizes) and relaxed pair condition; each member
  keeps the pairs inside its own windows (SELECTJOINRESULT) that pass its
  condition.
* **windows** (selective window sharing): each input's items are kept once
  in relaxed window instances; each member assembles its windows from them
  (SELECTWINDOWS) and joins them itself.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from functools import lru_cache
from typing import Any

from lxml import etree

from ..sharing.windows import SharedWindowAggregator, WindowSubscriber, relax_window
from .alone import AloneEvaluator, Entered, aggregate_value, completed_ends, first_end, inside, window_position
from .apt import APF, APT
from .construct import ItemValues, construct, serialize
from .matching import pair_condition
from .paths import split
from .planner import Group
from .predicates import DNF, FALSE, Atom, disjoin, evaluate
from .translate import Input

__all__ = ["GroupRunner", "runner_for", "project", "xml_size"]

_RECORD_BYTES = 96
"""Size of one serialized partial (count, sum, min, max of one source in one relaxed instance)."""
_ITEMS = "#items"
"""The source of an aggregates group that counts every entering item (which instances are empty)."""


class GroupRunner:
    """Evaluates one group; ``push`` returns each member's new result items."""

    def __init__(self, group: Group):
        self.group = group
        self.bytes = 0
        self.records = 0

    def push(self, stream: str, item: etree._Element, values: ItemValues) -> dict[str, list[str]]:
        """Take one item (``values``: its values, read once for every group); return each member's new results."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        return {**self.group.describe(), "stream_bytes": self.bytes, "stream_records": self.records}


def runner_for(group: Group) -> GroupRunner:
    kind = group.kind
    if kind == "items":
        return ItemsRunner(group)
    if kind == "aggregates":
        return AggregatesRunner(group)
    if kind == "join":
        return JoinRunner(group)
    return WindowsRunner(group)


@lru_cache(maxsize=1024)
def _plan(kept: tuple[tuple[str, ...], ...]) -> dict[tuple[str, ...], bool]:
    """Steps below the item -> True (copy the subtree) or False (keep the element, look at its children)."""
    plan: dict[tuple[str, ...], bool] = {}
    for steps in kept:
        for i in range(len(steps)):
            plan.setdefault(steps[:i], False)
        plan[steps] = True
    return plan


def project(item: etree._Element, item_path: str, kept: list[str]) -> etree._Element:
    """A copy of ``item`` with the subtrees at ``kept`` paths and their ancestors only (projection)."""
    depth = len(split(item_path))
    plan = _plan(tuple(sorted(split(k)[depth:] for k in kept)))

    def keep(element: etree._Element, steps: tuple[str, ...]) -> etree._Element | None:
        action = plan.get(steps)
        if action is None:
            return None
        if action:
            whole = copy.deepcopy(element)
            whole.tail = None
            return whole
        out = etree.Element(element.tag, dict(element.attrib))
        for child in element:
            if isinstance(child.tag, str):
                sub = keep(child, steps + (child.tag,))
                if sub is not None:
                    out.append(sub)
        return out
    return keep(item, ()) if kept else etree.Element(item.tag)


def xml_size(element: etree._Element) -> int:
    """Bytes of ``element`` serialized (what shipping it costs)."""
    return len(etree.tostring(element))


class ItemsRunner(GroupRunner):
    def __init__(self, group: Group):
        super().__init__(group)
        apt = group.abstraction
        assert isinstance(apt, APT)
        self.apt = apt
        self.outputs = list(apt.outputs().items())
        self.filter = disjoin(FALSE, *(c for _, c in self.outputs))
        self.members = [(m.name, AloneEvaluator(m.sub)) for m in group.members]

    def push(self, stream: str, item: etree._Element, values: ItemValues) -> dict[str, list[str]]:
        if stream != self.apt.stream:
            return {}
        if not values.holds(self.filter):
            return {}
        kept = [p for p, c in self.outputs if values.holds(c)]
        shared = project(item, self.apt.item_path, kept)
        self.bytes += xml_size(shared)
        self.records += 1
        # members read the values the group already read; they construct their results from the shared item
        return {name: ev.push(stream, shared, values) for name, ev in self.members}


class AggregatesRunner(GroupRunner):
    def __init__(self, group: Group):
        super().__init__(group)
        apt = group.abstraction
        assert isinstance(apt, APT) and apt.window is not None
        self.apt = apt
        window = apt.window
        self.kind = window.kind
        self.reference = window.reference
        self.pre = window.pre
        self.relaxed = relax_window([(window.size, window.step)] +
                                    [(w.size, w.step) for w in (m.sub.inputs[0].window for m in group.members)])
        self.post_atoms: list[Atom] = sorted({a for conj in window.post.any_of for a in conj},
                                             key=lambda a: a.render())
        subscribers: dict[str, list[WindowSubscriber]] = defaultdict(list)
        self.source_pre: dict[str, DNF] = {}
        self.source_path: dict[str, str] = {}
        for m in group.members:
            w = m.sub.inputs[0].window
            for let in m.sub.lets:
                agg = let.aggregate
                subscribers[agg.source].append(WindowSubscriber((m.name, let.var), w.size, w.step, agg.function))
                self.source_pre[agg.source] = agg.pre
                self.source_path[agg.source] = agg.path
            for i, _ in enumerate(self.post_atoms):
                subscribers[f"#post{i}"].append(WindowSubscriber((m.name, f"#post{i}"), w.size, w.step, "max"))
            # every entering item: its windows are empty exactly where the member's instances are, so it emits
            # every instance the member evaluates alone (the other sources' thinned ones among them)
            subscribers[_ITEMS].append(WindowSubscriber((m.name, _ITEMS), w.size, w.step, "count"))
        self.aggregators = {source: SharedWindowAggregator(self.kind, subs, relaxed=self.relaxed)
                            for source, subs in subscribers.items()}
        self.members = {m.name: m.sub for m in group.members}
        self.order = [m.name for m in group.members]
        self.item_path = apt.item_path

    def push(self, stream: str, item: etree._Element, values: ItemValues) -> dict[str, list[str]]:
        if stream != self.apt.stream:
            return {}
        if not values.holds(self.pre):
            return {}
        position = float(values((self.reference, None, "number"))) if self.kind == "time" else None
        emitted: dict[tuple[str, float], dict[str, Any]] = defaultdict(dict)
        for source, aggregator in self.aggregators.items():
            before = aggregator.relaxed_instances
            if source == _ITEMS:
                emissions = aggregator.add(position, 0.0)
            elif source.startswith("#post"):
                atom = self.post_atoms[int(source[5:])]
                value = 1.0 if values.atom(atom) else 0.0
                emissions = aggregator.add(position, value)
            elif values.holds(self.source_pre[source]):
                path = self.source_path[source]
                value = 0.0 if path == self.item_path else float(values((path, None, "number")))
                emissions = aggregator.add(position, value)
            else:
                emissions = aggregator.advance(position)
            self.records += aggregator.relaxed_instances - before
            for e in emissions:
                name, var = e.key
                emitted[(name, e.window_end)][var] = e.value
        self.bytes = self.records * _RECORD_BYTES
        out: dict[str, list[str]] = defaultdict(list)
        for end in sorted({end for _, end in emitted}):
            for name in self.order:
                found = emitted.get((name, end))
                if found is not None:
                    out[name] += self._results(self.members[name], found)
        return out

    def _results(self, sub, found: dict[str, Any]) -> list[str]:
        """A member's results of one instance. A source thins its empty windows on its own (first and last
        of those one item closes), so a value it did not emit for an instance the member evaluates is the
        value of an empty window."""
        if not sub.post.is_true:
            flags = {atom: found.get(f"#post{i}") == 1.0 for i, atom in enumerate(self.post_atoms)}
            if not any(all(flags.get(a, False) for a in conj) for conj in sub.post.any_of):
                return []
        binding = {let.var: found[let.var] if let.var in found else aggregate_value(let.aggregate.function, [])
                   for let in sub.lets}
        keys = {let.aggregate.key: binding[let.var] for let in sub.lets}
        if not evaluate(sub.having, lambda dim: keys.get(dim[0])):
            return []
        binding[sub.inputs[0].var] = []
        return [serialize(r) for r in construct(sub, binding, lambda dim: None)]


class _JoinState:
    """Per-input windows of a step join: entered items, the next instance end, the last completed one.

    ``reaches`` (per input, default ``min(Δ, μ)``) is how far past its newest
    item an instance may still hold something its readers need (a new item,
    or an item at all for windows built from these instances); ``steps`` (per
    input, default ``(μ,)``) are the steps of the windows read from it. Of
    the instances an item completes beyond that reach, only the first and the
    last on each step are returned.
    """

    def __init__(self, windows: list[tuple[str, int, int]], reaches: list[int] | None = None,
                 steps: list[tuple[int, ...]] | None = None):
        self.windows = windows  # (kind, size, step) per input
        self.reaches = reaches or [min(size, step) for _, size, step in windows]
        self.steps = steps or [(step,) for _, _, step in windows]
        self.entered: list[list[Entered]] = [[] for _ in windows]
        self.counts = [0 for _ in windows]
        self.next_end: list[float | None] = [None for _ in windows]
        self.last_end: list[float | None] = [None for _ in windows]

    def arrive(self, index: int, entered: Entered) -> list[float]:
        """Add an entered item; return the ends of the instances of input ``index`` it completes, in order."""
        kind, _size, step = self.windows[index]
        self.counts[index] += 1
        items = self.entered[index]
        if kind == "count":
            items.append(entered)
            return [float(self.counts[index])] if self.counts[index] % step == 0 else []
        if self.next_end[index] is None:
            self.next_end[index] = first_end(entered.position, step)
        reach = items[-1].position + self.reaches[index] if items else -math.inf
        ends, self.next_end[index] = completed_ends(self.next_end[index], entered.position, reach, self.steps[index])
        items.append(entered)
        return ends

    def content(self, index: int, end: float | None, size: int | None = None) -> list[Entered]:
        if end is None:
            return []
        kind, wsize, _ = self.windows[index]
        size = wsize if size is None else size
        return [e for e in self.entered[index] if inside(e.position, end, size, kind)]

    def trim(self, index: int, horizon: float) -> None:
        """Forget items no window can reach any more (older than ``horizon`` positions before the newest end)."""
        last = self.last_end[index]
        if last is not None:
            self.entered[index] = [e for e in self.entered[index] if e.position >= last - horizon]


def _entering(streams: list[str], pres: list[DNF], inputs: tuple[Input, ...], state: _JoinState, stream: str,
              item: etree._Element, values: ItemValues) -> list[tuple[int, Entered]]:
    """The inputs an item of ``stream`` enters (it passes their pre-selection), with its window position."""
    out = []
    for index, name in enumerate(streams):
        if name != stream:
            continue
        if values.holds(pres[index]):
            position = window_position(inputs[index], values, state.counts[index] + 1)
            out.append((index, Entered(item, position, values)))
    return out


class JoinRunner(GroupRunner):
    def __init__(self, group: Group):
        super().__init__(group)
        apf = group.abstraction
        assert isinstance(apf, APF) and apf.join is not None
        self.apf = apf
        self.streams = [t.stream for t in apf.trees]
        self.pres = [t.window.pre for t in apf.trees]
        self.condition = pair_condition(apf)
        self.state = _JoinState([(t.window.kind, t.window.size, t.window.step) for t in apf.trees])
        self.members = [(m.name, m.sub, AloneEvaluator(m.sub)) for m in group.members]
        self.item_paths = [t.item_path for t in apf.trees]
        self.kept = [list(t.outputs()) for t in apf.trees]
        self.first = group.members[0].sub.inputs

    def push(self, stream: str, item: etree._Element, values: ItemValues) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for index, entered in _entering(self.streams, self.pres, self.first, self.state, stream, item, values):
            for end in self.state.arrive(index, entered):
                self._update(index, end, out)
            self.state.trim(index, 2 * max(w[1] + w[2] for w in self.state.windows))
        return out

    def _update(self, index: int, end: float, out: dict[str, list[str]]) -> None:
        kind, size, step = self.state.windows[index]
        new = [e for e in self.state.content(index, end) if not inside(e.position, end - step, size, kind)]
        other = 1 - index
        other_end = self.state.last_end[other]
        current = self.state.content(other, other_end)
        self.state.last_end[index] = end
        for a, b in ([(x, y) for x in new for y in current] if index == 0 else
                     [(x, y) for x in current for y in new]):
            pair = ItemValues({self.streams[0]: a.item, self.streams[1]: b.item})
            if not pair.holds(self.condition):
                continue
            self.records += 1
            self.bytes += sum(xml_size(project(e.item, self.item_paths[i], self.kept[i])) for i, e in ((0, a), (1, b)))
            ends = (end, other_end) if index == 0 else (other_end, end)
            for name, sub, ev in self.members:
                windows = [inp.window for inp in sub.inputs]
                if all(inside(e.position, ends[i], windows[i].size, windows[i].kind) for i, e in ((0, a), (1, b))):
                    out[name] += ev.pair_results(a, b)


class WindowsRunner(GroupRunner):
    """Selective window sharing: relaxed instances per input, each member joins its SELECTWINDOWS windows."""

    def __init__(self, group: Group):
        super().__init__(group)
        apf = group.abstraction
        assert isinstance(apf, APF)
        self.streams = [t.stream for t in apf.trees]
        self.pres = [t.window.pre for t in apf.trees]
        self.relaxed = [(t.window.kind, t.window.size, t.window.step) for t in apf.trees]
        member_steps = [[m.sub.inputs[i].window.step for m in group.members] for i in range(len(apf.trees))]
        # every relaxed instance that holds an item is kept; past them, each member's first and last instance
        # (a member instance holding a new item ends less than its step past the newest item: it is the first)
        self.shared = _JoinState(self.relaxed, [size for _, size, _ in self.relaxed],
                                 [tuple(dict.fromkeys([step, *steps])) for (_, _, step), steps in
                                  zip(self.relaxed, member_steps)])
        self.instances: list[dict[float, list[Entered]]] = [{} for _ in apf.trees]
        self.item_paths = [t.item_path for t in apf.trees]
        self.kept = [list(t.outputs()) for t in apf.trees]
        self.members = [(m.name, m.sub, AloneEvaluator(m.sub)) for m in group.members]
        self.last: dict[str, list[float | None]] = {m.name: [None, None] for m in group.members}
        self.first = group.members[0].sub.inputs

    def select_windows(self, index: int, end: float, size: int) -> list[Entered]:
        """SELECTWINDOWS: the window of ``size`` ending at ``end``, from size/Δ̄ non-overlapping relaxed instances."""
        _, rsize, _ = self.relaxed[index]
        parts = []
        for m in range(size // rsize - 1, -1, -1):
            parts += self.instances[index].get(end - m * rsize, [])
        return parts

    def push(self, stream: str, item: etree._Element, values: ItemValues) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for index, entered in _entering(self.streams, self.pres, self.first, self.shared, stream, item, values):
            for end in self.shared.arrive(index, entered):
                content = self.shared.content(index, end)
                self.instances[index][end] = content
                self.records += 1
                self.bytes += sum(xml_size(project(e.item, self.item_paths[index], self.kept[index])) for e in content)
                self._member_updates(index, end, out)
            self._trim(index)
        return out

    def _member_updates(self, index: int, end: float, out: dict[str, list[str]]) -> None:
        for name, sub, ev in self.members:
            w = sub.inputs[index].window
            if end % w.step:
                continue
            window = self.select_windows(index, end, w.size)
            previous = {id(e) for e in self.select_windows(index, end - w.step, w.size)}
            new = [e for e in window if id(e) not in previous]
            other = 1 - index
            other_end = self.last[name][other]
            current = [] if other_end is None else self.select_windows(other, other_end, sub.inputs[other].window.size)
            self.last[name][index] = end
            pairs = [(x, y) for x in new for y in current] if index == 0 else [(x, y) for x in current for y in new]
            for a, b in pairs:
                out[name] += ev.pair_results(a, b)

    def _trim(self, index: int) -> None:
        if not self.instances[index]:
            return
        newest = max(self.instances[index])
        reach = max(sub.inputs[index].window.size + sub.inputs[index].window.step for _, sub, _ in self.members)
        horizon = newest - reach - self.relaxed[index][1] - self.relaxed[index][2]
        for end in [e for e in self.instances[index] if e < horizon]:
            del self.instances[index][end]
        self.shared.trim(index, reach + self.relaxed[index][1] + self.relaxed[index][2])
        self.shared.last_end[index] = newest
