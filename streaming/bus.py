"""The Redis bus between evaluators and the web tier: key layout and operations.

Per query, the live result set is a hash ``kw:query:{id}:live`` (result key ->
the :class:`~streaming.events.ResultAdded` JSON that added it, so a snapshot
can list results newest first) and every change is appended to the
Redis stream ``kw:query:{id}:changes`` (field ``data``: the typed payload). A
change is published by one Lua script that updates the hash and appends to the
stream together, and only if it changes the set (an add of a live result or a
remove of an absent one is dropped): replays after a crash never duplicate an
add nor lose a remove. The script also keeps the highest seq published for the
query (``kw:query:{id}:seq``) and drops a change of a lower seq, so two
evaluators may publish the same query's changes for a while (a sharing class
moving from one to the other, ``docs/scaling.md``): whichever is behind adds
nothing, and the browser sees each change once, in seq order.

A reader takes :func:`read_snapshot` (the hash and the last stream id, in one
MULTI/EXEC) and then :func:`read_changes` after that id: no gap, no duplicate.

The change stream also carries ``query.updated`` entries: the web tier
publishes one after an edit of the query commits, together with the query's
configuration in ``kw:query:{id}:config`` (:func:`publish_query_config`), so a
snapshot includes the configuration it was taken at.

Per stream, ``kw:stream:{id}:events`` carries evaluator status, batch
metrics, dead letters, dropping ratios and rearrangements, and
``kw:stream:{id}:ingested`` one entry per ingested body (field ``n``: its op
count), from which the input rate and the time of the last op are read
(:func:`record_ingest`, :func:`read_input`). Per evaluator,
``kw:evaluator:{id}:plan`` holds the plan JSON written by the web tier and
``kw:evaluator:{id}:heartbeat`` the last heartbeat (with a TTL; its time is
kept in ``kw:evaluator:{id}:last-heartbeat``). A stream's poison ops, set
aside by the supervisor, are in ``kw:stream:{id}:poison``
(``docs/ops.md``, "Stalls and poison ops"). Celery beat writes
``kw:component:beat:heartbeat``.
"""

from __future__ import annotations

import hashlib

import json
import time
from typing import Any, Iterable, Mapping, Sequence

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from .events import (
    AggregateValue,
    ComponentHeartbeat,
    EvaluatorStatus,
    LiveRestored,
    QueryConfig,
    QueryUpdated,
    SharingReport,
    SubscriptionResult,
    ResultAdded,
    ResultRemoved,
    ResultView,
    Snapshot,
    parse_event,
)
from .evaluator_state import StateField
from .ports import StateLost
from .sharing.properties import EvaluatorPlan

__all__ = [
    "CHANGES_MAXLEN",
    "StateLost",
    "EVENTS_MAXLEN",
    "Keys",
    "connect",
    "publish_changes",
    "publish_serialized_changes",
    "reconcile",
    "restore_live",
    "read_snapshot",
    "SNAPSHOT_SEQ_SCAN",
    "snapshot_of",
    "newest_first",
    "publish_query_config",
    "read_changes",
    "publish_stream_event",
    "read_stream_events",
    "write_landing_consumers",
    "write_plan",
    "read_plan",
    "plan_of",
    "write_heartbeat",
    "read_heartbeat",
    "read_last_heartbeat_at",
    "INGESTED_MAXLEN",
    "record_ingest",
    "read_input",
    "write_component_heartbeat",
    "read_component_heartbeat",
    "write_sharing_report",
    "read_sharing_report",
    "publish_aggregate_values",
    "publish_subscription_results",
    "read_subscription_results",
]

CHANGES_MAXLEN = 100_000
EVENTS_MAXLEN = 20_000
INGESTED_MAXLEN = 10_000
# A snapshot's last_seq is the seq of the newest change among this many newest entries.
SNAPSHOT_SEQ_SCAN = 50


class Keys:
    """Redis key names; the only place they are spelled."""

    @staticmethod
    def live(query_id: int) -> str:
        return f"kw:query:{query_id}:live"

    @staticmethod
    def changes(query_id: int) -> str:
        return f"kw:query:{query_id}:changes"

    @staticmethod
    def published_seq(query_id: int) -> str:
        """The highest seq of a change published for the query (older ones are dropped)."""
        return f"kw:query:{query_id}:seq"

    @staticmethod
    def query_config(query_id: int) -> str:
        return f"kw:query:{query_id}:config"

    @staticmethod
    def stream_ingested(stream_id: int) -> str:
        return f"kw:stream:{stream_id}:ingested"

    @staticmethod
    def component_heartbeat(component: str) -> str:
        return f"kw:component:{component}:heartbeat"

    @staticmethod
    def stream_events(stream_id: int) -> str:
        return f"kw:stream:{stream_id}:events"

    @staticmethod
    def stream_ops(stream_id: int) -> str:
        return f"kw:stream:{stream_id}:ops"

    @staticmethod
    def stream_seq(stream_id: int) -> str:
        return f"kw:stream:{stream_id}:seq"

    @staticmethod
    def stream_lock(stream_id: int) -> str:
        """Held while a writer reads the ingest clock, assigns seqs and stores a body (seq order = file order)."""
        return f"kw:stream:{stream_id}:lock"

    @staticmethod
    def ingest_receipt(stream_id: int, key: str) -> str:
        """The receipt of a body stored under an idempotency key in a Redis-stream source
        (``streaming.sources.writer``; a landing directory keeps its receipts in files)."""
        return f"kw:stream:{stream_id}:receipt:{hashlib.sha256(key.encode()).hexdigest()}"

    @staticmethod
    def ingest_receipts(stream_id: int) -> str:
        """The pattern of a stream's :meth:`ingest_receipt` keys (for ``SCAN``)."""
        return f"kw:stream:{stream_id}:receipt:*"

    @staticmethod
    def stream_clock(stream_id: int) -> str:
        """The stream's ingest clock: the largest ``ts`` stored so far (``repr`` of a float), advanced under
        the landing lock with each stored body; the clock guard judges jumps against it at ingest."""
        return f"kw:stream:{stream_id}:clock"

    @staticmethod
    def evaluator_tuples(evaluator_id: int) -> str:
        """Hash of the tuples the evaluator holds (rebuilt into engines after a restart)."""
        return f"kw:evaluator:{evaluator_id}:tuples"

    @staticmethod
    def evaluator_state(evaluator_id: int) -> str:
        """Hash with the last applied seq and stream clock, written with the tuples."""
        return f"kw:evaluator:{evaluator_id}:state"

    @staticmethod
    def plan(evaluator_id: int) -> str:
        return f"kw:evaluator:{evaluator_id}:plan"

    @staticmethod
    def persisted_seq(evaluator_id: int) -> str:
        """The last seq the history holds every change and dead letter of that the evaluator published
        (written by the history persister, read by the evaluator: what it must publish again after a loss)."""
        return f"kw:evaluator:{evaluator_id}:persisted"

    @staticmethod
    def heartbeat(evaluator_id: int) -> str:
        return f"kw:evaluator:{evaluator_id}:heartbeat"

    @staticmethod
    def last_heartbeat(evaluator_id: int) -> str:
        """The unix time of the evaluator's last heartbeat, kept after the heartbeat itself expired."""
        return f"kw:evaluator:{evaluator_id}:last-heartbeat"

    @staticmethod
    def failed_op(evaluator_id: int) -> str:
        """The op an evaluator was applying when an error ended its process (JSON ``{"seq", "error"}``)."""
        return f"kw:evaluator:{evaluator_id}:failed-op"

    @staticmethod
    def poison_watch(evaluator_id: int) -> str:
        """Hash kept by the supervisor: the seq of the op the evaluator's last failures were at, and how many."""
        return f"kw:evaluator:{evaluator_id}:poison-watch"

    @staticmethod
    def stream_poison(stream_id: int) -> str:
        """Hash: seq -> reason, the stream's poison ops, set aside as dead letters (every evaluator skips them)."""
        return f"kw:stream:{stream_id}:poison"

    @staticmethod
    def aggregate_cursor(stream_id: int) -> str:
        """Hash: aggregate subscription id -> end of the last window value published (publishing is idempotent)."""
        return f"kw:stream:{stream_id}:aggregate-cursor"

    @staticmethod
    def subscription_results(subscription_id: int) -> str:
        """Redis stream of a WXQuery subscription's result items (:class:`~streaming.events.SubscriptionResult`)."""
        return f"kw:wxquery:{subscription_id}:results"

    @staticmethod
    def stream_vocabularies(stream_id: int) -> str:
        """Hash: needs version -> the pre-processor's vocabulary of that version (JSON list)."""
        return f"kw:stream:{stream_id}:vocab"

    @staticmethod
    def landing_consumers(stream_id: int, directory: str) -> str:
        """Set of the state hashes whose applied seqs gate archiving a landing directory of the stream
        (``directory``: "raw" or "derived"), rewritten with every plan so a running reader sees a consumer
        the moment it is added (a new evaluator, the pre-processor) or removed."""
        return f"kw:stream:{stream_id}:consumers:{directory}"

    @staticmethod
    def capture_slot(stream_id: int) -> str:
        """The replication slot of a PostgreSQL-sourced stream as beat last saw it (JSON, with a TTL)."""
        return f"kw:stream:{stream_id}:slot"

    @staticmethod
    def sharing_report(stream_id: int) -> str:
        """Hash: evaluator id -> its latest :class:`~streaming.events.SharingReport` (the Sharing page
        reads their merge)."""
        return f"kw:stream:{stream_id}:sharing-reports"


def connect(url: str, retry_seconds: float = 0.0) -> redis.Redis:
    """A client that returns ``str`` (all our values are JSON text).

    With ``retry_seconds`` a command that meets a lost connection is retried
    (backoff up to 1 s) for about that long, so a process rides through a Redis
    restart instead of failing. Safe for the bus's writes: changes are
    published by a script that ignores what is already applied, and the
    evaluator's state is written with absolute values (a stream event whose
    reply was lost may be appended twice). The web tier connects without it,
    so a request fails fast while Redis is away.
    """
    if retry_seconds <= 0:
        return redis.Redis.from_url(url, decode_responses=True)
    retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=int(retry_seconds) + 5)
    return redis.Redis.from_url(url, decode_responses=True, retry=retry,
                                retry_on_error=[redis.ConnectionError, redis.TimeoutError])


# KEYS: live hash, change stream, published seq, optionally the publishing evaluator's state hash (nothing is
# published, -1, unless it holds StateField.LOADED). ARGV: maxlen, then (kind, result key, payload, seq) quads.
_PUBLISH = f"""
if KEYS[4] and redis.call('HEXISTS', KEYS[4], '{StateField.LOADED}') == 0 then return -1 end
local n = 0
local top = tonumber(redis.call('GET', KEYS[3]) or '-1')
for i = 2, #ARGV, 4 do
  local seq = tonumber(ARGV[i + 3])
  if seq >= top then
    top = seq
    local kind, rkey, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    local changed
    if kind == 'add' then
      changed = redis.call('HSETNX', KEYS[1], rkey, payload)
    else
      changed = redis.call('HDEL', KEYS[1], rkey)
    end
    if changed == 1 then
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'data', payload)
      n = n + 1
    end
  end
end
redis.call('SET', KEYS[3], top)
return n
"""


def publish_changes(client: redis.Redis, query_id: int, changes: Sequence[ResultAdded | ResultRemoved]) -> int:
    """Apply changes to the live set and append them to the change stream, atomically.

    Returns how many changed the set (the others were already applied).
    """
    return publish_serialized_changes(client, {query_id: _serialized(changes)})


def _serialized(changes: Iterable[ResultAdded | ResultRemoved]) -> list[tuple[str, str, str, int]]:
    return [("add" if isinstance(c, ResultAdded) else "remove", c.result.key, c.model_dump_json(), c.seq)
            for c in changes]


def publish_serialized_changes(client: redis.Redis, changes: Mapping[int, Sequence[tuple[str, str, str, int]]],
                               chunk: int = 2_000, state_key: str | None = None) -> int:
    """``publish_changes`` for many queries in one round trip: per query ``(kind, result key, payload
    JSON, seq)`` quads in seq order, each query's chunk one atomic script. Returns how many changed a
    live set. With ``state_key`` (the evaluator's state hash) a chunk is published only while that hash
    holds :attr:`~streaming.evaluator_state.StateField.LOADED`; :class:`StateLost` is raised otherwise."""
    script = client.register_script(_PUBLISH)
    try:
        return _publish_pipelined(client, script, changes, chunk, state_key)
    except redis.exceptions.NoScriptError:
        # Redis restarted between the pipeline loading the script and running it (a restart empties the
        # script cache, persisted or not): a new pipeline loads it again, and the script skips what is applied
        return _publish_pipelined(client, script, changes, chunk, state_key)


def _publish_pipelined(client: redis.Redis, script: Any, changes: Mapping[int, Sequence[tuple[str, str, str, int]]],
                       chunk: int, state_key: str | None) -> int:
    with client.pipeline(transaction=False) as pipe:
        for query_id, quads in changes.items():
            keys = [Keys.live(query_id), Keys.changes(query_id), Keys.published_seq(query_id)]
            if state_key is not None:
                keys.append(state_key)
            for i in range(0, len(quads), chunk):
                argv: list[Any] = [CHANGES_MAXLEN]
                for quad in quads[i:i + chunk]:
                    argv.extend(quad)
                script(keys=keys, args=argv, client=pipe)
        published = [int(n) for n in pipe.execute()]
    if any(n < 0 for n in published):
        raise StateLost(f"Redis lost the state {state_key}")
    return sum(published)


def reconcile(client: redis.Redis, query_id: int, seq: int, results: Iterable[ResultView],
              state_key: str | None = None) -> list[tuple[str, str, str, int]]:
    """Make the published live set equal ``results`` by publishing the difference; returns it (as
    ``(kind, result key, payload JSON, seq)`` quads). ``state_key``: as for :func:`publish_serialized_changes`.

    Used after an evaluator restart: the browser sees removes for results that
    died meanwhile and adds for new ones, as if there had been no crash.
    """
    wanted = {r.key: r for r in results}
    live = set(client.hkeys(Keys.live(query_id)))
    changes: list[ResultAdded | ResultRemoved] = []
    for key in sorted(live - set(wanted)):
        payload = client.hget(Keys.live(query_id), key)
        if payload is not None:
            result = ResultAdded.model_validate_json(payload).result
            changes.append(ResultRemoved(query=query_id, seq=seq, result=result))
    changes += [ResultAdded(query=query_id, seq=seq, result=wanted[k]) for k in sorted(set(wanted) - live)]
    serialized = _serialized(changes)
    publish_serialized_changes(client, {query_id: serialized}, state_key=state_key)
    return serialized


def restore_live(client: redis.Redis, query_id: int, seq: int, adds: Mapping[str, str]) -> None:
    """Set a query's live set to ``adds`` (result key -> add payload), as after every change up to ``seq``, and
    its published seq to ``seq``, in one MULTI; the change stream gets a :class:`LiveRestored` entry, no change
    (a feed that read the set before sends a new snapshot)."""
    with client.pipeline(transaction=True) as pipe:
        pipe.delete(Keys.live(query_id))
        if adds:
            pipe.hset(Keys.live(query_id), mapping=dict(adds))
        pipe.set(Keys.published_seq(query_id), seq)
        pipe.xadd(Keys.changes(query_id), {"data": LiveRestored(query=query_id, seq=seq).model_dump_json()},
                  maxlen=CHANGES_MAXLEN, approximate=True)
        pipe.execute()


def read_snapshot(client: redis.Redis, query_id: int) -> tuple[str, list[ResultView]]:
    """The live set and the id of the last change it includes ("0-0" if none)."""
    with client.pipeline(transaction=True) as pipe:
        pipe.hvals(Keys.live(query_id))
        pipe.xrevrange(Keys.changes(query_id), count=1)
        values, last = pipe.execute()
    return (last[0][0] if last else "0-0"), newest_first(values)


def snapshot_of(query_id: int, live_values: Iterable[str], newest: Sequence[tuple[str, dict[str, str]]],
                config: str | None) -> Snapshot:
    """The snapshot payload from what one MULTI read: the live hash's values, the newest
    entries of the change stream (newest first, up to :data:`SNAPSHOT_SEQ_SCAN`) and the config key."""
    last_seq = None
    for _, fields in newest:
        seq = json.loads(fields["data"]).get("seq")
        if seq is not None:
            last_seq = seq
            break
    results = newest_first(live_values)
    if last_seq is None and newest:  # only edits among the newest entries: the newest add is the best we know
        last_seq = max((a.seq for a in map(ResultAdded.model_validate_json, live_values)), default=None)
    return Snapshot(query=query_id, last_id=newest[0][0] if newest else "0-0", results=results, last_seq=last_seq,
                    config=None if config is None else QueryConfig.model_validate_json(config))


def newest_first(live_values: Iterable[str]) -> list[ResultView]:
    """The results of a live hash's values, newest add first (ties by key), as dashboards list them."""
    adds = sorted((ResultAdded.model_validate_json(v) for v in live_values), key=lambda a: (-a.seq, a.result.key))
    return [a.result for a in adds]


# KEYS: config key, change stream. ARGV: config JSON, QueryUpdated JSON, announce ("1"/"0"), maxlen.
_CONFIG = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[3] ~= '1' then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'data', ARGV[2])
return 1
"""


def publish_query_config(client: redis.Redis, event: QueryUpdated, announce: bool = True) -> bool:
    """Store a query's configuration and, if it changed and ``announce``, append the event to its
    change stream, atomically. False when nothing was appended (unchanged, or not announced: a new query)."""
    script = client.register_script(_CONFIG)
    keys = [Keys.query_config(event.query), Keys.changes(event.query)]
    return bool(script(keys=keys, args=[event.config.model_dump_json(), event.model_dump_json(),
                                        "1" if announce else "0", CHANGES_MAXLEN]))


def read_changes(
    client: redis.Redis, query_id: int, after_id: str, count: int = 500, block_ms: int | None = None
) -> list[tuple[str, ResultAdded | ResultRemoved | QueryUpdated | LiveRestored]]:
    """Entries strictly after ``after_id``, oldest first; blocks up to ``block_ms`` if none."""
    if block_ms is None:
        entries = client.xrange(Keys.changes(query_id), min=f"({after_id}", count=count)
    else:
        reply = client.xread({Keys.changes(query_id): after_id}, count=count, block=block_ms)
        entries = reply[0][1] if reply else []
    return [(entry_id, parse_event(fields["data"])) for entry_id, fields in entries]


def publish_stream_event(client: redis.Redis, stream_id: int, event: Any) -> str:
    """Append a stream-level payload (status, metrics, dead letter, ASC) to its Redis stream."""
    return client.xadd(
        Keys.stream_events(stream_id), {"data": event.model_dump_json()}, maxlen=EVENTS_MAXLEN, approximate=True
    )


def read_stream_events(
    client: redis.Redis, stream_id: int, after_id: str = "0-0", count: int = 500, block_ms: int | None = None
) -> list[tuple[str, Any]]:
    """Stream-level payloads after ``after_id``, oldest first."""
    entries = _read_log(client, Keys.stream_events(stream_id), after_id, count, block_ms)
    return [(entry_id, parse_event(fields["data"])) for entry_id, fields in entries]


def _read_log(client: redis.Redis, key: str, after_id: str, count: int, block_ms: int | None) -> list[tuple[str, dict]]:
    """Entries of a Redis stream after ``after_id``, oldest first; with ``block_ms``, waits that long for one."""
    if block_ms is None:
        return client.xrange(key, min=f"({after_id}" if after_id != "0-0" else "-", count=count)
    reply = client.xread({key: after_id}, count=count, block=block_ms)
    return reply[0][1] if reply else []


def write_landing_consumers(client: redis.Redis, stream_id: int, directory: str, evaluator_ids: Sequence[int]) -> None:
    """Replace the consumers of one of the stream's landing directories (``Keys.landing_consumers``)."""
    key = Keys.landing_consumers(stream_id, directory)
    client.delete(key)
    if evaluator_ids:
        client.sadd(key, *(Keys.evaluator_state(e) for e in evaluator_ids))


def write_plan(client: redis.Redis, evaluator_id: int, plan: EvaluatorPlan) -> None:
    """Store an evaluator's plan (JSON); evaluators re-read it at each batch boundary."""
    client.set(Keys.plan(evaluator_id), json.dumps(plan.model_dump(mode="json", by_alias=True), sort_keys=True))


def read_plan(client: redis.Redis, evaluator_id: int) -> EvaluatorPlan | None:
    return plan_of(client.get(Keys.plan(evaluator_id)))


def plan_of(raw: str | bytes | None) -> EvaluatorPlan | None:
    """The plan stored as ``raw`` (None: none)."""
    return None if raw is None else EvaluatorPlan.model_validate_json(raw)


def write_heartbeat(client: redis.Redis, status: EvaluatorStatus, ttl_seconds: int = 15) -> None:
    """The heartbeat (expires after ``ttl_seconds``) and the time of it (kept, for "last seen")."""
    with client.pipeline(transaction=False) as pipe:
        pipe.set(Keys.heartbeat(status.evaluator), status.model_dump_json(), ex=ttl_seconds)
        pipe.set(Keys.last_heartbeat(status.evaluator), repr(status.ts))
        pipe.execute()


def read_last_heartbeat_at(client: redis.Redis, evaluator_id: int) -> float | None:
    """The unix time of the evaluator's last heartbeat, however old (None: never)."""
    raw = client.get(Keys.last_heartbeat(evaluator_id))
    return None if raw is None else float(raw)


def read_heartbeat(client: redis.Redis, evaluator_id: int) -> EvaluatorStatus | None:
    raw = client.get(Keys.heartbeat(evaluator_id))
    return None if raw is None else EvaluatorStatus.model_validate_json(raw)


def record_ingest(client: redis.Redis, stream_id: int, ops: int) -> None:
    """Note that ``ops`` ops of a stream were just ingested (the input rate is read from these)."""
    if ops > 0:
        client.xadd(Keys.stream_ingested(stream_id), {"n": ops}, maxlen=INGESTED_MAXLEN, approximate=True)


def read_input(client: redis.Redis, stream_id: int, window_seconds: float,
               now: float | None = None) -> tuple[float, float | None]:
    """(ops ingested per second over the last ``window_seconds``, unix time of the last ingest or None)."""
    now = time.time() if now is None else now
    start_ms = int((now - window_seconds) * 1000)
    key = Keys.stream_ingested(stream_id)
    with client.pipeline(transaction=False) as pipe:
        pipe.xrevrange(key, min=f"{start_ms}-0", count=INGESTED_MAXLEN)
        pipe.xrevrange(key, count=1)
        recent, last = pipe.execute()
    ops = sum(int(fields["n"]) for _, fields in recent)
    last_at = int(last[0][0].split("-")[0]) / 1000 if last else None
    return ops / window_seconds, last_at


def write_component_heartbeat(client: redis.Redis, beat: ComponentHeartbeat, ttl_seconds: int = 60) -> None:
    client.set(Keys.component_heartbeat(beat.component), beat.model_dump_json(), ex=ttl_seconds)


def read_component_heartbeat(client: redis.Redis, component: str) -> ComponentHeartbeat | None:
    raw = client.get(Keys.component_heartbeat(component))
    return None if raw is None else ComponentHeartbeat.model_validate_json(raw)
# KEYS: cursor hash, stream events. ARGV: maxlen, then (aggregate id, window end, payload) triples.
_PUBLISH_VALUES = """
local n = 0
for i = 2, #ARGV, 3 do
  local last = redis.call('HGET', KEYS[1], ARGV[i])
  if not last or tonumber(ARGV[i + 1]) > tonumber(last) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'data', ARGV[i + 2])
    n = n + 1
  end
end
return n
"""


def publish_aggregate_values(client: redis.Redis, stream_id: int, values: Sequence[AggregateValue]) -> int:
    """Append window values to the stream's events, each at most once (a value of a window ending no
    later than the last one published for its subscription is dropped); returns how many were new."""
    if not values:
        return 0
    argv: list[Any] = [EVENTS_MAXLEN]
    for v in values:
        argv += [v.aggregate, repr(float(v.window_end)), v.model_dump_json()]
    script = client.register_script(_PUBLISH_VALUES)
    return int(script(keys=[Keys.aggregate_cursor(stream_id), Keys.stream_events(stream_id)], args=argv))


def write_sharing_report(client: redis.Redis, report: SharingReport) -> None:
    client.hset(Keys.sharing_report(report.stream), str(report.evaluator or 0), report.model_dump_json())


def read_sharing_reports(client: redis.Redis, stream_id: int) -> list[SharingReport]:
    """Each evaluator's latest report on the stream."""
    return [SharingReport.model_validate_json(raw) for raw in client.hvals(Keys.sharing_report(stream_id))]


#: report totals that every evaluator of a stream holds whole (each keeps the stream's full store)
_COMMON_TOTALS = ("stored_tuples", "ops")


def read_sharing_report(client: redis.Redis, stream_id: int) -> SharingReport | None:
    """The stream's report: its evaluators' classes side by side, their totals added up (the store
    and the op count taken once)."""
    reports = sorted(read_sharing_reports(client, stream_id), key=lambda r: r.evaluator or 0)
    if len(reports) <= 1:
        return reports[0] if reports else None
    totals: dict[str, Any] = {}
    for report in reports:
        for name, value in report.totals.items():
            common = name in _COMMON_TOTALS
            totals[name] = max(totals.get(name, value), value) if common else totals.get(name, 0) + value
    return SharingReport(stream=stream_id, sharing=reports[0].sharing,
                         classes=[c for r in reports for c in r.classes],
                         aggregate_classes=[c for r in reports for c in r.aggregate_classes],
                         totals=totals, ts=max(r.ts for r in reports))


def publish_subscription_results(client: redis.Redis, results: Sequence[SubscriptionResult]) -> int:
    """Append WXQuery result items to their subscriptions' Redis streams, in order (one round trip), each
    at most once; returns how many were new.

    The n-th item a subscription got from the op of seq ``s`` has the entry id ``s-n``, so publishing a
    batch again (its evaluator died after publishing, before saving its state) adds nothing twice:
    Redis refuses an id not above the stream's last one, and items go out in seq order.
    """
    if not results:
        return 0
    produced: dict[tuple[int, int], int] = {}
    with client.pipeline(transaction=False) as pipe:
        for result in results:
            n = produced[result.subscription, result.seq] = produced.get((result.subscription, result.seq), 0) + 1
            pipe.xadd(Keys.subscription_results(result.subscription), {"data": result.model_dump_json()},
                      id=f"{result.seq}-{n}", maxlen=CHANGES_MAXLEN, approximate=True)
        replies = pipe.execute(raise_on_error=False)
    new = 0
    for reply in replies:
        if isinstance(reply, redis.ResponseError) and "equal or smaller" in str(reply):
            continue  # published before
        if isinstance(reply, Exception):
            raise reply
        new += 1
    return new


def read_subscription_results(client: redis.Redis, subscription_id: int, after_id: str = "0-0", count: int = 500,
                              block_ms: int | None = None) -> list[tuple[str, SubscriptionResult]]:
    """A subscription's result items after ``after_id``, oldest first; blocks up to ``block_ms`` if none."""
    entries = _read_log(client, Keys.subscription_results(subscription_id), after_id, count, block_ms)
    return [(entry_id, SubscriptionResult.model_validate_json(fields["data"])) for entry_id, fields in entries]
