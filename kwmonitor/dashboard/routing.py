"""Websocket routes of the live feeds."""

from django.urls import path

from .consumers import QueryFeedConsumer, StreamFeedConsumer

websocket_urlpatterns = [
    path("ws/queries/<int:query_id>/", QueryFeedConsumer.as_asgi()),
    path("ws/streams/<int:stream_id>/", StreamFeedConsumer.as_asgi()),
]
