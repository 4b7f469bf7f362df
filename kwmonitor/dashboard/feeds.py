"""The live feeds: the messages a websocket sends for one query or one stream.

Query feed (the snapshot-then-changes protocol of docs/feeds.md): a ``snapshot``
payload (the live set and the change-stream id it includes), then every change
after that id, each change being its typed payload plus ``"id"``: its entry id.
A reader that already holds the set up to some id passes it as ``after`` and
gets only the changes after it, unless changes after that id may have been
trimmed from the Redis stream (or the id is unknown to it): then it gets a new
snapshot, which replaces whatever it held. So does a reader whose id the
stream no longer holds: Redis lost the stream and the evaluator published it
again under new ids (docs/ops.md, "Redis"). Each batch of changes is read in one
MULTI/EXEC with the stream's trimming horizon, so a reader that fell behind the
trimming is resynchronised by a snapshot instead of silently missing changes.

Stream feed: stream-level payloads (evaluator status, batch metrics, dead
letters, dropping ratios, rearrangements, aggregate values, sharing reports),
each plus ``"id"``, as the viewer's :class:`~.audience.Audience` may see them
(staff whole; others without other users' queries, subscriptions and raw
dead-letter lines); without ``after`` it starts with the last ``replay`` of
them. It is a log, not a set: an ``after`` older than what Redis still keeps
resumes from the oldest kept.

Subscription feed: a WXQuery subscription's result items
(``subscription.result`` payloads plus ``"id"``), a log like the stream feed.

All are async generators over ``redis.asyncio`` that run until cancelled, of
the JSON text a socket sends: a change or result item is the evaluator's
encoding forwarded as it is, with ``"id"`` put in (made once per entry for all
the process's feeds of it); a snapshot or stream event is encoded once.
Given a ``follower`` (:class:`Followed`: the web process's relay of the
Redis stream, :mod:`.relay`), a feed that has read everything there is
waits for the relay's next batch instead of blocking in a read of its own,
and takes it as it is when it continues the feed's cursor; otherwise (a gap
or a reset) it reads from the Redis stream itself, as above.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol

from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from streaming.bus import SNAPSHOT_SEQ_SCAN, Keys, snapshot_of
from streaming.events import Snapshot, SubscriptionResult, parse_event

from .audience import Audience

__all__ = [
    "BATCH",
    "BLOCK_MS",
    "Batch",
    "Followed",
    "STREAM_REPLAY",
    "STREAM_REPLAY_MAX",
    "StreamInfo",
    "continues",
    "entries_after",
    "entry_id_order",
    "is_entry_id",
    "query_messages",
    "read_snapshot",
    "stream_messages",
    "subscription_messages",
]

logger = logging.getLogger(__name__)

BATCH = 500
BLOCK_MS = 5_000
STREAM_REPLAY = 500
STREAM_REPLAY_MAX = 5_000
_ENTRY_ID = re.compile(r"\d{1,20}-\d{1,20}")


def is_entry_id(text: str) -> bool:
    """Whether ``text`` is a full Redis stream entry id (``<ms>-<n>``)."""
    return _ENTRY_ID.fullmatch(text) is not None


def entry_id_order(entry_id: str) -> tuple[int, int]:
    """Sort key of an entry id (ids compare as pairs of integers, not as text)."""
    ms, _, n = entry_id.partition("-")
    return int(ms), int(n or 0)


@dataclass(frozen=True)
class StreamInfo:
    """Which entries of a Redis stream are still there.

    ``last_id`` is the last id ever added; ``first_kept`` the oldest id still
    kept; ``complete`` says no entry was ever trimmed; ``max_deleted`` is the
    largest id removed by XDEL ("0-0" if none).
    """

    last_id: str
    first_kept: str
    complete: bool
    max_deleted: str = "0-0"

    def can_resume_from(self, entry_id: str) -> bool:
        """True when every entry ever added after ``entry_id`` is still in the stream."""
        at = entry_id_order(entry_id)
        if at > entry_id_order(self.last_id) or entry_id_order(self.max_deleted) > at:
            return False
        return self.complete or entry_id_order(self.first_kept) <= at


def _info(reply: Any) -> StreamInfo | None:
    if isinstance(reply, ResponseError):  # no such key: no change was ever published
        return None
    if isinstance(reply, Exception):
        raise reply
    length = reply["length"]
    first = reply.get("first-entry")
    return StreamInfo(
        last_id=reply["last-generated-id"],
        first_kept=first[0] if length and first else reply["last-generated-id"],
        complete=reply.get("entries-added", -1) == length,
        max_deleted=reply.get("max-deleted-entry-id", "0-0"),
    )


@dataclass(frozen=True)
class Batch:
    """New entries of a followed Redis stream and the id of the entry before them (``prev``; None: a reset,
    read the stream itself). ``cache`` is shared by every feed the batch is handed to: a message made from
    an entry once serves them all."""

    prev: str | None
    entries: list[tuple[str, dict[str, str]]]
    cache: dict[str, Any]


class Followed(Protocol):
    """A Redis stream as a feed follows it instead of blocking on it (:class:`.relay.Follower`)."""

    async def after(self, cursor: str) -> Batch | None:
        """The next batch that starts right after ``cursor``, or None: read the stream itself."""


async def _followed(follower: Followed, cursor: str) -> AsyncIterator[Batch]:
    """The follower's batches for as long as each continues the one before, from ``cursor``."""
    while (batch := await follower.after(cursor)) is not None:
        yield batch
        cursor = batch.entries[-1][0]


def continues(info: StreamInfo | None, held: bool, cursor: str) -> bool:
    """Whether entries read after ``cursor`` (:func:`entries_after`) are all that came after it: the stream
    still holds ``cursor`` and nothing after it was trimmed or deleted."""
    return held and (cursor == "0-0" if info is None else info.can_resume_from(cursor))


async def read_snapshot(client: Redis, query_id: int) -> Snapshot:
    """The live set, the id (and seq) of the last change it includes and the query's configuration, in one MULTI/EXEC."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.hvals(Keys.live(query_id))
        pipe.xrevrange(Keys.changes(query_id), count=SNAPSHOT_SEQ_SCAN)
        pipe.get(Keys.query_config(query_id))
        values, newest, config = await pipe.execute()
    return snapshot_of(query_id, values, newest, config)


async def entries_after(client: Redis, key: str, cursor: str) -> tuple[list[Any], StreamInfo | None, bool]:
    """Up to BATCH entries of the Redis stream ``key`` after ``cursor`` together with the horizon they were
    read at (None: no such stream), and whether the stream still holds the entry ``cursor`` names ("0-0"
    names none), in one MULTI/EXEC."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.xrange(key, min=f"({cursor}", count=BATCH)
        pipe.xinfo_stream(key)
        if cursor != "0-0":
            pipe.xrange(key, min=cursor, max=cursor, count=1)
        entries, info, *at = await pipe.execute(raise_on_error=False)
    for reply in (entries, *at):
        if isinstance(reply, Exception):
            raise reply
    return entries, _info(info), not at or bool(at[0])


def _forward(payload_json: str, entry_id: str) -> str:
    """A payload's JSON object plus ``"id"``: the text a socket sends (an entry id has nothing to escape)."""
    return f'{payload_json[:-1]},"id":"{entry_id}"}}'


def _with_id(payload: Any, entry_id: str) -> str:
    return _forward(payload.model_dump_json(), entry_id)


def _change_message(entry_id: str, fields: dict[str, str]) -> str:
    """A change as the evaluator encoded it, forwarded as it is (not decoded and encoded again)."""
    return _forward(fields["data"], entry_id)


async def query_messages(
    client: Redis, query_id: int, after: str | None = None, block_ms: int = BLOCK_MS, follower: Followed | None = None
) -> AsyncIterator[str]:
    """A query's feed: snapshot (unless resuming from ``after``), then its changes, forever."""
    cursor = after
    while True:
        if cursor is None:
            snapshot = await read_snapshot(client, query_id)
            yield snapshot.model_dump_json()
            cursor = snapshot.last_id
        entries, info, held = await entries_after(client, Keys.changes(query_id), cursor)
        if not continues(info, held, cursor):
            if cursor != after:
                logger.warning("query %s: reader at %s fell behind the change stream; resending a snapshot", query_id, cursor)
            cursor = None
            continue
        restored = False
        for entry_id, fields in entries:
            if _restored(fields):
                restored = True
                break
            yield _change_message(entry_id, fields)
            cursor = entry_id
        if restored:  # what this reader holds was given back whole: it starts again from a snapshot
            cursor = None
        elif entries:
            cursor = entries[-1][0]
        elif follower is None:  # wait for the next change, then read it (with its horizon) at the top of the loop
            await client.xread({Keys.changes(query_id): cursor}, count=1, block=block_ms)
        else:  # the relay's batches, while they continue the cursor; then read the stream at the top of the loop
            async for batch in _followed(follower, cursor):
                for entry_id, fields in batch.entries:
                    if _restored(fields):
                        restored = True
                        break
                    if entry_id not in batch.cache:
                        batch.cache[entry_id] = _change_message(entry_id, fields)
                    yield batch.cache[entry_id]
                    cursor = entry_id
                if restored:
                    cursor = None
                    break


def _restored(fields: dict[str, str]) -> bool:
    """Whether a change stream entry is the evaluator's :class:`~streaming.events.LiveRestored` mark."""
    return fields.get("data", "").startswith('{"type":"live.restored"')


# The messages a log feed makes of entries; the dict caches what it made of each entry (by id) for other feeds.
Messages = Callable[[list[tuple[str, dict[str, str]]], dict[str, Any]], Awaitable[list[str]]]


async def _log_messages(client: Redis, key: str, after: str | None, replay: int, block_ms: int,
                        messages: Messages, follower: Followed | None = None) -> AsyncIterator[str]:
    """A Redis stream read as a log: the last ``replay`` entries (unless resuming from ``after``), then new ones."""
    cursor = after
    if cursor is None:
        tail = list(reversed(await client.xrevrange(key, count=max(replay, 1))))
        cursor = tail[-1][0] if tail else "0-0"  # "0-0" on an empty log: nothing can slip in unseen
        for found in await messages(tail[-replay:] if replay > 0 else [], {}):
            yield found
    while True:
        reply = await client.xread({key: cursor}, count=BATCH, block=block_ms if follower is None else None)
        entries = reply[0][1] if reply else []
        if entries:
            cursor = entries[-1][0]
        for found in await messages(entries, {}):
            yield found
        if follower is not None and not entries:
            async for batch in _followed(follower, cursor):
                for found in await messages(batch.entries, batch.cache):
                    yield found
                cursor = batch.entries[-1][0]


def _stream_event(entry_id: str, fields: dict[str, str]) -> Any | None:
    try:
        return parse_event(fields["data"])
    except (KeyError, ValidationError):
        logger.warning("stream event %s is not a known payload; skipped", entry_id)
        return None


def stream_messages(
    client: Redis, stream_id: int, audience: Callable[[], Awaitable[Audience]], after: str | None = None,
    replay: int = STREAM_REPLAY, block_ms: int = BLOCK_MS, follower: Followed | None = None,
) -> AsyncIterator[str]:
    """A stream's feed: the last ``replay`` events (unless resuming from ``after``), then new ones, forever.

    Each batch of entries is cut down to what ``audience()`` (asked again for
    every batch: a viewer's new query shows without reconnecting) may see.
    """
    async def messages(entries: list[tuple[str, dict[str, str]]], events: dict[str, Any]) -> list[str]:
        if not entries:
            return []
        viewer = await audience()
        out = []
        for entry_id, fields in entries:
            if entry_id not in events:
                events[entry_id] = _stream_event(entry_id, fields)
            event = events[entry_id]
            seen = viewer.view(event) if event is not None else None
            if seen is not None:
                out.append(_with_id(seen, entry_id))
        return out

    return _log_messages(client, Keys.stream_events(stream_id), after, replay, block_ms, messages, follower)


def _result_message(entry_id: str, fields: dict[str, str]) -> str | None:
    """A result item as the evaluator encoded it, once it is known to be one."""
    try:
        SubscriptionResult.model_validate_json(fields["data"])
        return _forward(fields["data"], entry_id)
    except (KeyError, ValidationError):
        logger.warning("subscription result %s is not a known payload; skipped", entry_id)
        return None


def subscription_messages(
    client: Redis, subscription_id: int, after: str | None = None, replay: int = STREAM_REPLAY,
    block_ms: int = BLOCK_MS, follower: Followed | None = None,
) -> AsyncIterator[str]:
    """A WXQuery subscription's result items: the last ``replay`` (unless resuming from ``after``), then new ones."""
    async def messages(entries: list[tuple[str, dict[str, str]]], made: dict[str, Any]) -> list[str]:
        for entry_id, fields in entries:
            if entry_id not in made:
                made[entry_id] = _result_message(entry_id, fields)
        return [made[entry_id] for entry_id, _ in entries if made[entry_id] is not None]

    return _log_messages(client, Keys.subscription_results(subscription_id), after, replay, block_ms, messages,
                         follower)
