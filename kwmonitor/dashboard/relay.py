"""One Redis reader per followed Redis stream and web process: the relay behind the live feeds.

The feeds of one Redis stream (a query's change stream, a stream's events, a
WXQuery subscription's results) that are open in one web process follow it
through one relay instead of a blocking read each: the relay reads the stream
on a connection of its own (a blocking ``XREAD``, then the new entries with
the stream's horizon in one MULTI/EXEC, as a query feed reads its changes)
and hands every batch, with the id of the entry before it, to each
follower's queue. A feed whose cursor is that id takes the batch as it is; a
feed whose cursor is elsewhere (it was still reading its snapshot, or fell
behind) reads what it lacks from the Redis stream itself (:mod:`.feeds`), so
no feed misses an entry or gets one twice. When entries after the one the
relay read last were trimmed or deleted, or Redis lost the stream, the relay
hands on a reset and every follower reads from the stream itself, which
answers a query feed with a new snapshot as before.

A slow follower never holds the others back: a follower's queue holds at
most ``FOLLOWER_BATCHES`` batches; one more and its queue is emptied and
replaced by a reset, so the feed reads the missed entries from the Redis
stream (a new snapshot, for a query feed whose entries were trimmed away
meanwhile). What a slow client's socket has not taken yet waits in the web
server's send buffer, as it did with one reader per socket.

The relay of a stream starts with its first follower and stops with the last
(its connection closed). If its read fails (Redis went away) every follower
gets the error: the feeds close with code 4500 and the clients reconnect. The
snapshot and catch-up reads of the process's feeds share one small pool of
connections (``READ_CONNECTIONS``), closed when no feed is open. Relays
belong to the event loop they were started on.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

from django.conf import settings
from redis.asyncio import BlockingConnectionPool, Redis

from .feeds import BLOCK_MS, Batch, continues, entries_after, entry_id_order

__all__ = ["Follower", "FOLLOWER_BATCHES", "READ_CONNECTIONS", "READS_CLIENT_NAME", "RELAY_CLIENT_NAME", "Relays",
           "relays"]

logger = logging.getLogger(__name__)

# Name of a relay's Redis connection and of the shared read connections (CLIENT LIST tells them apart).
RELAY_CLIENT_NAME = "kwmonitor-feed"
READS_CLIENT_NAME = "kwmonitor-feed-reads"
# Connections of the pool the feeds of one process read snapshots and catch-ups with (more readers wait).
READ_CONNECTIONS = 8
# Batches a follower's queue holds before it is replaced by a reset (the feed then reads Redis itself).
FOLLOWER_BATCHES = 256

_RESET = Batch(None, [], {})


class Follower:
    """One feed's place in a relay: the batches handed to it, in order (a :class:`.feeds.Followed`)."""

    def __init__(self, relay: "_Relay") -> None:
        self._relay = relay
        self._queue: asyncio.Queue[Batch | BaseException] = asyncio.Queue()

    def _hand(self, item: Batch | BaseException) -> None:
        if self._queue.qsize() >= FOLLOWER_BATCHES:
            while not self._queue.empty():
                self._queue.get_nowait()
            item = _RESET if isinstance(item, Batch) else item
        self._queue.put_nowait(item)

    async def after(self, cursor: str) -> Batch | None:
        """The next batch that starts right after ``cursor`` (batches wholly at or before it are skipped), or
        None when the feed must read from the Redis stream itself (a gap or a reset). Raises the relay's
        failure."""
        while True:
            item = await self._queue.get()
            if isinstance(item, BaseException):
                raise item
            if item.prev is None:
                return None
            if entry_id_order(item.entries[-1][0]) <= entry_id_order(cursor):
                continue
            return item if item.prev == cursor else None

    async def close(self) -> None:
        """Stop following; the relay stops with its last follower."""
        await self._relay.leave(self)


class _Relay:
    """The reader of one Redis stream for the followers of one event loop."""

    def __init__(self, owner: "Relays", key: str) -> None:
        self.owner = owner
        self.key = key
        self.followers: set[Follower] = set()
        self.started = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.client = Redis.from_url(settings.REDIS_URL, decode_responses=True, socket_keepalive=True,
                                     socket_timeout=BLOCK_MS / 1000 + 10, client_name=RELAY_CLIENT_NAME)

    async def _newest(self) -> str:
        newest = await self.client.xrevrange(self.key, count=1)
        return newest[0][0] if newest else "0-0"

    async def run(self) -> None:
        try:
            last = await self._newest()
            self.started.set()
            while True:
                entries, info, held = await entries_after(self.client, self.key, last)
                if not continues(info, held, last):  # trimmed, deleted or lost after `last`: they read it themselves
                    for follower in list(self.followers):
                        follower._hand(_RESET)
                    last, entries = await self._newest(), []
                elif entries:
                    batch = Batch(last, entries, {})
                    for follower in list(self.followers):
                        follower._hand(batch)
                    last = entries[-1][0]
                if not entries:
                    await self.client.xread({self.key: last}, count=1, block=BLOCK_MS)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # Redis failed: so does every feed following the stream (they close, 4500)
            logger.warning("feed relay of %s failed: %r", self.key, exc)
            self.owner.forget(self)
            for follower in list(self.followers):
                follower._hand(exc)
            self.started.set()

    async def leave(self, follower: Follower) -> None:
        self.followers.discard(follower)
        if not self.followers:
            self.owner.forget(self)
            await self.stop()

    async def stop(self) -> None:
        # Cancel until it takes: on Python 3.11 a cancellation that lands in
        # redis-py's asyncio.wait_for (connect, send) can be swallowed.
        while self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.wait({self.task}, timeout=0.05)
        await self.client.aclose()
        await self.owner.release()


class Relays:
    """The relays and the shared read connections of one event loop."""

    def __init__(self) -> None:
        self._relays: dict[str, _Relay] = {}
        self._reads: Redis | None = None

    def reads(self) -> Redis:
        """The pooled client the feeds read snapshots and catch-ups with (no blocking reads on it)."""
        if self._reads is None:
            pool = BlockingConnectionPool.from_url(settings.REDIS_URL, max_connections=READ_CONNECTIONS,
                                                   decode_responses=True, socket_keepalive=True,
                                                   client_name=READS_CLIENT_NAME)
            self._reads = Redis(connection_pool=pool)
        return self._reads

    async def follow(self, key: str) -> Follower:
        """Follow the Redis stream ``key``: batches of the entries added from now on (or the relay's failure)."""
        relay = self._relays.get(key)
        if relay is None:
            relay = self._relays[key] = _Relay(self, key)
            relay.task = asyncio.create_task(relay.run(), name=f"feed relay {key}")
        follower = Follower(relay)
        relay.followers.add(follower)
        await relay.started.wait()  # its connection is open and its first id known
        return follower

    def forget(self, relay: _Relay) -> None:
        if self._relays.get(relay.key) is relay:
            del self._relays[relay.key]

    async def release(self) -> None:
        """One relay stopped: close the read connections once no relay runs (no feed is open)."""
        if not self._relays and self._reads is not None:
            reads, self._reads = self._reads, None
            await reads.aclose()
            await reads.connection_pool.disconnect()


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Relays] = weakref.WeakKeyDictionary()


def relays() -> Relays:
    """The relays of the running event loop."""
    loop = asyncio.get_running_loop()
    found = _by_loop.get(loop)
    if found is None:
        found = _by_loop[loop] = Relays()
    return found
