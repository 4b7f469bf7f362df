"""JSON API routes: ``/api/subscriptions/``."""

from django.urls import path

from . import api

app_name = "api"

urlpatterns = [
    path("subscriptions/", api.subscriptions, name="subscriptions"),
    path("subscriptions/<int:pk>/", api.subscription, name="subscription"),
]
