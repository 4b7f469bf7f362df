"""WSGI entry point (http only; the product is served by daphne through asgi.py)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kwmonitor.settings")
application = get_wsgi_application()
