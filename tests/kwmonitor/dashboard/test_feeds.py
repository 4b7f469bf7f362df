"""Resume decisions of the live feeds, against a real Redis stream."""

from __future__ import annotations

import asyncio
import json

import pytest
from redis.asyncio import Redis

from kwmonitor.dashboard import feeds
from kwmonitor.dashboard.feeds import StreamInfo, entry_id_order, is_entry_id
from streaming import bus

from .conftest import added

pytestmark = pytest.mark.redis


def test_entry_ids_compare_as_numbers():
    assert entry_id_order("10-0") > entry_id_order("9-5") and entry_id_order("9-10") > entry_id_order("9-9")
    assert is_entry_id("1732000000000-3") and not is_entry_id("1732000000000") and not is_entry_id("$")


@pytest.mark.parametrize(
    ("info", "cursor", "resumable"),
    [
        (StreamInfo(last_id="5-0", first_kept="1-0", complete=True), "0-0", True),
        (StreamInfo(last_id="5-0", first_kept="3-0", complete=False), "2-0", False),  # (2-0, 3-0) may be trimmed
        (StreamInfo(last_id="5-0", first_kept="3-0", complete=False), "3-0", True),
        (StreamInfo(last_id="5-0", first_kept="1-0", complete=True), "6-0", False),  # unknown to this stream
        (StreamInfo(last_id="5-0", first_kept="1-0", complete=True, max_deleted="4-0"), "3-0", False),
        (StreamInfo(last_id="5-0", first_kept="1-0", complete=True, max_deleted="4-0"), "4-0", True),
    ],
)
def test_can_resume_only_when_nothing_after_the_cursor_is_gone(info, cursor, resumable):
    assert info.can_resume_from(cursor) is resumable


def first_texts(redis_url: str, query_id: int, after: str | None, n: int) -> list[str]:
    async def run():
        client = Redis.from_url(redis_url, decode_responses=True)
        messages = feeds.query_messages(client, query_id, after, block_ms=100)
        try:
            return [await messages.__anext__() for _ in range(n)]
        finally:
            await messages.aclose()
            await client.aclose()

    return asyncio.run(run())


def first_messages(redis_url: str, query_id: int, after: str | None, n: int) -> list[dict]:
    return [json.loads(text) for text in first_texts(redis_url, query_id, after, n)]


def test_a_change_is_sent_as_the_evaluator_encoded_it_with_its_id(redis_client, redis_url):
    bus.publish_changes(redis_client, 6, [added(6, i) for i in range(2)])
    (first_id, _), (second_id, second) = redis_client.xrange(bus.Keys.changes(6))
    (text,) = first_texts(redis_url, 6, first_id, 1)
    assert text == second["data"][:-1] + f',"id":"{second_id}"}}'
    assert json.loads(text) == {**json.loads(second["data"]), "id": second_id}


def test_a_deleted_change_after_the_cursor_forces_a_snapshot(redis_client, redis_url):
    bus.publish_changes(redis_client, 3, [added(3, i) for i in range(4)])
    ids = [e for e, _ in redis_client.xrange(bus.Keys.changes(3))]
    assert [m["id"] for m in first_messages(redis_url, 3, ids[1], 2)] == ids[2:]
    redis_client.xdel(bus.Keys.changes(3), ids[2])
    (message,) = first_messages(redis_url, 3, ids[1], 1)
    assert message["type"] == "snapshot" and message["last_id"] == ids[3]


def test_an_id_from_a_vanished_stream_gets_a_snapshot(redis_client, redis_url):
    (message,) = first_messages(redis_url, 4, "1732000000000-0", 1)
    assert message == {"type": "snapshot", "query": 4, "last_id": "0-0", "results": [], "last_seq": None, "config": None}


def test_an_id_the_stream_no_longer_holds_gets_a_snapshot(redis_client, redis_url):
    bus.publish_changes(redis_client, 5, [added(5, i) for i in range(3)])
    held = [e for e, _ in redis_client.xrange(bus.Keys.changes(5))][1]
    redis_client.delete(bus.Keys.changes(5), bus.Keys.live(5), bus.Keys.published_seq(5))  # Redis lost them
    # Entry ids are Redis's clock in ms: a stream made again within the same millisecond would reuse the old
    # ids (a Redis that lost its data takes far longer to come back); the new ids come from a later one.
    held_ms = int(held.split("-")[0])
    while (lambda now: now[0] * 1000 + now[1] // 1000)(redis_client.time()) <= held_ms:
        pass
    bus.publish_changes(redis_client, 5, [added(5, i) for i in range(4)])  # published again, under new ids
    (message,) = first_messages(redis_url, 5, held, 1)
    assert message["type"] == "snapshot" and len(message["results"]) == 4


def test_a_live_set_given_back_sends_a_reader_that_held_it_before_a_new_snapshot(redis_client, redis_url):
    """After a Redis loss the evaluator writes the live set back whole, with a mark on the change stream: a
    reader that read the empty stream (or any id before the mark) gets a new snapshot there; the mark itself
    is never sent, and a reader past it gets the changes after it."""
    adds = {added(8, i, seq=5).result.key: added(8, i, seq=5).model_dump_json() for i in range(3)}
    bus.restore_live(redis_client, 8, 6, adds)
    ((mark, _),) = redis_client.xrange(bus.Keys.changes(8))
    (snapshot,) = first_messages(redis_url, 8, "0-0", 1)
    assert (snapshot["type"], snapshot["last_id"], snapshot["last_seq"], len(snapshot["results"])) == (
        "snapshot", mark, 6, 3)
    bus.publish_changes(redis_client, 8, [added(8, 7)])
    (_, (change, _)) = redis_client.xrange(bus.Keys.changes(8))
    (snapshot,) = first_messages(redis_url, 8, "0-0", 1)
    assert (snapshot["type"], snapshot["last_id"], len(snapshot["results"])) == ("snapshot", change, 4)
    (message,) = first_messages(redis_url, 8, mark, 1)
    assert (message["type"], message["id"]) == ("result.add", change)
