"""The feeds' relay (one Redis reader per followed stream and process), against a real Redis."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any, AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwmonitor.dashboard import feeds, relay
from kwmonitor.dashboard.relay import READS_CLIENT_NAME, RELAY_CLIENT_NAME, relays
from streaming import bus

from .conftest import added

pytestmark = pytest.mark.redis


def named(redis_client, *names: str) -> set[str]:
    return {c["id"] for c in redis_client.client_list() if c["name"] in names}


async def take(messages: AsyncIterator[str], n: int) -> list[dict[str, Any]]:
    return [json.loads(await asyncio.wait_for(messages.__anext__(), 5)) for _ in range(n)]


def stream_ids(redis_client, query_id: int) -> list[str]:
    return [entry_id for entry_id, _ in redis_client.xrange(bus.Keys.changes(query_id))]


class Announcing:
    """A follower that says when its feed first waits on it (the feed has read everything Redis held)."""

    def __init__(self, follower: feeds.Followed) -> None:
        self.follower = follower
        self.waiting = asyncio.Event()

    async def after(self, cursor: str) -> feeds.Batch | None:
        self.waiting.set()
        return await self.follower.after(cursor)


def test_one_relay_connection_serves_every_feed_of_a_stream_and_leaves_with_the_last(redis_client):
    q = 21
    before = named(redis_client, RELAY_CLIENT_NAME, READS_CLIENT_NAME)

    async def run():
        process = relays()
        followers = [await process.follow(bus.Keys.changes(q)) for _ in range(3)]
        messages = [feeds.query_messages(process.reads(), q, follower=f) for f in followers]
        snapshots = [(await take(m, 1))[0] for m in messages]
        relay_connections = named(redis_client, RELAY_CLIENT_NAME) - before
        bus.publish_changes(redis_client, q, [added(q, 1)])
        bus.publish_changes(redis_client, q, [added(q, 2), added(q, 3)])
        changes = [await take(m, 3) for m in messages]
        for m, f in zip(messages, followers):
            await m.aclose()
            await f.close()
        return snapshots, relay_connections, changes

    snapshots, relay_connections, changes = asyncio.run(run())
    assert [s["type"] for s in snapshots] == ["snapshot"] * 3
    assert len(relay_connections) == 1
    assert [[c["id"] for c in feed] for feed in changes] == [stream_ids(redis_client, q)] * 3
    assert named(redis_client, RELAY_CLIENT_NAME, READS_CLIENT_NAME) <= before


def test_a_follower_that_falls_behind_reads_the_stream_itself_and_misses_nothing(redis_client, monkeypatch):
    """A follower's queue holds FOLLOWER_BATCHES batches; past that it is reset and the feed reads Redis."""
    monkeypatch.setattr(relay, "FOLLOWER_BATCHES", 2)
    q = 22

    async def run():
        process = relays()
        slow = await process.follow(bus.Keys.changes(q))
        pace = await process.follow(bus.Keys.changes(q))  # tells when the relay has handed a change on
        announcing = Announcing(slow)
        messages = feeds.query_messages(process.reads(), q, follower=announcing)
        snapshot = (await take(messages, 1))[0]
        first = asyncio.create_task(take(messages, 1))
        await announcing.waiting.wait()  # caught up: from now on it takes the relay's batches
        cursor = snapshot["last_id"]
        for seq in range(1, 10):
            bus.publish_changes(redis_client, q, [added(q, seq)])
            batch = await asyncio.wait_for(pace.after(cursor), 5)
            assert batch is not None
            cursor = batch.entries[-1][0]
        changes = await first + await take(messages, 8)  # 8 batches handed while it did not read: over 2
        await messages.aclose()
        await slow.close()
        await pace.close()
        return changes

    changes = asyncio.run(run())
    assert [c["seq"] for c in changes] == list(range(1, 10))
    assert [c["id"] for c in changes] == stream_ids(redis_client, q)


def test_a_followed_stream_that_redis_lost_gets_a_new_snapshot(redis_client):
    q = 23
    bus.publish_changes(redis_client, q, [added(q, i) for i in range(1, 4)])

    async def run():
        process = relays()
        follower = await process.follow(bus.Keys.changes(q))
        messages = feeds.query_messages(process.reads(), q, follower=follower)
        snapshot = (await take(messages, 1))[0]
        waiting = asyncio.create_task(take(messages, 1))  # reading the stream or waiting on the relay: either
        redis_client.delete(bus.Keys.changes(q), bus.Keys.live(q), bus.Keys.published_seq(q))  # Redis lost them
        bus.publish_changes(redis_client, q, [added(q, i) for i in range(1, 5)])  # published again, new ids
        (message,) = await waiting
        await messages.aclose()
        await follower.close()
        return snapshot, message

    snapshot, message = asyncio.run(run())
    assert len(snapshot["results"]) == 3
    assert message["type"] == "snapshot" and len(message["results"]) == 4
    assert message["last_id"] == stream_ids(redis_client, q)[-1]


_QUERY_IDS = itertools.count(100)


def unread(held: list[dict[str, Any]], published: int) -> int:
    """Changes published but neither in the feed's snapshot nor read from it since (every change adds one)."""
    return published - len(held[0]["results"]) - (len(held) - 1)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6)), min_size=1, max_size=6),
       bound=st.integers(1, 3), joins_at=st.integers(0, 5))
def test_feeds_following_one_relay_get_the_change_stream_exactly(redis_client, steps, bound, joins_at):
    """Whatever the publishing and reading pace, the queue bound and when a second feed joins, each feed is
    its snapshot's id followed by every later entry of the change stream, once and in order."""
    q = next(_QUERY_IDS)
    kept = relay.FOLLOWER_BATCHES
    relay.FOLLOWER_BATCHES = bound

    async def run():
        process = relays()
        feeds_, followers, got = [], [], []

        async def join():
            follower = await process.follow(bus.Keys.changes(q))
            followers.append(follower)
            feeds_.append(feeds.query_messages(process.reads(), q, follower=follower))
            got.append(await take(feeds_[-1], 1))

        await join()
        published = seq = 0
        for step, (publish, read) in enumerate(steps):
            if step == joins_at:
                await join()
            for _ in range(publish):
                seq += 1
                bus.publish_changes(redis_client, q, [added(q, seq)])
            published += publish
            for messages, held in zip(feeds_, got):
                held.extend(await take(messages, min(read, unread(held, published))))
        for messages, held in zip(feeds_, got):
            held.extend(await take(messages, unread(held, published)))
        for messages, follower in zip(feeds_, followers):
            await messages.aclose()
            await follower.close()
        return got

    try:
        got = asyncio.run(run())
    finally:
        relay.FOLLOWER_BATCHES = kept
    ids = stream_ids(redis_client, q)
    for snapshot, *changes in got:
        start = ids.index(snapshot["last_id"]) + 1 if snapshot["last_id"] != "0-0" else 0
        assert [c["id"] for c in changes] == ids[start:]
