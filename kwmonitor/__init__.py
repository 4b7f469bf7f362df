"""kwmonitor: the Django project around the streaming keyword-search engine."""

from .celery import app as celery_app

__all__ = ["celery_app"]
