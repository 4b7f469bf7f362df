"""Websocket routes of the live feeds."""

from django.urls import path

from .consumers import QueryFeedConsumer, StreamFeedConsumer, SubscriptionFeedConsumer

websocket_urlpatterns = [
    path("ws/queries/<int:query_id>/", QueryFeedConsumer.as_asgi()),
    path("ws/streams/<int:stream_id>/", StreamFeedConsumer.as_asgi()),
    path("ws/subscriptions/<int:subscription_id>/", SubscriptionFeedConsumer.as_asgi()),
]
