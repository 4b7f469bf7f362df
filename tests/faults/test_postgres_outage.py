"""PostgreSQL unreachable for a while: history persistence resumes and nothing is lost or duplicated.

A real Celery worker reaches the test database through a proxy the test
cuts (every connection dropped, new ones refused) for several seconds while
evaluator-like producers keep appending changes and metrics to Redis and
``persist_history`` is sent every half second, as beat would. After the
proxy is restored every Redis entry must be in the history tables exactly
once.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from django.db import connection

from kwmonitor.streams import tasks
from kwmonitor.streams.models import MetricSample, ResultEvent
from streaming import bus
from streaming.events import BatchMetrics
from tests.faults.services import CuttableProxy
from tests.kwmonitor.dashboard.conftest import added, removed
from tests.kwmonitor.streams.test_celery_worker import wait_for
from tests.workers import celery_worker

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OUTAGE_SECONDS = 6.0


def test_history_persistence_survives_a_database_outage(ecommerce_schema, user, redis_client, redis_url, tmp_path):
    from kwmonitor.queries.models import KeywordQuery
    from kwmonitor.streams.models import Stream

    shop = Stream.objects.create(name="shop", schema=ecommerce_schema)
    query_id = KeywordQuery.objects.create(owner=user, name="q", schema=ecommerce_schema, stream=shop,
                                           keywords="dress texas", tmax=4).pk
    db = connection.settings_dict
    if "postgresql" not in db["ENGINE"]:
        pytest.skip("needs the PostgreSQL test database")
    proxy = CuttableProxy(int(db["PORT"] or 5432), db["HOST"] or "127.0.0.1")
    proxy.start()
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    env = dict(os.environ, DATABASE_URL=f"postgres://{auth}@127.0.0.1:{proxy.port}/{db['NAME']}", REDIS_URL=redis_url)
    log_path = tmp_path / "worker.log"
    stop = threading.Event()

    def produce() -> None:
        client = bus.connect(redis_url)
        oid = 0
        while not stop.is_set():
            oid += 1
            changes = [added(query_id, oid)] + ([removed(query_id, oid - 1)] if oid > 1 else [])
            bus.publish_changes(client, query_id, changes)
            bus.publish_stream_event(client, shop.pk, BatchMetrics(
                evaluator=1, stream=shop.pk, batch_id=oid, input_rows=1, rows_per_second=1.0, duration_ms=1.0,
                ts=time.time()))
            time.sleep(0.01)

    def rounds_until(queue: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            tasks.persist_history.apply_async(queue=queue)  # what beat sends, every 5 s in production
            time.sleep(0.5)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        with celery_worker(env, log_path) as queue:
            rounds_until(queue, 4)
            wait_for(lambda: ResultEvent.objects.filter(query_id=query_id).exists(), 30, "the first rows")
            proxy.cut()
            cut_at = time.monotonic()
            rounds_until(queue, OUTAGE_SECONDS)
            proxy.restore()
            outage = time.monotonic() - cut_at
            rounds_until(queue, 3)
            stop.set()
            producer.join()
            expected_changes = [e for e, _ in redis_client.xrange(bus.Keys.changes(query_id))]
            expected_metrics = [e for e, fields in redis_client.xrange(bus.Keys.stream_events(shop.pk))
                                if '"batch.metrics"' in fields["data"]]
            restored_at = time.monotonic()

            def caught_up() -> bool:
                tasks.persist_history.apply_async(queue=queue)
                return ResultEvent.objects.filter(query_id=query_id).count() >= len(expected_changes)

            wait_for(caught_up, 60, "the history to catch up")
            caught_up_after = time.monotonic() - restored_at
    finally:
        stop.set()
        proxy.cut()
    persisted = list(ResultEvent.objects.filter(query_id=query_id).order_by("id").values_list("entry_id", flat=True))
    metrics = list(MetricSample.objects.filter(stream=shop).order_by("id").values_list("entry_id", flat=True))
    lost = len(set(expected_changes) - set(persisted)) + len(set(expected_metrics) - set(metrics))
    duplicates = len(persisted) - len(set(persisted)) + len(metrics) - len(set(metrics))
    failed_rounds = log_path.read_text(errors="replace").count(" raised unexpected")
    print(f"PostgreSQL cut for {outage:.1f} s ({failed_rounds} persist rounds failed meanwhile); "
          f"{len(expected_changes)} changes and {len(expected_metrics)} metrics produced; history caught up "
          f"{caught_up_after:.1f} s after the restore; lost {lost}, duplicated {duplicates}")
    assert failed_rounds > 0  # the outage was real: rounds failed while the proxy was cut
    assert persisted == expected_changes and metrics == expected_metrics  # all, once, in order
    assert lost == 0 and duplicates == 0
