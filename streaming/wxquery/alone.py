"""One subscription evaluated alone over its input items: the reference every sharing mode must equal.

The semantics, stated once (``docs/wxquery.md`` repeats them for users):

* **Items.** An item enters a subscription if it passes the for path's
  predicate (the pre-selection). Without a window each such item is one
  binding; ``where`` filters it.
* **Windows.** Instance *k* of ``|count Δ step μ|`` holds the entering items
  numbered ``kμ-Δ+1 .. kμ`` and is evaluated when item ``kμ`` arrives, if it
  is full. Instance *k* of ``|ref diff Δ step μ|`` holds the entering items
  whose reference value ``t`` has ``kμ-Δ <= t < kμ``; it is evaluated when the
  first entering item with ``t >= kμ`` arrives, for every ``kμ`` after the
  first entering item's ``t``, empty instances included, but of the instances
  one item completes the empty ones only as the first and the last (a jump of
  ``t`` costs what the data costs: :func:`completed_ends`). A where condition
  on the window's elements holds if some item satisfies each comparison
  (XQuery's existential comparison); aggregates of an empty window are the
  empty sequence (``count`` and ``sum`` give 0).
* **Joins** (Sect. 5.1.1): each input has its own window; when input *i*'s
  instance ending at ``E`` completes (same rules as above, time windows also
  when they are partial at the start), its new items (in instance ``E`` and
  not in ``E - μ``) are joined with the current instance of the other input,
  in nested-loop order of the for clauses (an instance with no new item joins
  nothing: past the last one, only the input's current instance moves on).
  At the end of the items, nothing more is evaluated.

Everything here is computed the simple way (instances rebuilt from the list
of entering items, aggregates exactly with fractions), so the shared
evaluation of :mod:`streaming.wxquery.shared` is checked against it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

from lxml import etree

from ..sharing.windows import ceil_to, last_end, rounded
from .construct import ItemValues, construct, serialize
from .predicates import DNF, Atom, evaluate
from .translate import Input, Subscription

__all__ = ["Entered", "AloneEvaluator", "aggregate_value", "inside", "window_position", "first_end",
           "completed_ends"]


@dataclass(slots=True)
class Entered:
    """An item that passed an input's pre-selection, with its window position (time or number)."""

    item: etree._Element
    position: float
    values: ItemValues = field(repr=False)


def inside(position: float, end: float, size: int, kind: str) -> bool:
    """Whether an item at ``position`` is in the instance ending at ``end``."""
    if kind == "time":
        return end - size <= position < end
    return end - size < position <= end


def first_end(position: float, step: int) -> int:
    """The end of the first time instance evaluated after an item at ``position``: the next multiple of μ."""
    return last_end(position, step) + step


def completed_ends(next_end: int, position: float, reach: float, steps: Sequence[int]) -> tuple[list[int], int]:
    """The ends of the time instances an item at ``position`` completes that are evaluated, and the next end.

    Instances end every ``steps[0]`` from ``next_end`` on. Those ending by
    ``reach`` (where the items before this one stop mattering: past it no
    instance holds one, or a new one) are each evaluated; of the later ones,
    all empty, only the first and the last ending on each step of ``steps``
    (the windows built from these instances). So a jump of the reference
    value costs what the data costs, not one instance per step of the jump.
    """
    grid = steps[0]
    last = last_end(position, grid)
    ends: list[int] = []
    end = next_end
    while end <= last and end <= reach:
        ends.append(end)
        end += grid
    if end <= last:
        for step in steps:
            first, final = ceil_to(end, step), last_end(last, step)
            if first <= final:
                ends += [first, final]
        ends = sorted(set(ends))
    return ends, max(next_end, last + grid)


def window_position(inp: Input, values: ItemValues, count: int) -> float:
    """Where an entering item sits in ``inp``'s window: its reference value, or its number."""
    if inp.window is not None and inp.window.kind == "time":
        return float(values((inp.window.reference, None, "number")))
    return float(count)


def aggregate_value(function: str, values: list[float]) -> float | int | None:
    """An aggregate computed exactly (as the shared partials are): None is the empty sequence, and a sum
    beyond the float range."""
    if function == "count":
        return len(values)
    if function == "sum":
        return rounded(sum(map(Fraction, values), Fraction(0))) if values else 0
    if not values:
        return None
    if function == "avg":
        return rounded(sum(map(Fraction, values), Fraction(0)) / len(values))
    return min(values) if function == "min" else max(values)


def exists_in(post: DNF, entered: list[Entered]) -> bool:
    """A window post-selection: per comparison, some item of the window satisfies it."""
    def holds(atom: Atom) -> bool:
        probe = DNF(any_of=((atom,),))
        return any(evaluate(probe, e.values) for e in entered)
    return any(all(holds(a) for a in conj) for conj in post.any_of)


class AloneEvaluator:
    """A streaming evaluator of one subscription: :meth:`push` items in arrival order, get result items."""

    def __init__(self, sub: Subscription):
        self.sub = sub
        self.entered: list[list[Entered]] = [[] for _ in sub.inputs]
        self.counts = [0 for _ in sub.inputs]
        self.next_end: list[float | None] = [None for _ in sub.inputs]
        self.last_end: list[float | None] = [None for _ in sub.inputs]

    def push(self, stream: str, item: etree._Element, values: ItemValues | None = None) -> list[str]:
        """Take one item of ``stream``; return the serialized result items it completes.

        ``values`` may hold the item's values already read (by a group for all its members).
        """
        out: list[str] = []
        for index, inp in enumerate(self.sub.inputs):
            if inp.stream != stream:
                continue
            if values is None:
                values = ItemValues({None: item, stream: item})
            if not values.holds(inp.pre):
                continue
            self.counts[index] += 1
            position = window_position(inp, values, self.counts[index])
            if len(self.sub.inputs) > 1:
                out += self._join_push(index, Entered(item, position, values))
            elif inp.window is None:
                if values.holds(self.sub.where):
                    out += self._results({inp.var: item}, values)
            else:
                out += self._window_push(inp, Entered(item, position, values))
        return out

    def _results(self, binding: dict[str, Any], values: Any) -> list[str]:
        return [serialize(r) for r in construct(self.sub, binding, values)]

    # -- one windowed input ---------------------------------------------------------------

    def _window_push(self, inp: Input, entered: Entered) -> list[str]:
        window = inp.window
        items = self.entered[0]
        out: list[str] = []
        if window.kind == "time":
            if self.next_end[0] is None:
                self.next_end[0] = first_end(entered.position, window.step)
            reach = items[-1].position + window.size if items else -math.inf  # later instances hold no item
            ends, self.next_end[0] = completed_ends(self.next_end[0], entered.position, reach, (window.step,))
            for end in ends:
                out += self._evaluate_window(inp, end, items)
            items.append(entered)
        else:
            items.append(entered)
            n = int(entered.position)
            if n % window.step == 0 and n >= window.size:
                out += self._evaluate_window(inp, n, items)
        self._forget(0, entered.position)
        return out

    def _forget(self, index: int, newest: float) -> None:
        """Drop entered items no later instance can hold (they are before every future window's start)."""
        w = self.sub.inputs[index].window
        horizon = newest - w.size - w.step
        items = self.entered[index]
        if items and items[0].position < horizon:
            self.entered[index] = [e for e in items if e.position >= horizon]

    def _evaluate_window(self, inp: Input, end: float, items: list[Entered]) -> list[str]:
        window = inp.window
        content = [e for e in items if inside(e.position, end, window.size, window.kind)]
        if not self.sub.post.is_true and not exists_in(self.sub.post, content):
            return []
        binding: dict[str, Any] = {inp.var: [e.item for e in content]}
        for let in self.sub.lets:
            agg = let.aggregate
            chosen = [e for e in content if e.values.holds(agg.pre)]
            if agg.function == "count" and agg.path == inp.item_path:
                numbers = [0.0] * len(chosen)
            else:
                numbers = [e.values((agg.path, None, "number")) for e in chosen]
            binding[let.var] = aggregate_value(agg.function, numbers)
        keys = {let.aggregate.key: binding[let.var] for let in self.sub.lets}
        if not evaluate(self.sub.having, lambda dim: keys.get(dim[0])):
            return []
        return self._results(binding, lambda dim: None)

    # -- joins ---------------------------------------------------------------------------------

    def _join_push(self, index: int, entered: Entered) -> list[str]:
        inp = self.sub.inputs[index]
        window = inp.window
        items = self.entered[index]
        out: list[str] = []
        if window.kind == "time":
            if self.next_end[index] is None:
                self.next_end[index] = first_end(entered.position, window.step)
            # later instances hold no new item: they join nothing, but the last one is the input's current one
            reach = items[-1].position + min(window.size, window.step) if items else -math.inf
            ends, self.next_end[index] = completed_ends(self.next_end[index], entered.position, reach, (window.step,))
            for end in ends:
                out += self._join_update(index, end)
            items.append(entered)
        else:
            items.append(entered)
            n = int(entered.position)
            if n % window.step == 0:
                out += self._join_update(index, n)
        other = 1 - index
        if self.last_end[other] is not None:
            self._forget(other, self.last_end[other])
        self._forget(index, entered.position)
        return out

    def _join_update(self, index: int, end: float) -> list[str]:
        """Input ``index``'s instance ending at ``end`` completes: join its new items with the other window."""
        inp = self.sub.inputs[index]
        w = inp.window
        new = [e for e in self.entered[index]
               if inside(e.position, end, w.size, w.kind) and not inside(e.position, end - w.step, w.size, w.kind)]
        other_index = 1 - index
        other = self.sub.inputs[other_index]
        other_end = self.last_end[other_index]
        current = [] if other_end is None else [
            e for e in self.entered[other_index] if inside(e.position, other_end, other.window.size, other.window.kind)]
        self.last_end[index] = end
        pairs = [(x, y) for x in new for y in current] if index == 0 else [(x, y) for x in current for y in new]
        return [r for x, y in pairs for r in self.pair_results(x, y)]

    def pair_results(self, x: Entered, y: Entered) -> list[str]:
        """The results of one pair (first input's item, second input's item), if it passes ``where``."""
        a, b = self.sub.inputs
        values = ItemValues({a.stream: x.item, b.stream: y.item})
        if not values.holds(self.sub.where):
            return []
        return self._results({a.var: x.item, b.var: y.item}, values)
