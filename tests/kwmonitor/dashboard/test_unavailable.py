"""A handshake that finds the database away is closed with 4503; an error once the socket was answered is not
turned into one (the real case, PostgreSQL crashed under daphne, is in ``tests/faults/test_postgres_outage.py``)."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator
from django.db import InterfaceError, OperationalError

from kwmonitor.dashboard.unavailable import TRY_AGAIN_LATER, TryAgainLater


def app_failing(error: Exception, *, after_connect: bool, after_accept: bool):
    async def app(scope, receive, send):
        if after_connect:
            assert (await receive())["type"] == "websocket.connect"
        if after_accept:
            await send({"type": "websocket.accept"})
        raise error

    return app


@pytest.mark.parametrize("after_connect", [False, True])
@pytest.mark.parametrize("error", [OperationalError("connection refused"), InterfaceError("connection already closed")])
def test_a_database_error_before_the_answer_closes_with_try_again_later(error, after_connect):
    async def run():
        communicator = WebsocketCommunicator(TryAgainLater(app_failing(error, after_connect=after_connect,
                                                                       after_accept=False)), "/ws/queries/1/")
        connected, _ = await communicator.connect()
        closed = await communicator.receive_output()
        await communicator.wait()
        return connected, closed

    connected, closed = asyncio.run(run())
    assert connected and closed == {"type": "websocket.close", "code": TRY_AGAIN_LATER}


def test_an_error_after_the_answer_and_any_other_error_go_on():
    async def run(app):
        communicator = WebsocketCommunicator(TryAgainLater(app), "/ws/queries/1/")
        with pytest.raises(Exception) as raised:
            await communicator.connect()
            await communicator.wait()
        return raised.value

    assert isinstance(asyncio.run(run(app_failing(OperationalError("x"), after_connect=True, after_accept=True))),
                      OperationalError)
    assert isinstance(asyncio.run(run(app_failing(ValueError("y"), after_connect=True, after_accept=False))), ValueError)
