"""Ingest API routes: ``/ingest/<stream_id>/``."""

from django.urls import path

from . import views

app_name = "ingest"

urlpatterns = [
    path("<int:stream_id>/", views.ingest, name="ingest"),
]
