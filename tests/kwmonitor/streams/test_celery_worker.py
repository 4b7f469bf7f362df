"""A real Celery worker (prefork pool, Redis broker) starts, supervises and stops an evaluator.

The worker is a separate process on the test Redis database and the test
PostgreSQL database; the evaluator it launches is a real process, which the
test kills with SIGKILL to see the supervise task restart it with a new pid.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.db import connection

from kwmonitor.streams import tasks
from kwmonitor.streams.liveness import read_liveness
from kwmonitor.streams.models import Evaluator
from kwmonitor.streams.supervisor import process_alive
from streaming import bus

from tests.workers import celery_worker

from .conftest import HEARTBEAT_COMMAND

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _database_url() -> str:
    db = connection.settings_dict
    if "postgresql" not in db["ENGINE"]:
        pytest.skip("the worker process needs a database server it can share with the test (DATABASE_URL=postgres://...)")
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def worker(redis_url, tmp_path):
    """A Celery worker consuming a queue of its own; yields the queue name."""
    env = dict(
        os.environ,
        DATABASE_URL=_database_url(),
        REDIS_URL=redis_url,
        CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
        EVALUATOR_COMMAND=" ".join(HEARTBEAT_COMMAND),
    )
    with celery_worker(env, tmp_path / "worker.log") as queue:
        yield queue
    print((tmp_path / "worker.log").read_text()[-3000:])


def wait_for(predicate, timeout: float, what: str, every=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if every:
            every()
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_worker_starts_supervises_restarts_and_stops_an_evaluator(shop, worker, redis_client, reap_evaluators):
    evaluator = Evaluator.objects.get(stream=shop)

    tasks.start_evaluator.apply_async(args=[evaluator.pk], queue=worker)
    first = wait_for(lambda: Evaluator.objects.get(pk=evaluator.pk).pid, 60, "the worker to launch the evaluator")
    reap_evaluators.append(first)
    assert process_alive(first)
    wait_for(lambda: getattr(bus.read_heartbeat(redis_client, evaluator.pk), "pid", None) == first, 20, "a heartbeat")

    supervise = lambda: tasks.supervise.apply_async(queue=worker)  # noqa: E731  (what beat sends)
    live = lambda: read_liveness(redis_client, [Evaluator.objects.get(pk=evaluator.pk)])[0]  # noqa: E731
    wait_for(lambda: live().status == "running", 20, "status running", every=supervise)
    assert Evaluator.objects.get(pk=evaluator.pk).lifecycle == "launched"  # the heartbeat's running is not recorded

    os.kill(first, signal.SIGKILL)
    restarted = wait_for(
        lambda: (ev := Evaluator.objects.get(pk=evaluator.pk)).pid not in (None, first) and ev,
        30, "a restart with a new pid", every=supervise,
    )
    reap_evaluators.append(restarted.pid)
    assert restarted.restarts == 1 and restarted.host
    assert "exited" in restarted.last_error
    wait_for(lambda: getattr(bus.read_heartbeat(redis_client, evaluator.pk), "pid", None) == restarted.pid, 20,
             "a heartbeat from the new process")

    tasks.stop_evaluator.apply_async(args=[evaluator.pk], queue=worker)
    stopped = wait_for(lambda: (ev := Evaluator.objects.get(pk=evaluator.pk)).lifecycle == "stopped" and ev, 30,
                       "the stop")
    assert stopped.desired == "stopped" and stopped.pid is None and live().status == "stopped"
    assert not process_alive(restarted.pid)

    seen = [e.status for _, e in bus.read_stream_events(redis_client, shop.pk) if e.type == "evaluator.status"]
    assert seen[:3] == ["starting", "running", "failed"]
    assert "restarting" in seen and seen[-1] == "stopped"
