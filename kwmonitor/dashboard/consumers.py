"""Websocket consumers of the live feeds (see :mod:`kwmonitor.dashboard.feeds`).

``/ws/queries/<id>/?after=<id>``, ``/ws/streams/<id>/?after=<id>`` and
``/ws/subscriptions/<id>/?after=<id>``: the
connection is refused (closed before the handshake completes) without an
authenticated user or for a user who may not see the query or stream; a
malformed ``after`` is accepted and closed with code 4400. Once accepted, a
task pumps the feed into the socket until the client leaves. The feeds of
one Redis stream in a process follow it through one relay (:mod:`.relay`:
one Redis reader per stream, not per socket); the relay stops with its last
socket. If Redis fails the socket is closed with code 4500 and the client
reconnects from its last id.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator, Callable
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from redis.asyncio import Redis

from streaming.bus import Keys

from . import access, feeds
from .audience import Audience, audience_of
from .relay import RELAY_CLIENT_NAME, Follower, relays

__all__ = ["QueryFeedConsumer", "StreamFeedConsumer", "SubscriptionFeedConsumer"]

logger = logging.getLogger(__name__)

# Application close codes (daphne/autobahn accept only 1000 and 3000-4999 from the server).
REFUSED_PARAMETERS = 4400
FEED_FAILED = 4500
# How long a stream feed reuses what its viewer may see before reading it again from the database.
AUDIENCE_SECONDS = 5.0
# Name of the feeds' blocking Redis connections, one per followed stream (CLIENT LIST tells them apart).
REDIS_CLIENT_NAME = RELAY_CLIENT_NAME


class _FeedConsumer(AsyncJsonWebsocketConsumer):
    """Authenticate, authorise, then pump one feed into the socket.

    A subclass names its URL argument (``object_kwarg``), who may see the
    object (``permission``, a database check), the Redis stream its feed
    follows (``key``) and its feed (``messages``).
    """

    object_kwarg: str
    permission: Callable[[Any, int], bool]
    key: Callable[[int], str]
    # The feeds follow the bus's Redis streams through the process's relays; there is no channel layer.
    channel_layer_alias = None

    async def connect(self) -> None:
        self.pump: asyncio.Task[None] | None = None
        self.follower: Follower | None = None
        user = self.scope.get("user")
        object_id = int(self.scope["url_route"]["kwargs"][self.object_kwarg])
        if user is None or not user.is_authenticated or not await database_sync_to_async(self.permission)(user, object_id):
            await self.close()
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("latin1"))
        params = {name: values[-1] for name, values in query.items()}
        after = params.get("after")
        await self.accept()
        if after is not None and not feeds.is_entry_id(after):
            await self.close(code=REFUSED_PARAMETERS)  # after the handshake, so the client sees why
            return
        self.pump = asyncio.create_task(self._pump(await self.feed(object_id, params)))

    async def feed(self, object_id: int, params: dict[str, str]) -> AsyncIterator[str]:
        """The socket's feed, following the object's Redis stream through the process's relay."""
        process = relays()
        self.follower = await process.follow(self.key(object_id))
        return self.messages(process.reads(), object_id, params, self.follower)

    async def _pump(self, messages: AsyncIterator[str]) -> None:
        try:
            async for message in messages:
                await self.send(text_data=message)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("%s feed failed; closing the socket", type(self).__name__)
            await self.close(code=FEED_FAILED)

    async def disconnect(self, code: int) -> None:
        # Cancel until it takes: on Python 3.11 a cancellation that lands in
        # redis-py's asyncio.wait_for (connect, send) can be swallowed.
        while self.pump is not None and not self.pump.done():
            self.pump.cancel()
            await asyncio.wait({self.pump}, timeout=0.05)
        if self.follower is not None:
            await self.follower.close()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """Feeds are one-way; whatever a client sends is ignored (not even decoded)."""


class QueryFeedConsumer(_FeedConsumer):
    """A query's live set: snapshot (unless resuming), then adds and removes."""

    object_kwarg = "query_id"

    permission = staticmethod(access.may_view_query)
    key = staticmethod(Keys.changes)

    def messages(self, client: Redis, object_id: int, params: dict[str, str],
                 follower: Follower) -> AsyncIterator[str]:
        return feeds.query_messages(client, object_id, params.get("after"), follower=follower)


def _replay(params: dict[str, str]) -> int:
    """How many past entries a log feed starts with (``?replay=N``, capped)."""
    replay = params.get("replay", "")
    return min(int(replay), feeds.STREAM_REPLAY_MAX) if replay.isdigit() else feeds.STREAM_REPLAY


class StreamFeedConsumer(_FeedConsumer):
    """A stream's events, each as the viewer may see it (:mod:`.audience`)."""

    object_kwarg = "stream_id"

    permission = staticmethod(access.may_view_stream)
    key = staticmethod(Keys.stream_events)

    def messages(self, client: Redis, object_id: int, params: dict[str, str],
                 follower: Follower) -> AsyncIterator[str]:
        user = self.scope["user"]
        viewer: list[tuple[float, Audience]] = []  # (when read, what) of the last database read

        async def current() -> Audience:
            now = time.monotonic()
            if not viewer or now - viewer[0][0] >= AUDIENCE_SECONDS:
                viewer[:] = [(now, await database_sync_to_async(audience_of)(user, object_id))]
            return viewer[0][1]

        return feeds.stream_messages(client, object_id, current, params.get("after"), replay=_replay(params),
                                     follower=follower)


class SubscriptionFeedConsumer(_FeedConsumer):
    """A WXQuery subscription's result items (a log: the last ``replay``, then new ones)."""

    object_kwarg = "subscription_id"

    permission = staticmethod(access.may_view_subscription)
    key = staticmethod(Keys.subscription_results)

    def messages(self, client: Redis, object_id: int, params: dict[str, str],
                 follower: Follower) -> AsyncIterator[str]:
        return feeds.subscription_messages(client, object_id, params.get("after"), replay=_replay(params),
                                           follower=follower)
