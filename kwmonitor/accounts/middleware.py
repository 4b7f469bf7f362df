"""Websocket authentication: an API token, or else the session.

A token is taken from ``?token=<token>`` or the ``Authorization: Token <token>``
header. A token that is given but unknown makes the connection anonymous (it
is then refused), never falls back to the session; with no token, the session
user (Channels' AuthMiddleware) stands.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser

from .models import ApiToken

__all__ = ["TokenAuthMiddleware", "TokenAuthMiddlewareStack", "token_from_scope"]


def token_from_scope(scope: dict[str, Any]) -> str | None:
    """The API token a websocket request carries, if any."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin1").partition(" ")
            if scheme.lower() == "token" and token.strip():
                return token.strip()
    tokens = parse_qs(scope.get("query_string", b"").decode("latin1")).get("token")
    return tokens[-1] if tokens else None


class TokenAuthMiddleware:
    """Sets ``scope["user"]`` from an API token when the request carries one."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        token = token_from_scope(scope)
        if token is not None:
            user = await database_sync_to_async(ApiToken.user_for)(token)
            scope = dict(scope, user=user or AnonymousUser())
        return await self.inner(scope, receive, send)


def TokenAuthMiddlewareStack(inner: Any) -> Any:  # noqa: N802 (named like Channels' AuthMiddlewareStack)
    """Session authentication (cookies) with API tokens taking precedence when present."""
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))
