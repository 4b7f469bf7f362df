"""In-memory ports, to run whole streams through evaluator runners in a test with no Redis and no Spark.

:class:`MemoryBus` stands where Redis stands: each evaluator's plan and saved
state, the stream's poison ops, and what is published, with the same rules as
the bus's scripts (``streaming.bus``): a change is published only if it
changes the live set and is not older than the query's last published seq;
an aggregate value once per subscription and window end; a WXQuery item once
per subscription, seq and rank; changes only while the publishing evaluator's
state is loaded. Each evaluator's store also keeps the seq it has published
through, which the plan sources show the stream's other evaluators.
:func:`memory_ports` gives one evaluator's ports on it::

    memory = MemoryBus(plans={1: plan})
    runner = EvaluatorRunner(memory_ports(memory, 1), 1)
    runner.start()
    runner.apply_batch(0, rows)
    memory.live_keys(query_id)

A process that dies is a runner dropped; its successor is a new runner on
the same bus. :meth:`MemoryBus.lose_state` empties a store as a Redis
restarted without persistence would.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .events import AggregateValue, ResultAdded, ResultRemoved, ResultView, SubscriptionResult, parse_event
from .ports import Ports, StateLost
from .session import Change, SavedState, StateWrite
from .sharing.properties import EvaluatorPlan

__all__ = ["MemoryStateStore", "MemoryBus", "MemoryPublisher", "MemoryPlanSource", "memory_ports"]


class MemoryStateStore:
    """:class:`~streaming.ports.StateStore` in memory (one evaluator's)."""

    def __init__(self) -> None:
        self.saved = SavedState()
        self.loaded = False
        self.failed: dict[str, Any] | None = None  # the op named for the supervisor
        self.published = -1  # the last seq whose changes the evaluator has published
        self.persisted = -1  # the history persister's mark (a test sets it)

    def load(self) -> SavedState:
        self.loaded = True
        return copy.deepcopy(self.saved)

    def lost(self) -> bool:
        return not self.loaded

    def save(self, write: StateWrite) -> None:
        for ident, record in write.tuples.items():
            if record is None:
                self.saved.tuples.pop(ident, None)
            else:
                self.saved.tuples[ident] = record
        self.saved.seq = write.seq
        self.saved.outbox = list(write.outbox)
        if write.aggregates is not None:
            self.saved.aggregates = copy.deepcopy(write.aggregates)
        if write.clock is not None:
            self.saved.clock = write.clock
        if write.held is not None:
            self.saved.held = copy.deepcopy(write.held)

    def save_joined(self, joined: Mapping[int, int]) -> None:
        self.saved.joined = dict(joined)

    def save_published(self, seq: int) -> None:
        self.published = seq

    def persisted_seq(self) -> int:
        return self.persisted

    def clear(self) -> None:
        self.saved = SavedState()
        self.loaded = True
        self.published = -1

    def note_failed(self, seq: int | None, error: str) -> None:
        self.failed = {"seq": seq, "error": error}

    def clear_failed(self) -> None:
        self.failed = None


@dataclass
class MemoryBus:
    """What Redis holds for a stream's evaluators, in memory."""

    plans: dict[int, EvaluatorPlan] = field(default_factory=dict)  # evaluator -> its plan
    poison: dict[int, dict[int, str]] = field(default_factory=dict)  # stream -> seq -> reason
    states: dict[int, MemoryStateStore] = field(default_factory=dict)  # evaluator -> its store
    live: dict[int, dict[str, str]] = field(default_factory=dict)  # query -> result key -> add payload
    changes: dict[int, list[str]] = field(default_factory=dict)  # query -> change payloads, in order
    published_seq: dict[int, int] = field(default_factory=dict)
    events: dict[int, list[Any]] = field(default_factory=dict)  # stream -> events, in order
    value_cursor: dict[tuple[int, int], float] = field(default_factory=dict)  # (stream, aggregate) -> window end
    items: dict[int, list[SubscriptionResult]] = field(default_factory=dict)  # subscription -> items
    item_ids: dict[int, tuple[int, int]] = field(default_factory=dict)  # subscription -> last (seq, rank)
    reports: dict[tuple[int, int], Any] = field(default_factory=dict)  # (stream, evaluator) -> report

    def state(self, evaluator_id: int) -> MemoryStateStore:
        return self.states.setdefault(evaluator_id, MemoryStateStore())

    def lose_state(self, evaluator_id: int) -> None:
        """Empty the evaluator's store, as a Redis restarted without persistence would."""
        store = self.state(evaluator_id)
        store.saved, store.loaded, store.failed, store.published = SavedState(), False, None, -1

    def live_keys(self, query_id: int) -> set[str]:
        return set(self.live.get(query_id, {}))

    def change_log(self, query_id: int) -> list[ResultAdded | ResultRemoved]:
        """The query's published changes, oldest first."""
        return [parse_event(payload) for payload in self.changes.get(query_id, [])]

    def stream_events(self, stream_id: int, kind: type | None = None) -> list[Any]:
        return [e for e in self.events.get(stream_id, []) if kind is None or isinstance(e, kind)]

    def publish(self, query_id: int, quads: Sequence[Change]) -> int:
        """The bus's publish script on one query's changes; how many changed the live set."""
        live = self.live.setdefault(query_id, {})
        log = self.changes.setdefault(query_id, [])
        top = self.published_seq.get(query_id, -1)
        n = 0
        for kind, key, payload, seq in quads:
            if seq < top:
                continue
            top = seq
            if kind == "add":
                changed = key not in live
                live.setdefault(key, payload)
            else:
                changed = live.pop(key, None) is not None
            if changed:
                log.append(payload)
                n += 1
        self.published_seq[query_id] = top
        return n


class MemoryPublisher:
    """:class:`~streaming.ports.Publisher` on a :class:`MemoryBus`, for one evaluator."""

    def __init__(self, bus: MemoryBus, evaluator_id: int):
        self.bus = bus
        self.evaluator_id = evaluator_id

    def publish_changes(self, changes: Mapping[int, Sequence[Change]]) -> None:
        if changes and self.bus.state(self.evaluator_id).lost():
            raise StateLost(f"the memory bus lost evaluator {self.evaluator_id}'s state")
        for query_id, quads in changes.items():
            self.bus.publish(query_id, quads)

    def reconcile(self, query_id: int, seq: int, results: Iterable[ResultView]) -> list[Change]:
        if self.bus.state(self.evaluator_id).lost():
            raise StateLost(f"the memory bus lost evaluator {self.evaluator_id}'s state")
        wanted = {r.key: r for r in results}
        live = self.bus.live.get(query_id, {})
        changes: list[ResultAdded | ResultRemoved] = [
            ResultRemoved(query=query_id, seq=seq, result=ResultAdded.model_validate_json(live[key]).result)
            for key in sorted(set(live) - set(wanted))]
        changes += [ResultAdded(query=query_id, seq=seq, result=wanted[k]) for k in sorted(set(wanted) - set(live))]
        quads: list[Change] = [("add" if isinstance(c, ResultAdded) else "remove", c.result.key, c.model_dump_json(),
                                c.seq) for c in changes]
        self.bus.publish(query_id, quads)
        return quads

    def restore_live(self, query_id: int, seq: int, adds: Mapping[str, str]) -> None:
        self.bus.live[query_id] = dict(adds)
        self.bus.published_seq[query_id] = seq

    def forget(self, query_ids: Iterable[int]) -> None:
        for qid in query_ids:
            self.bus.live.pop(qid, None)
            self.bus.changes.pop(qid, None)
            self.bus.published_seq.pop(qid, None)

    def publish_values(self, stream_id: int, values: Sequence[AggregateValue]) -> None:
        for value in values:
            last = self.bus.value_cursor.get((stream_id, value.aggregate))
            if last is None or value.window_end > last:
                self.bus.value_cursor[(stream_id, value.aggregate)] = value.window_end
                self.bus.events.setdefault(stream_id, []).append(value)

    def publish_items(self, items: Sequence[SubscriptionResult]) -> None:
        produced: dict[tuple[int, int], int] = {}
        for item in items:
            n = produced[item.subscription, item.seq] = produced.get((item.subscription, item.seq), 0) + 1
            if (item.seq, n) > self.bus.item_ids.get(item.subscription, (0, 0)):
                self.bus.item_ids[item.subscription] = (item.seq, n)
                self.bus.items.setdefault(item.subscription, []).append(item)

    def publish_events(self, stream_id: int, events: Sequence[Any]) -> None:
        self.bus.events.setdefault(stream_id, []).extend(events)

    def write_report(self, report: Any) -> None:
        self.bus.reports[(report.stream, self.evaluator_id)] = report


class MemoryPlanSource:
    """:class:`~streaming.ports.PlanSource` on a :class:`MemoryBus`, for one evaluator."""

    def __init__(self, bus: MemoryBus, evaluator_id: int):
        self.bus = bus
        self.evaluator_id = evaluator_id

    def read(self) -> EvaluatorPlan | None:
        return self.bus.plans.get(self.evaluator_id)

    def poison(self, stream_id: int) -> dict[int, str]:
        return dict(self.bus.poison.get(stream_id, {}))

    def published_seq(self, evaluator_id: int) -> int:
        return self.bus.state(evaluator_id).published


def memory_ports(bus: MemoryBus, evaluator_id: int) -> Ports:
    """The ports of evaluator ``evaluator_id`` on ``bus`` (its store is kept there across restarts)."""
    return Ports(bus.state(evaluator_id), MemoryPublisher(bus, evaluator_id), MemoryPlanSource(bus, evaluator_id))
