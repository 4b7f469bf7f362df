"""The embedded default (SQLite) holds up under the periodic tasks, and beat's tasks expire.

A real Celery worker (prefork, three processes) runs ``supervise`` and
``persist_history`` concurrently, as fast as the test sends them, against a
SQLite file while two heartbeat-writing evaluators run and changes and metrics
keep arriving on Redis: no task fails with "database is locked", and every
Redis entry ends up in the history once. A real beat process gives each
periodic task an expiry of one period, so rounds queued while no worker ran
do not come back in a burst.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings

from streaming import bus
from streaming.events import BatchMetrics

from tests.workers import celery_worker

from .conftest import HEARTBEAT_COMMAND
from .test_celery_worker import wait_for
from ..dashboard.conftest import added, removed

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ROOT = Path(settings.BASE_DIR)


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def sqlite_env(redis_client, redis_url, tmp_path) -> dict[str, str]:
    """Environment of processes sharing a fresh, migrated SQLite database with the demo's two streams."""
    env = dict(
        os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", REDIS_URL=redis_url,
        CHECKPOINT_DIR=str(tmp_path / "checkpoints"), LANDING_DIR=str(tmp_path / "landing"),
        EVALUATOR_COMMAND=" ".join(HEARTBEAT_COMMAND), DJANGO_SETTINGS_MODULE="kwmonitor.settings",
    )
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "load_demo", "--password", "demo-password-1")
    manage(env, "load_demo", "--stream", "shop2")
    return env


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db, timeout=30) as conn:
        return conn.execute(sql).fetchall()


def test_periodic_tasks_run_concurrently_on_sqlite_without_locking(sqlite_env, redis_client, tmp_path):
    db = tmp_path / "db.sqlite3"
    assert rows(db, "PRAGMA journal_mode") == [("wal",)]
    query_ids = [q for (q,) in rows(db, "SELECT id FROM queries_keywordquery ORDER BY id")]
    stream_ids = [s for (s,) in rows(db, "SELECT id FROM streams_stream ORDER BY id")]
    assert len(query_ids) >= 6 and len(stream_ids) == 2
    manage(sqlite_env, "start_evaluator", "shop")
    manage(sqlite_env, "start_evaluator", "shop2")
    pids = [pid for (pid,) in rows(db, "SELECT pid FROM streams_evaluator")]

    log_path = tmp_path / "worker.log"
    stop = threading.Event()
    produced = {"changes": 0, "metrics": 0}

    def produce() -> None:  # what evaluators publish, while the tasks run
        client = bus.connect(sqlite_env["REDIS_URL"])
        oid = 0
        while not stop.is_set():
            oid += 1
            for q in query_ids:
                produced["changes"] += bus.publish_changes(client, q, [added(q, oid)] + ([removed(q, oid - 1)] if oid > 1 else []))
            for s in stream_ids:
                bus.publish_stream_event(client, s, BatchMetrics(evaluator=s, stream=s, batch_id=oid, input_rows=1,
                                                                 rows_per_second=1.0, duration_ms=1.0, ts=time.time()))
                produced["metrics"] += 1
            time.sleep(0.02)

    from kwmonitor.streams import tasks

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    sent = 0
    try:
        with celery_worker(sqlite_env, log_path, concurrency=3) as queue:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                tasks.supervise.apply_async(queue=queue)
                tasks.persist_history.apply_async(queue=queue)
                sent += 2
                time.sleep(0.03)
            stop.set()
            producer.join()
            tasks.persist_history.apply_async(queue=queue)
            sent += 1

            def done() -> int:
                text = log_path.read_text(errors="replace")
                return text.count(" succeeded in ") + text.count(" raised unexpected")

            wait_for(lambda: done() >= sent, 120, f"{sent} tasks to finish")
    finally:
        stop.set()
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    text = log_path.read_text(errors="replace")
    assert "database is locked" not in text
    assert " raised unexpected" not in text
    print(f"{sent} periodic tasks on SQLite with 3 worker processes, {produced['changes']} changes and "
          f"{produced['metrics']} metrics persisted")
    assert rows(db, "SELECT count(*) FROM streams_resultevent") == [(produced["changes"],)]
    assert rows(db, "SELECT count(*) FROM streams_metricsample") == [(produced["metrics"],)]
    # every supervision round found them beating: none failed or was launched again
    assert sorted(rows(db, "SELECT lifecycle, pid, restarts FROM streams_evaluator")) == sorted(
        ("launched", pid, 0) for pid in pids)


def test_beat_sends_periodic_tasks_that_expire_after_one_period(redis_client, redis_url, tmp_path):
    env = dict(os.environ, REDIS_URL=redis_url, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    beat = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "kwmonitor", "beat", "--schedule", str(tmp_path / "beat-schedule"),
         "--loglevel", "INFO"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: redis_client.llen("celery") >= 3, 30, "beat to send a few rounds")
        time.sleep(1.5)
    finally:
        beat.terminate()
        beat.wait(timeout=10)
    now = dt.datetime.now(dt.timezone.utc)
    periods = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    messages = [json.loads(raw)["headers"] for raw in redis_client.lrange("celery", 0, -1)]
    assert {m["task"] for m in messages} >= {"kwmonitor.streams.tasks.supervise", "kwmonitor.streams.tasks.persist_history"}
    for headers in messages:
        expires = dt.datetime.fromisoformat(headers["expires"])
        assert (expires - now).total_seconds() <= periods[headers["task"]], headers
