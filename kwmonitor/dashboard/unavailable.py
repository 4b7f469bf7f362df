"""A websocket handshake while the database is away: accepted, then closed with 4503 ("try again later").

Authentication (session or API token) and each feed's permission check read
the database before the handshake is answered. While PostgreSQL is down or
starting up they raise, and daphne answered the handshake with HTTP 500 and
logged a traceback per client. :class:`TryAgainLater` answers instead with
4503, the service-unavailable code of this project's feeds (beside 4400 and
4500, docs/feeds.md); RFC 6455's own 1013 cannot be sent, daphne's websocket
library lets an application close only with 1000 or 3000-4999. The
dashboard's page and the example feed client reconnect on it with their
backoff, as on any close they were not refused.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import InterfaceError, OperationalError

__all__ = ["TRY_AGAIN_LATER", "TryAgainLater"]

log = logging.getLogger(__name__)

TRY_AGAIN_LATER = 4503


class TryAgainLater:
    """Wraps the websocket application: a database error raised before the handshake was answered closes the
    socket with :data:`TRY_AGAIN_LATER`; once answered, errors go on as they were."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        connected = answered = False

        async def receiving() -> dict[str, Any]:
            nonlocal connected
            message = await receive()
            connected = connected or message["type"] == "websocket.connect"
            return message

        async def sending(message: dict[str, Any]) -> None:
            nonlocal answered
            answered = answered or message["type"] in ("websocket.accept", "websocket.close")
            await send(message)

        try:
            return await self.inner(scope, receiving, sending)
        except (OperationalError, InterfaceError) as exc:
            if answered:
                raise
            log.warning("websocket %s closed with %d, try again later: the database is unavailable (%r)",
                        scope.get("path"), TRY_AGAIN_LATER, exc)
            if not connected:
                await receive()
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": TRY_AGAIN_LATER})
