"""Fixtures for stream tests: a demo stream and evaluator commands that run real processes."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

HEARTBEAT_SCRIPT = Path(__file__).with_name("heartbeat_evaluator.py")
HEARTBEAT_COMMAND = [
    "{python}", str(HEARTBEAT_SCRIPT), "--evaluator", "{evaluator}", "--redis-url", "{redis_url}",
    "--checkpoint-dir", "{checkpoint_dir}", "--master", "{master}",
]


@pytest.fixture
def shop(redis_client, ecommerce_schema, user):
    """The demo stream with one enabled and one disabled query (its plan goes to the flushed test Redis)."""
    from kwmonitor.queries.models import KeywordQuery, Predicate
    from kwmonitor.streams.models import Stream

    stream = Stream.objects.create(name="shop", schema=ecommerce_schema)
    query = KeywordQuery.objects.create(owner=user, name="dress in texas", schema=ecommerce_schema, stream=stream,
                                        keywords="dress texas", tmax=4, window_seconds=1800.0)
    Predicate.objects.create(query=query, relation="Product", attribute="price", op=">=", value=40)
    KeywordQuery.objects.create(owner=user, name="off", schema=ecommerce_schema, stream=stream,
                                keywords="hat", tmax=2, enabled=False)
    return stream


@pytest.fixture
def reap_evaluators():
    """Pids to SIGKILL at teardown, so no test leaves an evaluator running."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture
def python_executable() -> str:
    return sys.executable
