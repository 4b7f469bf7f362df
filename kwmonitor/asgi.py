"""ASGI entry point: Django for http, Channels consumers for websockets.

Websockets pass the same-origin check (scheme, host and port of the Origin
header against the request's own), then authentication (session cookie or API
token), then the dashboard's routes; a handshake that finds the database away
is closed with 4503, try again later (``kwmonitor.dashboard.unavailable``).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kwmonitor.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: consumers import models.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from kwmonitor.accounts.middleware import TokenAuthMiddlewareStack  # noqa: E402
from kwmonitor.dashboard.origin import SameOriginValidator  # noqa: E402
from kwmonitor.dashboard.routing import websocket_urlpatterns  # noqa: E402
from kwmonitor.dashboard.unavailable import TryAgainLater  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(TryAgainLater(TokenAuthMiddlewareStack(URLRouter(websocket_urlpatterns)))),
    }
)
