"""The live feeds through the real ASGI application (kwmonitor.asgi) and real Redis."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import transaction
from django.test import Client

from kwmonitor.accounts.models import ApiToken
from kwmonitor.asgi import application
from kwmonitor.dashboard.consumers import REDIS_CLIENT_NAME
from streaming import bus
from streaming.events import BatchMetrics, DeadLetter, EvaluatorStatus, ResultView

from .conftest import added, removed

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

ORIGIN = (b"origin", b"http://localhost")
HOST = (b"host", b"localhost")


def session_cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode())


def communicator(path: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=[HOST, ORIGIN, *headers])


async def accepted(path: str, *headers: tuple[bytes, bytes]) -> bool:
    ws = communicator(path, *headers)
    connected, _ = await ws.connect()
    await ws.disconnect()
    return connected


async def receive(ws: WebsocketCommunicator, n: int, timeout: float = 5.0) -> list[dict]:
    return [await ws.receive_json_from(timeout=timeout) for _ in range(n)]


def test_refused_without_login(query):
    assert not asyncio.run(accepted(f"/ws/queries/{query.pk}/"))
    assert not asyncio.run(accepted(f"/ws/streams/{query.stream_id}/"))


def test_refused_with_a_bad_token_even_with_a_session(query, user):
    assert not asyncio.run(accepted(f"/ws/queries/{query.pk}/?token=nope"))
    assert not asyncio.run(accepted(f"/ws/queries/{query.pk}/", (b"authorization", b"Token nope"), session_cookie(user)))


def test_accepted_with_session_or_token_and_token_use_recorded(query, user, redis_client):
    row, token = ApiToken.issue(user, "tests")
    assert row.last_used is None
    assert asyncio.run(accepted(f"/ws/queries/{query.pk}/", session_cookie(user)))
    assert asyncio.run(accepted(f"/ws/queries/{query.pk}/?token={token}"))
    assert asyncio.run(accepted(f"/ws/queries/{query.pk}/", (b"authorization", f"Token {token}".encode())))
    row.refresh_from_db()
    assert row.last_used is not None


def test_refused_for_another_users_query_but_not_for_staff(query, django_user_model, staff_user, redis_client):
    other = django_user_model.objects.create_user("bob", "bob@example.com", "bob-password-1")
    assert not asyncio.run(accepted(f"/ws/queries/{query.pk}/", session_cookie(other)))
    assert not asyncio.run(accepted(f"/ws/streams/{query.stream_id}/", session_cookie(other)))
    assert not asyncio.run(accepted(f"/ws/queries/{query.pk + 1000}/", session_cookie(staff_user)))
    assert asyncio.run(accepted(f"/ws/queries/{query.pk}/", session_cookie(staff_user)))
    assert asyncio.run(accepted(f"/ws/streams/{query.stream_id}/", session_cookie(staff_user)))


def test_refused_from_a_foreign_origin_and_closed_4400_for_a_malformed_after(query, user, redis_client):
    cookie = session_cookie(user)
    ws = WebsocketCommunicator(application, f"/ws/queries/{query.pk}/", headers=[HOST, (b"origin", b"http://evil.example"), cookie])
    assert not asyncio.run(ws.connect())[0]

    async def malformed_after():
        ws = communicator(f"/ws/queries/{query.pk}/?after=latest", cookie)
        assert (await ws.connect())[0]
        closed = await ws.receive_output(timeout=5)
        await ws.disconnect(code=closed["code"])
        return closed

    assert asyncio.run(malformed_after()) == {"type": "websocket.close", "code": 4400}


def test_snapshot_then_changes(query, user, redis_client):
    q = query.pk
    bus.publish_changes(redis_client, q, [added(q, 1), added(q, 2), added(q, 3)])
    snapshot_id = redis_client.xrevrange(bus.Keys.changes(q), count=1)[0][0]
    cookie = session_cookie(user)

    async def scenario():
        ws = communicator(f"/ws/queries/{q}/", cookie)
        assert (await ws.connect())[0]
        snapshot = await ws.receive_json_from(timeout=5)
        await ws.send_to(text_data="not json: feeds are one-way and ignore what clients send")
        bus.publish_changes(redis_client, q, [removed(q, 2, seq=4), added(q, 4)])
        changes = await receive(ws, 2)
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
        return snapshot, changes

    snapshot, changes = asyncio.run(scenario())
    assert snapshot["type"] == "snapshot" and snapshot["query"] == q
    assert [r["tuples"][1]["key"] for r in snapshot["results"]] == [3, 2, 1]  # newest add first
    assert snapshot["last_id"] == snapshot_id and snapshot["last_seq"] == 3  # the seq of the last change
    assert [(c["type"], c["result"]["tuples"][1]["key"]) for c in changes] == [("result.remove", 2), ("result.add", 4)]
    assert [c["id"] for c in changes] == [e for e, _ in redis_client.xrange(bus.Keys.changes(q))[3:]]


def test_after_sends_only_later_changes_and_a_trimmed_after_gets_a_snapshot(query, user, redis_client):
    q = query.pk
    bus.publish_changes(redis_client, q, [added(q, i) for i in range(1, 6)])
    ids = [e for e, _ in redis_client.xrange(bus.Keys.changes(q))]
    cookie = session_cookie(user)

    async def first_messages(after: str, n: int) -> list[dict]:
        ws = communicator(f"/ws/queries/{q}/?after={after}", cookie)
        assert (await ws.connect())[0]
        messages = await receive(ws, n)
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
        return messages

    later = asyncio.run(first_messages(ids[2], 2))
    assert [m["id"] for m in later] == ids[3:]
    redis_client.xtrim(bus.Keys.changes(q), maxlen=2, approximate=False)
    (snapshot,) = asyncio.run(first_messages(ids[1], 1))
    assert snapshot["type"] == "snapshot" and len(snapshot["results"]) == 5 and snapshot["last_id"] == ids[-1]


def test_forced_reconnects_resume_with_no_gap_and_no_duplicate(query, user, redis_client):
    """A producer keeps publishing while the client is cut off four times and
    resumes from its last id each time: replaying what it got gives exactly
    the published stream and the final live set."""
    q = query.pk
    bus.publish_changes(redis_client, q, [added(q, i) for i in range(5)])
    producer_done = threading.Event()

    def produce():
        for i in range(5, 85):
            batch = [added(q, i)] if i % 3 else [removed(q, i - 5), added(q, i)]
            bus.publish_changes(redis_client, q, batch)
            time.sleep(0.005)
        producer_done.set()

    cookie = session_cookie(user)

    async def client() -> tuple[dict, list[dict], int]:
        snapshot, changes, last_id, connections = None, [], None, 0
        while True:
            path = f"/ws/queries/{q}/" + (f"?after={last_id}" if last_id else "")
            ws = communicator(path, cookie)
            assert (await ws.connect())[0]
            connections += 1
            for _ in range(15):  # cut off after a few messages, then reconnect
                if await ws.receive_nothing(timeout=0.5):
                    break
                message = await ws.receive_json_from()
                if message["type"] == "snapshot":
                    assert snapshot is None, "a resumed connection sent a snapshot"
                    snapshot, last_id = message, message["last_id"]
                else:
                    changes.append(message)
                    last_id = message["id"]
            await ws.disconnect()
            if producer_done.is_set() and last_id == redis_client.xrevrange(bus.Keys.changes(q), count=1)[0][0]:
                return snapshot, changes, connections

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        snapshot, changes, connections = asyncio.run(client())
    finally:
        thread.join()
    assert connections >= 4
    stream_ids = [e for e, _ in redis_client.xrange(bus.Keys.changes(q), min=f"({snapshot['last_id']}")]
    assert [c["id"] for c in changes] == stream_ids
    live = {r["key"] for r in snapshot["results"]}
    for c in changes:
        if c["type"] == "result.add":
            assert c["result"]["key"] not in live
            live.add(c["result"]["key"])
        else:
            live.remove(c["result"]["key"])
    assert live == {r.key for r in bus.read_snapshot(redis_client, q)[1]}


def _status(stream_id: int, status: str, ts: float) -> EvaluatorStatus:
    return EvaluatorStatus(evaluator=1, stream=stream_id, status=status, ts=ts)


def test_stream_feed_replays_then_follows(query, staff_user, redis_client):
    s = query.stream_id
    first = bus.publish_stream_event(redis_client, s, _status(s, "starting", 1.0))
    bus.publish_stream_event(
        redis_client, s,
        BatchMetrics(evaluator=1, stream=s, batch_id=0, input_rows=10, rows_per_second=5.0, duration_ms=12.5, ts=2.0),
    )

    cookie = session_cookie(staff_user)

    async def scenario():
        ws = communicator(f"/ws/streams/{s}/", cookie)
        assert (await ws.connect())[0]
        replayed = await receive(ws, 2)
        bus.publish_stream_event(redis_client, s, DeadLetter(stream=s, seq=3, line="{", reason="malformed JSON", ts=3.0))
        (live,) = await receive(ws, 1)
        await ws.disconnect()
        ws = communicator(f"/ws/streams/{s}/?after={first}", cookie)
        assert (await ws.connect())[0]
        resumed = await receive(ws, 2)
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()
        return replayed, live, resumed

    replayed, live, resumed = asyncio.run(scenario())
    assert [m["type"] for m in replayed] == ["evaluator.status", "batch.metrics"] and replayed[0]["id"] == first
    assert live["type"] == "deadletter" and live["reason"] == "malformed JSON" and live["line"] == "{"
    assert [m["type"] for m in resumed] == ["batch.metrics", "deadletter"]


def test_raw_dead_letter_lines_reach_staff_only(query, user, staff_user, redis_client):
    s = query.stream_id
    bus.publish_stream_event(redis_client, s, DeadLetter(stream=s, seq=3, line='{"secret": 1', reason="malformed JSON", ts=3.0))

    async def dead_letter(cookie) -> dict:
        ws = communicator(f"/ws/streams/{s}/", cookie)
        assert (await ws.connect())[0]
        (message,) = await receive(ws, 1)
        await ws.disconnect()
        return message

    owner_sees = asyncio.run(dead_letter(session_cookie(user)))
    staff_sees = asyncio.run(dead_letter(session_cookie(staff_user)))
    assert (owner_sees["reason"], owner_sees["line"]) == ("malformed JSON", None)
    assert (staff_sees["reason"], staff_sees["line"]) == ("malformed JSON", '{"secret": 1')


@pytest.mark.parametrize("host, origin, trusted, allowed", [
    (b"127.0.0.1:8000", b"http://127.0.0.1:8000", [], True),
    (b"127.0.0.1:8000", b"http://127.0.0.1:9999", [], False),  # another port of the same host
    (b"127.0.0.1:8000", b"https://127.0.0.1:8000", [], False),  # another scheme
    (b"127.0.0.1:8000", b"http://127.0.0.1", [], False),  # port 80 is not 8000
    (b"localhost", b"http://localhost:80", [], True),
    (b"127.0.0.1:8000", b"null", [], False),
    (b"evil.example:8000", b"http://evil.example:8000", [], False),  # a host not in ALLOWED_HOSTS
    (b"127.0.0.1:8000", b"https://dash.example", ["https://dash.example"], True),
    (b"127.0.0.1:8000", b"https://dash.example:8443", ["https://dash.example"], False),
])
def test_the_origin_must_match_scheme_host_and_port(query, user, redis_client, settings, host, origin, trusted, allowed):
    settings.CSRF_TRUSTED_ORIGINS = trusted
    headers = [(b"host", host), (b"origin", origin), session_cookie(user)]

    async def connect() -> bool:
        ws = WebsocketCommunicator(application, f"/ws/queries/{query.pk}/", headers=headers)
        connected, _ = await ws.connect()
        await ws.disconnect()
        return connected

    assert asyncio.run(connect()) is allowed


def test_without_an_origin_the_handshake_is_refused(query, user, redis_client):
    ws = WebsocketCommunicator(application, f"/ws/queries/{query.pk}/", headers=[HOST, session_cookie(user)])
    assert not asyncio.run(ws.connect())[0]


def feed_connections(redis_client) -> set[str]:
    return {c["id"] for c in redis_client.client_list() if c["name"] == REDIS_CLIENT_NAME}


def test_disconnect_releases_the_redis_connection(query, user, redis_client):
    cookie = session_cookie(user)
    before = feed_connections(redis_client)

    async def scenario():
        ws = communicator(f"/ws/queries/{query.pk}/", cookie)
        assert (await ws.connect())[0]
        await ws.receive_json_from(timeout=5)
        during = feed_connections(redis_client)
        await ws.disconnect()
        return during

    assert len(asyncio.run(scenario()) - before) == 1
    assert feed_connections(redis_client) <= before


def test_result_payloads_round_trip(query):
    view = added(query.pk, 7).result
    assert ResultView.model_validate(view.model_dump(mode="json")) == view


def test_a_feed_opened_before_any_change_gets_the_first_ones(query, user, redis_client):
    q = query.pk
    cookie = session_cookie(user)

    async def scenario():
        ws = communicator(f"/ws/queries/{q}/", cookie)
        assert (await ws.connect())[0]
        snapshot = await ws.receive_json_from(timeout=5)
        bus.publish_changes(redis_client, q, [added(q, 1), added(q, 2)])
        changes = await receive(ws, 2)
        await ws.disconnect()
        return snapshot, changes

    snapshot, changes = asyncio.run(scenario())
    assert snapshot == {"type": "snapshot", "query": q, "last_id": "0-0", "results": [], "last_seq": None, "config": None}
    assert [c["type"] for c in changes] == ["result.add", "result.add"]


def test_a_blocked_feed_outlives_the_redis_socket_timeout(query, user, redis_client):
    """Idle feeds block in XREAD for BLOCK_MS (5 s, redis-py's default socket timeout too):
    that must not look like a dead Redis."""
    q = query.pk
    cookie = session_cookie(user)

    async def scenario():
        ws = communicator(f"/ws/queries/{q}/", cookie)
        assert (await ws.connect())[0]
        await ws.receive_json_from(timeout=5)
        assert await ws.receive_nothing(timeout=6.5)  # a blocking read ended empty, quietly
        bus.publish_changes(redis_client, q, [added(q, 1)])
        change = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return change

    assert asyncio.run(scenario())["type"] == "result.add"


def test_a_failed_feed_closes_the_socket_with_a_code_daphne_accepts(query, user, redis_client):
    cookie = session_cookie(user)
    before = feed_connections(redis_client)

    async def scenario():
        ws = communicator(f"/ws/queries/{query.pk}/", cookie)
        assert (await ws.connect())[0]
        await ws.receive_json_from(timeout=5)
        (feed,) = feed_connections(redis_client) - before
        redis_client.client_kill_filter(_id=feed)
        closed = await ws.receive_output(timeout=5)
        await ws.disconnect(code=closed["code"])  # what the server does once the close handshake is over
        return closed

    closed = asyncio.run(scenario())
    assert closed["type"] == "websocket.close" and 3000 <= closed["code"] <= 4999


def test_an_edit_reaches_the_open_feed_after_commit_and_later_snapshots(query, user, redis_client):
    q = query.pk
    bus.publish_changes(redis_client, q, [added(q, 1)])
    cookie = session_cookie(user)

    async def scenario():
        ws = communicator(f"/ws/queries/{q}/", cookie)
        assert (await ws.connect())[0]
        await ws.receive_json_from(timeout=5)

        def edit():
            with transaction.atomic():  # as the admin saves: the query, then its predicates, in one transaction
                query.keywords = "silk scarf"
                query.tmax = 3
                query.enabled = False
                query.save()
                query.predicates.create(relation="Product", attribute="price", op=">=", value=40)
                query.predicates.create(relation="Customer", attribute="state", op="=", value="Texas")

        await database_sync_to_async(edit)()
        (update,) = await receive(ws, 1)
        assert await ws.receive_nothing(timeout=0.3)  # one announcement for the whole transaction
        await ws.disconnect()
        ws = communicator(f"/ws/queries/{q}/", cookie)
        assert (await ws.connect())[0]
        snapshot = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return update, snapshot

    update, snapshot = asyncio.run(scenario())
    assert update["type"] == "query.updated" and update["id"] == snapshot["last_id"]
    assert update["config"] == snapshot["config"] == {
        "name": "dress in texas", "keywords": ["silk", "scarf"], "tmax": 3, "window_seconds": None,
        "predicates": ["Product.price >= 40", "Customer.state = 'Texas'"], "enabled": False, "stream": query.stream_id,
    }
    assert snapshot["last_seq"] == 1 and len(snapshot["results"]) == 1  # the edit is not a result change
    query.save()  # saving without a change announces nothing
    assert redis_client.xlen(bus.Keys.changes(q)) == 2
