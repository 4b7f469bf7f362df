"""Typed payloads carried from evaluators to browsers and programs.

Each payload has a ``type`` literal; producers (the evaluator) and consumers
(Channels consumers, the feed client, the history persister) use these same
models, so a field added or renamed here is seen by both ends. Payloads are
JSON on the wire (``model_dump_json`` / :func:`parse_event`), never pickle.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "TupleView",
    "ResultView",
    "ResultAdded",
    "ResultRemoved",
    "Snapshot",
    "EvaluatorStatus",
    "BatchMetrics",
    "DEAD_LETTER_LINE_CHARS",
    "DeadLetter",
    "DroppingRatio",
    "Rearrangement",
    "QueryConfig",
    "QueryUpdated",
    "LiveRestored",
    "ComponentHeartbeat",
    "ComponentHealth",
    "StreamHealth",
    "QueryHealth",
    "HealthReport",
    "AggregateValue",
    "SharingReport",
    "SubscriptionResult",
    "Event",
    "parse_event",
    "result_key",
    "change_json",
]


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TupleView(_Payload):
    """One tuple of a result: its identity, values (for display) and keyword hits."""

    relation: str
    key: Any
    values: dict[str, Any] = Field(default_factory=dict)
    hits: list[str] = Field(default_factory=list)


class ResultView(_Payload):
    """One MTJNT: ``key`` identifies it (tuples and edges, see :func:`result_key`)."""

    key: str
    tuples: list[TupleView]
    edges: list[tuple[tuple[str, Any], tuple[str, Any], str]]


class ResultAdded(_Payload):
    type: Literal["result.add"] = "result.add"
    query: int
    seq: int
    result: ResultView


class ResultRemoved(_Payload):
    type: Literal["result.remove"] = "result.remove"
    query: int
    seq: int
    result: ResultView


class QueryConfig(_Payload):
    """What a query asks for, as its dashboard shows it (the web tier publishes it after each edit)."""

    name: str
    keywords: list[str]
    tmax: int
    window_seconds: float | None
    predicates: list[str]
    enabled: bool
    stream: int | None


class LiveRestored(_Payload):
    """The query's live set was written back whole, as after every change up to ``seq`` (an evaluator giving
    back what a Redis loss took, ``streaming.unpersisted``): on its change stream. A feed that read the set
    before it answers with a new snapshot; the history skips it."""

    type: Literal["live.restored"] = "live.restored"
    query: int
    seq: int


class QueryUpdated(_Payload):
    """A query was edited (keywords, Tmax, window, predicates, enabled, stream): on its change stream."""

    type: Literal["query.updated"] = "query.updated"
    query: int
    config: QueryConfig
    ts: float


class Snapshot(_Payload):
    """The live set of a query at change-stream id ``last_id`` ("0-0": none yet).

    ``last_seq`` is the seq of the last change up to ``last_id`` (None: no change yet);
    ``config`` the query's configuration as last published up to ``last_id`` (None: never).
    """

    type: Literal["snapshot"] = "snapshot"
    query: int
    last_id: str
    results: list[ResultView]
    last_seq: int | None = None
    config: QueryConfig | None = None


class EvaluatorStatus(_Payload):
    """A process's heartbeat (and, published on the stream's events, a status transition: the process's own,
    or one the supervisor made, docs/feeds.md).

    The progress fields make the heartbeat say whether the apply loop moves,
    not only that the process lives: ``applied_seq`` is the last seq of the
    last batch applied and saved, ``input_seq`` the newest seq its source
    holds (as the heartbeat read it), ``progress_at`` when it last finished a
    batch or had nothing waiting, ``applying_seq`` the op it is applying now
    (None between batches). None: not reported (a process without an apply loop).
    """

    type: Literal["evaluator.status"] = "evaluator.status"
    evaluator: int
    stream: int
    status: Literal["starting", "running", "stopping", "stopped", "failed", "restarting"]
    pid: int | None = None
    host: str = ""
    plan_version: int = 0
    detail: str = ""
    query_errors: dict[str, str] = Field(default_factory=dict)
    applied_seq: int | None = None
    input_seq: int | None = None
    progress_at: float | None = None
    applying_seq: int | None = None
    ts: float

    @property
    def waiting(self) -> int:
        """How many seqs of input wait beyond the applied seq (0: caught up, or not reported)."""
        if self.input_seq is None or self.applied_seq is None:
            return 0
        return max(0, self.input_seq - self.applied_seq)

    def stalled_for(self, now: float) -> float:
        """Seconds the process has made no progress while input waited (0: not stalled).

        A process that is caught up counts as making progress, so an idle
        stream is never stalled, and input that just arrived has waited only
        since the last beat that found none. A process reports progress only
        while it runs or its apply loop works (a restart applying what Spark
        had committed), never while Spark starts.
        """
        if not self.waiting or self.progress_at is None:
            return 0.0
        return max(0.0, now - self.progress_at)

    def stall_detail(self, now: float) -> str:
        """Why the process is stalled, for pages and the supervisor's reason."""
        on = f"; applying seq {self.applying_seq}" if self.applying_seq is not None else ""
        return (f"no batch applied for {self.stalled_for(now):.0f} s while {self.waiting} ops wait "
                f"(applied seq {self.applied_seq}{on})")


class BatchMetrics(_Payload):
    """One micro-batch: sizes, speed, where the time went, state per query."""

    type: Literal["batch.metrics"] = "batch.metrics"
    evaluator: int
    stream: int
    batch_id: int
    input_rows: int
    rows_per_second: float
    duration_ms: float
    breakdown_ms: dict[str, float] = Field(default_factory=dict)
    dead_letters: int = 0
    state: dict[str, dict[str, Any]] = Field(default_factory=dict)
    ts: float


# A dead letter keeps at most this many characters of its line.
DEAD_LETTER_LINE_CHARS = 10_000


class DeadLetter(_Payload):
    """A rejected line: at ingest (``seq`` None) or by the evaluator (the op's seq).

    ``line`` is None on the feed of a viewer who may not see raw lines (only staff may).
    """

    type: Literal["deadletter"] = "deadletter"
    stream: int
    seq: int | None = None
    line: str | None
    reason: str
    ts: float


class DroppingRatio(_Payload):
    """Tuple dropping ratio of one relation over one period of the ASC monitor."""

    type: Literal["asc.dropping"] = "asc.dropping"
    stream: int
    relation: str
    period: int
    tuples: int
    dropped: int
    ratio: float
    ts: float


class Rearrangement(_Payload):
    """The ASC monitor replaced a relation's evaluation sequence."""

    type: Literal["asc.rearrangement"] = "asc.rearrangement"
    stream: int
    relation: str
    old_sequence: list[str]
    new_sequence: list[str]
    d_init: float
    d_cur: float
    mu: float
    ts: float


class ComponentHeartbeat(_Payload):
    """A sign of life a Celery process writes to Redis (beat, at every tick of its scheduler)."""

    type: Literal["component.heartbeat"] = "component.heartbeat"
    component: Literal["beat"]
    pid: int
    host: str
    ts: float


class ComponentHealth(_Payload):
    """Whether one part of the installation answers (the Celery worker, beat)."""

    name: Literal["worker", "beat"]
    alive: bool
    detail: str = ""


class StreamHealth(_Payload):
    """A stream as it is now: its evaluator's liveness (from the heartbeat) and its input.

    ``evaluator`` is the heartbeat's status while the heartbeat is current,
    ``stalled`` when it says it applied no batch for ``EVALUATOR_STALL_SECONDS``
    while input waited; without one, what the supervisor last did, a launched
    process being ``unresponsive`` once it went silent or its first heartbeat
    is overdue (``kwmonitor.streams.liveness``); ``pid`` and ``host`` are the
    current heartbeat's. ``input_rate`` is ops ingested per second over the
    last ``rate_window`` seconds; ``idle`` says none came in that window, and
    ``last_op_at`` when the last one did (unix time, None: never).
    """

    stream: int
    evaluator: Literal["starting", "running", "stopping", "stopped", "failed", "restarting", "unresponsive", "stalled"]
    detail: str = ""
    pid: int | None = None
    host: str = ""
    plan_version: int = 0
    heartbeat_age: float | None = None
    input_rate: float
    rate_window: float
    idle: bool
    last_op_at: float | None = None


class QueryHealth(_Payload):
    """Whether a query is being evaluated, and if not, why."""

    query: int
    state: Literal["evaluating", "disabled", "error", "no stream", "not running"]
    detail: str = ""


class HealthReport(_Payload):
    """What ``GET /status/`` answers: components, then the streams and queries the user may see."""

    type: Literal["health"] = "health"
    components: list[ComponentHealth]
    streams: list[StreamHealth]
    queries: list[QueryHealth]
    ts: float

    @property
    def down(self) -> list[ComponentHealth]:
        """The components that are not alive."""
        return [c for c in self.components if not c.alive]

class AggregateValue(_Payload):
    """One closed window of an aggregate subscription (only values passing its ``having``)."""

    type: Literal["aggregate.value"] = "aggregate.value"
    stream: int
    aggregate: int
    seq: int
    window_end: float
    value: float | int | None
    ts: float


class SharingReport(_Payload):
    """The stream's sharing classes and what sharing saves against evaluating each query alone.

    ``classes`` holds one object per class (properties, member ids, lattice
    size, state, results delivered and wasted); ``totals`` the shared and the
    per-query ("alone") figures of stored tuples, lattice nodes and engine
    evaluations per op. ``plan_version`` is the version of the evaluator's
    plan the classes were formed by (0: not from an evaluator's plan).
    """

    type: Literal["sharing.report"] = "sharing.report"
    stream: int
    evaluator: int | None = None
    plan_version: int = 0
    sharing: str
    classes: list[dict[str, Any]]
    aggregate_classes: list[dict[str, Any]] = Field(default_factory=list)
    totals: dict[str, Any]
    ts: float


class SubscriptionResult(_Payload):
    """One result item of a WXQuery subscription (XML text), produced by the item of stream op ``seq``."""

    type: Literal["subscription.result"] = "subscription.result"
    subscription: int
    stream: int
    seq: int
    item: str
    ts: float


Event = Annotated[
    Union[
        ResultAdded,
        ResultRemoved,
        QueryUpdated,
        LiveRestored,
        Snapshot,
        EvaluatorStatus,
        BatchMetrics,
        DeadLetter,
        DroppingRatio,
        Rearrangement,
        AggregateValue,
        SharingReport,
        SubscriptionResult,
    ],
    Field(discriminator="type"),
]

_EVENT = TypeAdapter(Event)


def parse_event(data: str | bytes | dict[str, Any]) -> Event:
    """Validate one payload (JSON text or a decoded dict) into its model."""
    if isinstance(data, dict):
        return _EVENT.validate_python(data)
    return _EVENT.validate_json(data)


def result_key(tuples: Any, edges: Any) -> str:
    """The identity of a result: canonical JSON of its sorted tuples and edges.

    The same tuples joined through a different foreign key give another key.
    """
    return json.dumps(
        [sorted([list(t) for t in tuples], key=json.dumps), sorted([[list(a), list(b), fk] for a, b, fk in edges], key=json.dumps)],
        separators=(",", ":"),
        sort_keys=True,
    )


def change_json(kind: Literal["add", "remove"], query: int, seq: int, result_json: str) -> str:
    """The JSON of a :class:`ResultAdded` / :class:`ResultRemoved` whose result was serialized once.

    Byte for byte what ``model_dump_json`` gives (a test checks it), for an
    evaluator that sends one result to many queries of its class.
    """
    return f'{{"type":"result.{kind}","query":{int(query)},"seq":{int(seq)},"result":{result_json}}}'
