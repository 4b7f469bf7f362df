"""Shared test fixtures: the test Redis database, users, the demo schema.

Tests use the real Redis of ``REDIS_URL`` but on another database number
(``TEST_REDIS_URL``, by default the same server's db 1), flushed before each
test that asks for it; the settings are pointed at it here, before any test
runs, so Celery and the bus client all use it.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings
from hypothesis import settings as hypothesis_settings

from streaming import bus

ROOT = Path(__file__).resolve().parent

# `make test` (and so CI) runs every property test on the same examples each time, so a red run is a
# regression, not a new draw; HYPOTHESIS_PROFILE=explore draws new examples on every run.
hypothesis_settings.register_profile("fixed", derandomize=True)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))
DEMO_DIR = ROOT / "kwmonitor" / "streams" / "demo"
_SOURCE_DBS = itertools.count()


def _django_configured() -> bool:
    """False when pytest runs without pytest-django (``-p no:django``, engine-only runs)."""
    return settings.configured or bool(os.environ.get("DJANGO_SETTINGS_MODULE"))


def _test_redis_url() -> str:
    explicit = os.environ.get("TEST_REDIS_URL")
    if explicit:
        return explicit
    app_url = settings.REDIS_URL if _django_configured() else os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    parts = urlsplit(app_url)
    return urlunsplit((parts.scheme, parts.netloc, "/1", parts.query, parts.fragment))


def _use_test_redis(url: str) -> None:
    from kwmonitor.celery import app

    settings.REDIS_URL = url
    settings.CELERY_BROKER_URL = settings.CELERY_RESULT_BACKEND = url
    app.conf.broker_url = app.conf.result_backend = url


TEST_REDIS_URL = _test_redis_url()
if _django_configured():
    _use_test_redis(TEST_REDIS_URL)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of the test Redis database (never the one `make run` uses)."""
    return TEST_REDIS_URL


@pytest.fixture
def redis_client(redis_url: str):
    """A client on the test Redis database, flushed before the test."""
    client = bus.connect(redis_url)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis is not answering on {redis_url}: {exc} (start redis-server, or set TEST_REDIS_URL)")
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def demo_schema_doc() -> dict:
    return json.loads((DEMO_DIR / "schema.json").read_text())


@pytest.fixture
def ecommerce_schema(db, demo_schema_doc):
    from kwmonitor.catalog.models import Schema

    return Schema.import_document(demo_schema_doc, description="E-commerce demo")


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ann", "ann@example.com", "ann-password-1")


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", "root-password-1")


@pytest.fixture
def user_client(client, user):
    """A logged-in client of a non-staff user."""
    client.force_login(user)
    return client


@pytest.fixture
def staff_client(client, staff_user):
    """A logged-in client of a staff superuser."""
    client.force_login(staff_user)
    return client


@pytest.fixture
def photons_stream(db):
    """An XML stream ``photons`` (the paper's DTD, each photon mapped to a ``Photon`` tuple)."""
    from streaming.workloads.photons import PHOTONS_DTD, PHOTONS_MAPPING
    from streaming.xmlstream.mapping import ItemMapping

    from kwmonitor.catalog.models import Schema
    from kwmonitor.streams.models import Stream

    schema = Schema.import_document(ItemMapping.model_validate(PHOTONS_MAPPING).schema("photons"))
    stream = Stream(name="photons", schema=schema, item_format="xml", dtd=PHOTONS_DTD, xml_mapping=PHOTONS_MAPPING)
    stream.full_clean()
    stream.save()
    return stream


@pytest.fixture(scope="session")
def logical_postgres():
    """A throwaway PostgreSQL cluster with ``wal_level=logical`` on a free port (never the shared server, which
    has no logical replication), started once per session, in a directory the ``postgres`` user can reach."""
    import shutil
    import tempfile

    from streaming.capture.cluster import LogicalCluster

    directory = tempfile.mkdtemp(prefix="kw-logical-pg-")
    cluster = LogicalCluster(directory)
    cluster.start()
    yield cluster
    cluster.stop()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def source_db(logical_postgres):
    """A fresh database on the logical cluster: its DSN. Dropped after the test, with the slots made on it."""
    import psycopg

    name = f"src_{next(_SOURCE_DBS)}_{os.getpid()}"
    admin = logical_postgres.dsn()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield logical_postgres.dsn(name)
    with psycopg.connect(admin, autocommit=True) as conn:
        for (slot,) in conn.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s", (name,)):
            conn.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = %s "
                         "AND active_pid IS NOT NULL", (slot,))
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')

