"""Run a set of subscriptions over a sequence of items, alone or shared, with per-item dead letters.

Before any subscription sees an item, the run checks what every subscription
relies on: each element compared with numbers or aggregated must hold a
finite number, and each time window's reference element must not go back in time
(relative to the stream's previous item). An item failing a check is a dead
letter for the whole run, so every sharing mode sees the same items.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from lxml import etree

from .alone import AloneEvaluator
from .construct import ItemValues
from .planner import Group, Mode, plan_groups
from .matching import DTDs
from .shared import runner_for, xml_size
from .translate import Subscription
from ..xmlstream.items import DeadLetter

__all__ = ["RunResult", "SubscriptionRun", "run_subscriptions", "numeric_paths", "time_references"]


@dataclass
class RunResult:
    """Each subscription's result items in order, the dead letters and the run's statistics."""

    results: dict[str, list[str]]
    dead_letters: list[DeadLetter] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


def numeric_paths(sub: Subscription) -> dict[str, set[str]]:
    """Per stream, the element paths a subscription reads as numbers."""
    out: dict[str, set[str]] = {}
    predicates = [inp.pre for inp in sub.inputs] + [sub.where, sub.post]
    predicates += [let.aggregate.pre for let in sub.lets] + list(sub.conditions.values())
    for inp in sub.inputs:
        mine = out.setdefault(inp.stream, set())
        if inp.window is not None and inp.window.reference:
            mine.add(inp.window.reference)
        for let in sub.lets:
            if let.aggregate.path != inp.item_path and let.aggregate.function != "count":
                mine.add(let.aggregate.path)
    for predicate in predicates:
        for conj in predicate.any_of:
            for atom in conj:
                if isinstance(atom.value, str) or "(" in atom.path.replace("stream(", ""):
                    continue
                for path in (atom.path, atom.minus):
                    if path is None:
                        continue
                    stream = path.split('"')[1] if path.startswith("stream(") else sub.inputs[0].stream
                    out.setdefault(stream, set()).add(path[path.index(")") + 1:] if path.startswith("stream(") else path)
    return out


def time_references(sub: Subscription) -> dict[str, set[str]]:
    """Per stream, the reference elements of the subscription's time windows."""
    out: dict[str, set[str]] = {}
    for inp in sub.inputs:
        if inp.window is not None and inp.window.kind == "time":
            out.setdefault(inp.stream, set()).add(inp.window.reference)
    return out


class _Checker:
    def __init__(self, subs: Sequence[Subscription]):
        self.numeric: dict[str, set[str]] = {}
        self.references: dict[str, set[str]] = {}
        for sub in subs:
            for stream, paths in numeric_paths(sub).items():
                self.numeric.setdefault(stream, set()).update(paths)
            for stream, paths in time_references(sub).items():
                self.references.setdefault(stream, set()).update(paths)
        self.last: dict[tuple[str, str], float] = {}

    def problem(self, stream: str, values: ItemValues) -> str | None:
        for path in sorted(self.numeric.get(stream, ())):
            try:
                number = values((path, None, "number"))
            except ValueError:
                return f"{path} is not a number and subscriptions read it as one"
            if number is not None and not math.isfinite(number):  # INF, NaN, 1e999: no window or sum holds one
                return f"{path} is not a finite number and subscriptions read it as one"
        for path in sorted(self.references.get(stream, ())):
            now = values((path, None, "number"))
            before = self.last.get((stream, path))
            if before is not None and now < before:
                return f"late item: {path} is {now}, after {before} (time windows need non-decreasing values)"
        for path in self.references.get(stream, ()):
            self.last[(stream, path)] = values((path, None, "number"))
        return None


class SubscriptionRun:
    """Subscriptions registered in order and fed one item at a time: what :func:`run_subscriptions` and
    a stream's evaluator both use, so an evaluator's results are the command line's."""

    def __init__(self, subs: Sequence[tuple[str, Subscription]], mode: Mode, dtds: DTDs):
        self.subs = list(subs)
        self.mode = mode
        self.checker = _Checker([s for _, s in subs])
        self.groups = plan_groups(subs, mode, dtds)
        self.alone = [(name, AloneEvaluator(sub)) for name, sub in subs] if mode == "none" else []
        self.runners = [runner_for(g) for g in self.groups]
        self.raw_bytes = 0
        self.streams_read: dict[str, int] = {}
        self.items = 0
        self.dead_letters = 0

    def push(self, index: int, stream: str, item: etree._Element) -> tuple[dict[str, list[str]], DeadLetter | None]:
        """Take item number ``index`` of ``stream``: each subscription's new result items, or its dead letter."""
        self.items += 1
        values = ItemValues({None: item, stream: item})
        problem = self.checker.problem(stream, values)
        if problem is not None:
            self.dead_letters += 1
            return {}, DeadLetter(index, item.sourceline, problem)
        size = xml_size(item)
        self.raw_bytes += size
        self.streams_read[stream] = self.streams_read.get(stream, 0) + size
        out: dict[str, list[str]] = {}
        for name, evaluator in self.alone:
            found = evaluator.push(stream, item)
            if found:
                out.setdefault(name, []).extend(found)
        for runner in self.runners:
            for name, found in runner.push(stream, item, values).items():
                if found:
                    out.setdefault(name, []).extend(found)
        return out, None

    def stats(self) -> dict[str, Any]:
        """Items, dead letters, groups and the bytes of the streams the subscriptions read (without CPU)."""
        readers = {name: {inp.stream for inp in sub.inputs} for name, sub in self.subs}
        if self.mode == "none":
            shipped = sum(self.streams_read.get(s, 0) for name in readers for s in readers[name])
        else:
            shipped = sum(r.bytes for r in self.runners)
        return {
            "sharing": self.mode,
            "subscriptions": len(self.subs),
            "items": self.items,
            "dead_letters": self.dead_letters,
            "groups": [r.stats() for r in self.runners],
            "subscriptions_sharing": _sharing(self.groups),
            "input_bytes": self.raw_bytes,
            "stream_bytes": shipped,
        }


def run_subscriptions(subs: Sequence[tuple[str, Subscription]], items: Iterable[tuple[str, etree._Element]],
                      mode: Mode, dtds: DTDs) -> RunResult:
    """Evaluate every subscription over ``items`` (stream id, item element) in ``mode``."""
    started = time.process_time()
    run = SubscriptionRun(subs, mode, dtds)
    results: dict[str, list[str]] = {name: [] for name, _ in subs}
    dead: list[DeadLetter] = []
    for index, (stream, item) in enumerate(items):
        found, letter = run.push(index, stream, item)
        if letter is not None:
            dead.append(letter)
        for name, rows in found.items():
            results[name] += rows
    cpu = time.process_time() - started
    return RunResult(results, dead, {**run.stats(), "cpu_s": round(cpu, 6)})


def _sharing(groups: list[Group]) -> int:
    """Subscriptions answered from a stream another subscription started (the paper's count in Sect. 6)."""
    return sum(len(g.members) - 1 for g in groups)
