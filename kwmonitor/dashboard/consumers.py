"""Websocket consumers of the live feeds (see :mod:`kwmonitor.dashboard.feeds`).

``/ws/queries/<id>/?after=<id>``, ``/ws/streams/<id>/?after=<id>`` and
``/ws/subscriptions/<id>/?after=<id>``: the
connection is refused (closed before the handshake completes) without an
authenticated user or for a user who may not see the query or stream; a
malformed ``after`` is accepted and closed with code 4400. Once accepted, a
task pumps the feed into the socket until the client leaves; its Redis
connection is closed with it. If Redis fails the socket is closed with code
4500 and the client reconnects from its last id.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator, Callable
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from redis.asyncio import Redis

from . import access, feeds
from .audience import Audience, audience_of

__all__ = ["QueryFeedConsumer", "StreamFeedConsumer", "SubscriptionFeedConsumer"]

logger = logging.getLogger(__name__)

# Application close codes (daphne/autobahn accept only 1000 and 3000-4999 from the server).
REFUSED_PARAMETERS = 4400
FEED_FAILED = 4500
# How long a stream feed reuses what its viewer may see before reading it again from the database.
AUDIENCE_SECONDS = 5.0
# Name of the feeds' Redis connections (CLIENT LIST tells them apart).
REDIS_CLIENT_NAME = "kwmonitor-feed"


class _FeedConsumer(AsyncJsonWebsocketConsumer):
    """Authenticate, authorise, then pump one feed into the socket.

    A subclass names its URL argument (``object_kwarg``), who may see the
    object (``permission``, a database check) and its feed (``messages``).
    """

    object_kwarg: str
    permission: Callable[[Any, int], bool]
    # The feeds read the bus's Redis streams themselves; no channel-layer
    # subscription (one Redis connection and a blocking pop per socket less).
    channel_layer_alias = None

    async def connect(self) -> None:
        self.pump: asyncio.Task[None] | None = None
        self.redis: Redis | None = None
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
        # Blocking reads wait up to BLOCK_MS: the socket timeout must be longer.
        self.redis = Redis.from_url(
            settings.REDIS_URL,
            decode_responses=True,
            socket_timeout=feeds.BLOCK_MS / 1000 + 10,
            socket_keepalive=True,
            client_name=REDIS_CLIENT_NAME,
        )
        self.pump = asyncio.create_task(self._pump(self.messages(self.redis, object_id, params)))

    async def _pump(self, messages: AsyncIterator[dict[str, Any]]) -> None:
        try:
            async for message in messages:
                await self.send_json(message)
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
        if self.redis is not None:
            await self.redis.aclose()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """Feeds are one-way; whatever a client sends is ignored (not even decoded)."""


class QueryFeedConsumer(_FeedConsumer):
    """A query's live set: snapshot (unless resuming), then adds and removes."""

    object_kwarg = "query_id"

    permission = staticmethod(access.may_view_query)

    def messages(self, client: Redis, object_id: int, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        return feeds.query_messages(client, object_id, params.get("after"))


def _replay(params: dict[str, str]) -> int:
    """How many past entries a log feed starts with (``?replay=N``, capped)."""
    replay = params.get("replay", "")
    return min(int(replay), feeds.STREAM_REPLAY_MAX) if replay.isdigit() else feeds.STREAM_REPLAY


class StreamFeedConsumer(_FeedConsumer):
    """A stream's events, each as the viewer may see it (:mod:`.audience`)."""

    object_kwarg = "stream_id"

    permission = staticmethod(access.may_view_stream)

    def messages(self, client: Redis, object_id: int, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        user = self.scope["user"]
        viewer: list[tuple[float, Audience]] = []  # (when read, what) of the last database read

        async def current() -> Audience:
            now = time.monotonic()
            if not viewer or now - viewer[0][0] >= AUDIENCE_SECONDS:
                viewer[:] = [(now, await database_sync_to_async(audience_of)(user, object_id))]
            return viewer[0][1]

        return feeds.stream_messages(client, object_id, current, params.get("after"), replay=_replay(params))


class SubscriptionFeedConsumer(_FeedConsumer):
    """A WXQuery subscription's result items (a log: the last ``replay``, then new ones)."""

    object_kwarg = "subscription_id"

    permission = staticmethod(access.may_view_subscription)

    def messages(self, client: Redis, object_id: int, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        return feeds.subscription_messages(client, object_id, params.get("after"), replay=_replay(params))
