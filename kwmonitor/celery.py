"""The Celery application: Redis broker, JSON only, tasks discovered in the apps."""

from __future__ import annotations

import os

from celery import Celery

__all__ = ["app"]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kwmonitor.settings")

app = Celery("kwmonitor")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
