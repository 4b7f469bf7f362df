"""The example feed client against a websocket server that fails its handshakes: a server error (HTTP 5xx, its
database or Redis away) is retried until it answers, a refusal (HTTP 4xx) ends the client at once. The soak
with faults found every client stopped for good when PostgreSQL was down while they reconnected (daphne
answered 500)."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus

import pytest
from websockets.asyncio.server import serve

from kwmonitor.feed_client import FeedRefused, follow

SNAPSHOT = {"type": "snapshot", "query": 5, "last_id": "7-0", "results": [], "last_seq": 3, "config": None}


def followed(failing: list[HTTPStatus]) -> tuple[list[dict], int]:
    """Run the client against a server that answers ``failing`` to the first handshakes, then sends a snapshot;
    the messages it printed and the handshakes the server saw."""
    handshakes = []

    def process_request(connection, request):
        handshakes.append(request.path)
        if len(handshakes) <= len(failing):
            return connection.respond(failing[len(handshakes) - 1], "down\n")
        return None

    async def handler(ws):
        await ws.send(json.dumps(SNAPSHOT))
        await ws.wait_closed()

    async def run():
        got: list[dict] = []
        async with serve(handler, "127.0.0.1", 0, process_request=process_request) as server:
            port = server.sockets[0].getsockname()[1]
            await asyncio.wait_for(follow(f"ws://127.0.0.1:{port}/ws/queries/5/", "t", got.append, limit=1,
                                          max_backoff=0.05), 30)
        return got

    return asyncio.run(run()), len(handshakes)


def test_a_server_error_is_retried_until_the_server_answers():
    got, handshakes = followed([HTTPStatus.INTERNAL_SERVER_ERROR, HTTPStatus.SERVICE_UNAVAILABLE])
    assert got == [SNAPSHOT] and handshakes == 3


@pytest.mark.parametrize("status", [HTTPStatus.FORBIDDEN, HTTPStatus.NOT_FOUND])
def test_a_refusal_ends_the_client(status):
    with pytest.raises(FeedRefused, match=f"HTTP {status.value}"):
        followed([status])
