"""The web tier's Redis client for the bus (one per URL, created on first use)."""

from __future__ import annotations

import redis
from django.conf import settings

from streaming import bus

__all__ = ["redis_client"]

_clients: dict[str, redis.Redis] = {}


def redis_client() -> redis.Redis:
    """A ``str``-decoding client on ``settings.REDIS_URL`` (thread-safe connection pool)."""
    url = settings.REDIS_URL
    client = _clients.get(url)
    if client is None:
        client = _clients[url] = bus.connect(url)
    return client
