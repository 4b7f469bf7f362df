"""The websocket Origin check: a feed is opened only from a page of this very site.

The ``Origin`` a browser sends must equal the origin of the websocket request
itself, scheme, host and port (``http://127.0.0.1:8000`` for
``ws://127.0.0.1:8000/ws/...``; ``https`` for ``wss`` or behind a TLS proxy that
sets ``SECURE_PROXY_SSL_HEADER``), with a host in ``ALLOWED_HOSTS``; or it must
be one of ``CSRF_TRUSTED_ORIGINS`` exactly. Anything else (another port of the
same host, another scheme, no Origin at all) is refused during the handshake.
Programs without a browser send the origin of the URL they connect to (see
``kwmonitor.feed_client.origin_of``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

__all__ = ["normalised_origin", "request_origin", "origin_allowed", "SameOriginValidator"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalised_origin(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin, the port made explicit; None if it is not an http(s) origin."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    return parts.scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[parts.scheme]


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for header, value in scope.get("headers", []):
        if header == name:
            return value.decode("latin1")
    return None


def request_origin(scope: dict[str, Any]) -> tuple[str, str, int] | None:
    """The origin the websocket request was made to, from its scheme and Host header (None: no valid Host)."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    secure = scope.get("scheme") in ("wss", "https")
    proxy_header = settings.SECURE_PROXY_SSL_HEADER
    if proxy_header:
        name, value = proxy_header
        forwarded = _header(scope, name.removeprefix("HTTP_").lower().replace("_", "-").encode("latin1"))
        secure = secure or (forwarded is not None and forwarded.split(",")[0].strip() == value)
    return normalised_origin(f"{'https' if secure else 'http'}://{host}")


def origin_allowed(scope: dict[str, Any]) -> bool:
    origin = _header(scope, b"origin")
    if origin is None:
        return False
    claimed = normalised_origin(origin)
    if claimed is None:
        return False
    if claimed == request_origin(scope):
        return True
    return claimed in {normalised_origin(trusted) for trusted in settings.CSRF_TRUSTED_ORIGINS}


class SameOriginValidator:
    """ASGI middleware for websockets: refuse (HTTP 403) a handshake whose Origin is not this site's."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket":
            raise ValueError("SameOriginValidator is for websocket connections only")
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
