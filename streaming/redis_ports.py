"""The Redis adapters of an evaluator's ports (``streaming.ports``), over the bus's keys and scripts.

The state of evaluator ``E`` is the hash ``bus.Keys.evaluator_state(E)``
(its fields are :class:`~streaming.evaluator_state.StateField`'s; ``LOADED``
is written only when the evaluator loads or rebuilds its state: a batch whose
writes a Redis client retried on an empty Redis re-creates the hash, not this
field) and its stored tuples the hash
``bus.Keys.evaluator_tuples(E)`` (``[relation, key]`` JSON -> ``[seq, ts, values]`` JSON, the
:data:`~streaming.stored_tuples.StoredTuple`; a hash saved before these records holds the stored line instead,
read as one).
Changes are published only while that state holds the field
(:func:`~streaming.bus.publish_serialized_changes`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import orjson
import redis

from . import bus
from .evaluator_state import StateField, decode_joined
from .events import AggregateValue, ResultView, SubscriptionResult
from .ports import Ports
from .seqs import published_seq_of
from .session import Change, SavedState, StateWrite
from .sharing.properties import EvaluatorPlan
from .stored_tuples import StoredTuple

__all__ = ["RedisStateStore", "RedisPublisher", "RedisPlanSource", "redis_ports"]

_PUBLISH_CHUNK = 2_000


def _stored_tuple(raw: str) -> StoredTuple:
    """A stored tuple as saved: its record, or the stored line a state saved before records held."""
    record = orjson.loads(raw)
    if isinstance(record, dict):
        return record.get("seq"), record.get("ts"), record.get("tuple")  # checked on restore
    seq, ts, values = record
    return seq, ts, values


def _held(raw: str | None) -> dict[int, list[Change]]:
    """The :attr:`~streaming.evaluator_state.StateField.HELD` value as query -> changes (empty if none)."""
    if not raw:
        return {}
    return {int(qid): [(kind, key, payload, seq) for kind, key, payload, seq in changes]
            for qid, changes in orjson.loads(raw).items()}


class RedisStateStore:
    """:class:`~streaming.ports.StateStore` in the evaluator's two Redis hashes."""

    def __init__(self, client: redis.Redis, evaluator_id: int):
        self.client = client
        self.state_key = bus.Keys.evaluator_state(evaluator_id)
        self.tuples_key = bus.Keys.evaluator_tuples(evaluator_id)
        self.failed_key = bus.Keys.failed_op(evaluator_id)
        self.persisted_key = bus.Keys.persisted_seq(evaluator_id)

    def load(self) -> SavedState:
        state = self.client.hgetall(self.state_key)
        stored = self.client.hgetall(self.tuples_key)
        self.client.hset(self.state_key, StateField.LOADED, 1)
        clock, aggregates, outbox = (state.get(StateField.CLOCK), state.get(StateField.AGGREGATES),
                                     state.get(StateField.OUTBOX))
        return SavedState(
            seq=int(state.get(StateField.SEQ, -1)),
            clock=float(clock) if clock else None,
            aggregates=orjson.loads(aggregates) if aggregates else {},
            joined=decode_joined(state.get(StateField.JOINED)),
            held=_held(state.get(StateField.HELD)),
            outbox=[AggregateValue.model_validate(v) for v in orjson.loads(outbox)] if outbox else [],
            tuples={tuple(orjson.loads(field)): _stored_tuple(raw) for field, raw in stored.items()},  # type: ignore[misc]
        )

    def lost(self) -> bool:
        return not self.client.hexists(self.state_key, StateField.LOADED)

    def save(self, write: StateWrite) -> None:
        """The changed tuples, the applied seq, the outbox, the aggregate windows, the clock and the held
        changes in one MULTI."""
        dumps, tuples = orjson.dumps, write.tuples.items()
        live = {dumps(ident): dumps(record) for ident, record in tuples if record is not None}
        gone = [dumps(ident) for ident, record in tuples if record is None]
        with self.client.pipeline(transaction=True) as pipe:
            if live:  # one HSET for the batch: a command per tuple cost more than the write itself
                pipe.hset(self.tuples_key, mapping=live)
            if gone:
                pipe.hdel(self.tuples_key, *gone)
            state: dict[str, Any] = {StateField.SEQ: write.seq,
                                     StateField.OUTBOX: orjson.dumps([v.model_dump() for v in write.outbox]).decode()}
            if write.aggregates is not None:
                state[StateField.AGGREGATES] = orjson.dumps(write.aggregates).decode()
            if write.clock is not None:
                state[StateField.CLOCK] = repr(write.clock)
            if write.held is not None:
                state[StateField.HELD] = orjson.dumps(write.held, option=orjson.OPT_NON_STR_KEYS).decode()
            pipe.hset(self.state_key, mapping=state)
            pipe.execute()

    def save_joined(self, joined: Mapping[int, int]) -> None:
        self.client.hset(self.state_key, StateField.JOINED, orjson.dumps(dict(joined), option=orjson.OPT_NON_STR_KEYS))

    def save_published(self, seq: int) -> None:
        self.client.hset(self.state_key, StateField.PUBLISHED, seq)

    def persisted_seq(self) -> int:
        return int(self.client.get(self.persisted_key) or -1)

    def clear(self) -> None:
        with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(self.tuples_key, self.state_key)
            pipe.hset(self.state_key, StateField.LOADED, 1)
            pipe.execute()

    def note_failed(self, seq: int | None, error: str) -> None:
        self.client.set(self.failed_key, orjson.dumps({"seq": seq, "error": error}))

    def clear_failed(self) -> None:
        self.client.delete(self.failed_key)


class RedisPublisher:
    """:class:`~streaming.ports.Publisher` on the bus: live sets and change streams per query, stream events."""

    def __init__(self, client: redis.Redis, evaluator_id: int):
        self.client = client
        self.state_key = bus.Keys.evaluator_state(evaluator_id)

    def publish_changes(self, changes: Mapping[int, Sequence[Change]]) -> None:
        bus.publish_serialized_changes(self.client, changes, _PUBLISH_CHUNK, self.state_key)

    def reconcile(self, query_id: int, seq: int, results: Iterable[ResultView]) -> list[Change]:
        return bus.reconcile(self.client, query_id, seq, results, self.state_key)

    def restore_live(self, query_id: int, seq: int, adds: Mapping[str, str]) -> None:
        bus.restore_live(self.client, query_id, seq, adds)

    def forget(self, query_ids: Iterable[int]) -> None:
        keys = [key for qid in query_ids for key in
                (bus.Keys.live(qid), bus.Keys.changes(qid), bus.Keys.published_seq(qid))]
        if keys:
            self.client.delete(*keys)

    def publish_values(self, stream_id: int, values: Sequence[AggregateValue]) -> None:
        bus.publish_aggregate_values(self.client, stream_id, values)

    def publish_items(self, items: Sequence[SubscriptionResult]) -> None:
        bus.publish_subscription_results(self.client, items)

    def publish_events(self, stream_id: int, events: Sequence[Any]) -> None:
        if len(events) == 1:
            bus.publish_stream_event(self.client, stream_id, events[0])
        elif events:
            with self.client.pipeline(transaction=False) as pipe:
                for event in events:
                    bus.publish_stream_event(pipe, stream_id, event)
                pipe.execute()

    def write_report(self, report: Any) -> None:
        bus.write_sharing_report(self.client, report)


class RedisPlanSource:
    """:class:`~streaming.ports.PlanSource`: the plan the web tier wrote, the poison ops the supervisor set aside,
    the seq another evaluator has published through (its state hash)."""

    def __init__(self, client: redis.Redis, evaluator_id: int):
        self.client = client
        self.key = bus.Keys.plan(evaluator_id)
        self._raw: str | None = None  # the plan last read, as stored: validated again only when it changes
        self._plan: EvaluatorPlan | None = None

    def read(self) -> EvaluatorPlan | None:
        raw = self.client.get(self.key)
        if raw != self._raw:
            self._raw, self._plan = raw, bus.plan_of(raw)
        return self._plan

    def poison(self, stream_id: int) -> dict[int, str]:
        return {int(seq): reason for seq, reason in self.client.hgetall(bus.Keys.stream_poison(stream_id)).items()}

    def published_seq(self, evaluator_id: int) -> int:
        return published_seq_of(self.client, bus.Keys.evaluator_state(evaluator_id))


def redis_ports(client: redis.Redis, evaluator_id: int) -> Ports:
    """The ports of evaluator ``evaluator_id`` on ``client``."""
    return Ports(RedisStateStore(client, evaluator_id), RedisPublisher(client, evaluator_id),
                 RedisPlanSource(client, evaluator_id))
