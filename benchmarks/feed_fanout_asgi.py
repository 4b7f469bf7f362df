"""The query feed served two other ways than the project's relay, for ``benchmarks/feed_fanout.py``.

* ``readers_application``: as before the relay (issue 19, item 7), every socket
  reads the change stream on a Redis connection of its own (a blocking
  ``XREAD``, then the batch with its horizon): the project's consumer with its
  feed built that way.
* ``application``: through the Channels layer (channels_redis, installed from
  ``benchmarks/requirements-feed-fanout.txt``): one relay task per query and
  process reads the change stream, parses and encodes each change once and
  ``group_send``\ s it, with the id before it (``prev``), to the query's group.
  A socket starts as the project's does (snapshot or resumption, read from
  Redis on one small pooled client of the process), then takes the relayed
  changes: an id at or below its cursor is skipped, and one whose ``prev`` is
  not its cursor (the layer's capacity or expiry dropped one) makes it read the
  gap from the change stream itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any, AsyncIterator

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kwmonitor.settings")
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

# The layer the project configured until it was measured here (capacity and expiry as they were). Its
# socket timeout is raised: channels_redis 4.3 blocks 5 s in BZPOPMIN and redis-py 8 gives up reading after
# 5 s by default, so with the hosts given as a URL a subscribed consumer dies of a read timeout within seconds.
settings.CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": settings.REDIS_URL, "socket_timeout": 30}], "capacity": 1500, "expiry": 30},
    }
}

from channels.db import database_sync_to_async  # noqa: E402
from channels.generic.websocket import AsyncJsonWebsocketConsumer  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402
from redis.asyncio import BlockingConnectionPool, Redis  # noqa: E402

from kwmonitor.accounts.middleware import TokenAuthMiddlewareStack  # noqa: E402
from kwmonitor.dashboard import access, feeds  # noqa: E402
from kwmonitor.dashboard.consumers import QueryFeedConsumer  # noqa: E402
from kwmonitor.dashboard.origin import SameOriginValidator  # noqa: E402
from kwmonitor.dashboard.routing import websocket_urlpatterns  # noqa: E402
from streaming.bus import Keys  # noqa: E402
from streaming.events import parse_event  # noqa: E402

RELAY_CLIENT_NAME = "kwmonitor-relay"
# Connections of the pooled client that reads snapshots and catch-ups (sockets wait for one beyond that).
READER_CONNECTIONS = 8
_relays: dict[int, asyncio.Task[None]] = {}
_readers: list[Redis] = []


def _reader() -> Redis:
    """The process's pooled client for snapshots and catch-up reads (no blocking reads on it)."""
    if not _readers:
        pool = BlockingConnectionPool.from_url(settings.REDIS_URL, max_connections=READER_CONNECTIONS,
                                               decode_responses=True, client_name=RELAY_CLIENT_NAME)
        _readers.append(Redis(connection_pool=pool))
    return _readers[0]


def _encoded(entry_id: str, data: str) -> str:
    message = parse_event(data).model_dump(mode="json")
    message["id"] = entry_id
    return json.dumps(message)


async def _relay(query_id: int) -> None:
    """Send every new entry of the query's change stream to its group, each with the entry before it."""
    client = Redis.from_url(settings.REDIS_URL, decode_responses=True, client_name=RELAY_CLIENT_NAME,
                            socket_timeout=feeds.BLOCK_MS / 1000 + 10)
    key = Keys.changes(query_id)
    newest = await client.xrevrange(key, count=1)
    last = newest[0][0] if newest else "0-0"
    while True:
        reply = await client.xread({key: last}, count=feeds.BATCH, block=feeds.BLOCK_MS)
        for entry_id, fields in reply[0][1] if reply else []:
            await get_channel_layer().group_send(_group(query_id), {
                "type": "feed.change", "id": entry_id, "prev": last, "text": _encoded(entry_id, fields["data"])})
            last = entry_id


def _relay_ended(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logging.getLogger(__name__).error("relay failed", exc_info=task.exception())


def _group(query_id: int) -> str:
    return f"feed.query.{query_id}"


class LayerQueryFeedConsumer(AsyncJsonWebsocketConsumer):
    """The query feed's protocol, the changes taken from the channel layer (the socket's channel joins the
    query's group)."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        self.query_id = int(self.scope["url_route"]["kwargs"]["query_id"])
        self.cursor: str | None = None
        self.subscribed = False
        if user is None or not user.is_authenticated or not await database_sync_to_async(access.may_view_query)(
                user, self.query_id):
            await self.close()
            return
        await self.channel_layer.group_add(_group(self.query_id), self.channel_name)
        self.subscribed = True
        if self.query_id not in _relays:
            _relays[self.query_id] = asyncio.create_task(_relay(self.query_id))
            _relays[self.query_id].add_done_callback(_relay_ended)
        await self.accept()
        await self._catch_up(None)

    async def _catch_up(self, until: str | None) -> None:
        """Read from the change stream itself: a snapshot when there is no cursor or it cannot resume, then the
        changes after the cursor up to ``until`` (None: all there are)."""
        client = _reader()
        while True:
            if self.cursor is None:
                snapshot = await feeds.read_snapshot(client, self.query_id)
                await self.send_json(snapshot.model_dump(mode="json"))
                self.cursor = snapshot.last_id
            entries, info, held = await feeds.entries_after(client, Keys.changes(self.query_id), self.cursor)
            if not feeds.continues(info, held, self.cursor):
                self.cursor = None
                continue
            for entry_id, fields in entries:
                if until is not None and feeds.entry_id_order(entry_id) > feeds.entry_id_order(until):
                    return
                await self.send(text_data=_encoded(entry_id, fields["data"]))
                self.cursor = entry_id
            if len(entries) < feeds.BATCH:
                return

    async def feed_change(self, event: dict[str, Any]) -> None:
        entry_id, prev, text = event["id"], event["prev"], event["text"]
        assert self.cursor is not None
        if feeds.entry_id_order(entry_id) <= feeds.entry_id_order(self.cursor):
            return
        if prev != self.cursor:
            await self._catch_up(entry_id)
            return
        await self.send(text_data=text)
        self.cursor = entry_id


    async def disconnect(self, code: int) -> None:
        if self.subscribed:
            await self.channel_layer.group_discard(_group(self.query_id), self.channel_name)


class ReadersQueryFeedConsumer(QueryFeedConsumer):
    """The project's query feed, each socket reading the change stream on a Redis connection of its own."""

    async def feed(self, object_id: int, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        self.redis = Redis.from_url(settings.REDIS_URL, decode_responses=True, socket_keepalive=True,
                                    socket_timeout=feeds.BLOCK_MS / 1000 + 10, client_name="kwmonitor-reader")
        return feeds.query_messages(self.redis, object_id, params.get("after"))

    async def disconnect(self, code: int) -> None:
        await super().disconnect(code)
        if hasattr(self, "redis"):
            await self.redis.aclose()


def _application(consumer: type[AsyncJsonWebsocketConsumer]) -> ProtocolTypeRouter:
    routes = [path("ws/queries/<int:query_id>/", consumer.as_asgi()), *websocket_urlpatterns[1:]]
    return ProtocolTypeRouter({"http": django_asgi_app,
                               "websocket": SameOriginValidator(TokenAuthMiddlewareStack(URLRouter(routes)))})


application = _application(LayerQueryFeedConsumer)
readers_application = _application(ReadersQueryFeedConsumer)
