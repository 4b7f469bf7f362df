"""A real daphne server on a free port, on the test database and test Redis.

Used by the browser test and the feed client test: the server runs in its own
process (as in production), so the test database must be one another process
can open (PostgreSQL, as ``make test`` uses) and the data the test creates must
be committed (``transaction=True``).
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
import os
import socket
import subprocess
import sys
import tempfile
import time
import typing
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_database_url() -> str:
    """DATABASE_URL of the test database pytest-django created in this process."""
    db = settings.DATABASES["default"]
    if "postgresql" not in db["ENGINE"]:
        pytest.skip("a server in another process needs the PostgreSQL test database (DATABASE_URL=postgres://…)")
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@contextlib.contextmanager
def asgi_server(
    redis_url: str, port: int | None = None, timeout: float = 30.0, extra_env: dict[str, str] | None = None,
    under: typing.Sequence[str] = (),
) -> Iterator[str]:
    """Run ``daphne kwmonitor.asgi:application``; yields its base URL (http://127.0.0.1:PORT).

    ``extra_env`` adds to its environment or overrides it (``DATABASE_URL`` too); ``under`` is a command
    daphne runs under (``scripts/keep_up.sh``, as ``make run`` runs it)."""
    port = port or free_port()
    env = {**os.environ, "DATABASE_URL": test_database_url(), "REDIS_URL": redis_url, "HTTPS": "off",
           "DJANGO_SETTINGS_MODULE": "kwmonitor.settings", **(extra_env or {})}
    log = tempfile.NamedTemporaryFile("w+", prefix="daphne-test-", suffix=".log")
    proc = subprocess.Popen(
        [*under, sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "kwmonitor.asgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"daphne exited with {proc.returncode}:\n{_tail(log)}")
            try:
                urllib.request.urlopen(base + settings.LOGIN_URL, timeout=1).close()
                break
            except urllib.error.HTTPError:  # answering (the page itself is not this helper's business)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"daphne did not answer on {base} within {timeout}s:\n{_tail(log)}") from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def orm(call: typing.Callable[[], typing.Any]) -> typing.Any:
    """Run a database call outside Playwright's event loop (Django refuses its ORM inside one)."""
    from django.db import connection

    def run() -> typing.Any:
        try:
            return call()
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def _tail(log: typing.IO[str], lines: int = 30) -> str:
    log.flush()
    log.seek(0)
    return "".join(log.readlines()[-lines:])
