"""A Spark worker SIGKILLed mid-stream on a two-worker standalone cluster: the evaluator goes on with the other
worker, and every change comes out exactly once.

Real parts: a standalone cluster of the test's own (``streaming.spark.cluster``,
what ``make cluster`` runs: a master and two workers of one core and 1 GB),
the evaluator launched on it by the supervisor (so its application has one
executor on each worker), daphne serving ingest and the feed, beat's rounds,
and the example feed client following the query. A feeder posts 2,400 ops over
HTTP. Once a third of them is sent, the test watches the log of the executor
on worker 1 and SIGKILLs that worker's JVM while a task runs there (started
and not finished). The worker's executor, which watches its worker, then exits
with its Python workers; the driver loses the executor and runs the lost task
again on the other one. The reference is the
query's changes over the lines sent; the landing files, the history and the
feed client's output are held to it change by change.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from kwmonitor.accounts.models import ApiToken
from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.history import HistoryPersister
from kwmonitor.streams.models import Stream
from kwmonitor.streams.supervisor import Supervisor
from streaming import bus
from streaming.ops import op_to_dict
from streaming.schema import Schema
from streaming.spark.cluster import LocalCluster, process_group_members
from streaming.workloads import ecommerce
from tests.browser.server import ROOT, asgi_server
from tests.faults.pipeline import (BODY, applied_seq, beat, check_feed, check_landing, feed, history_of, wait_published,
                                   wait_running, wait_until)
from tests.faults.reference import by_seq, reference_changes

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEYWORDS, TMAX = "gift texas", 4
OPS, PAUSE = 2400, 0.2  # ~10 s of feed: the kill lands while it goes on
RUNNING = re.compile(r"Running task (\S+) in stage (\S+) \(TID (\d+)\)")
FINISHED = re.compile(r"Finished task \S+ in stage \S+ \(TID (\d+)\)")


def task_running(log) -> tuple[str, str, str] | None:
    """The task an executor's log says it started and has not finished (attempt, stage, TID), if any."""
    text = log.read_text(errors="replace") if log.exists() else ""
    finished = {m.group(1) for m in FINISHED.finditer(text)}
    running = [m.groups() for m in RUNNING.finditer(text) if m.group(3) not in finished]
    return running[-1] if running else None


def worker_port(pid: int) -> str:
    """The RPC port a worker daemon was started with (its id ends with it)."""
    argv = open(f"/proc/{pid}/cmdline").read().split("\0")
    return argv[argv.index("--port") + 1]


def test_a_worker_killed_mid_task_loses_nothing_and_repeats_nothing(user, ecommerce_schema, redis_client, redis_url,
                                                                     settings, tmp_path):
    settings.LANDING_DIR = tmp_path / "landing"
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    settings.EVALUATOR_LOG_DIR = tmp_path / "log"
    stream = Stream.objects.create(name="shop", schema=ecommerce_schema)
    query = KeywordQuery.objects.create(owner=user, name="q", schema=ecommerce_schema, stream=stream,
                                        keywords=KEYWORDS, tmax=TMAX)
    _, token = ApiToken.issue(user, "faults")
    lines = [json.dumps(op_to_dict(op)) for op in ecommerce.build(OPS, seed=11).ops()]
    reference = reference_changes(Schema.from_dict(ecommerce.SCHEMA_DOC), KEYWORDS, TMAX, lines)
    client = bus.connect(redis_url)
    supervisor = Supervisor()
    tally: Counter = Counter()
    beat_errors: Counter = Counter()
    env = {"LANDING_DIR": str(settings.LANDING_DIR), "CHECKPOINT_DIR": str(settings.CHECKPOINT_DIR)}
    feed_out = tmp_path / "feed.ndjson"
    stop_beat = threading.Event()
    with LocalCluster(tmp_path / "spark", workers=2, cores=1, memory="1g") as cluster, \
            asgi_server(redis_url, extra_env=env) as base:
        settings.SPARK_MASTER = cluster.master_url
        evaluator = supervisor.start(stream.evaluator.pk)
        follower = None
        beating = threading.Thread(target=beat, args=(client, stop_beat, beat_errors), daemon=True)
        third = (OPS // 3 // BODY * BODY, threading.Event())
        feeder = threading.Thread(target=feed, args=(base, stream, lines, tally, [third], PAUSE),
                                  daemon=True)
        try:
            up_after = wait_running(client, evaluator.pk)
            app = cluster.applications(f"kwmonitor-evaluator-{evaluator.pk}")[0]["id"]
            beating.start()
            follower = subprocess.Popen(
                [sys.executable, "-m", "kwmonitor.feed_client", "--url", f"{base.replace('http', 'ws')}/ws/queries/{query.pk}/"],
                cwd=ROOT, env=dict(os.environ, KWMONITOR_TOKEN=token), stdout=feed_out.open("w"),
                stderr=(tmp_path / "feed.err").open("w"))
            fed_at = time.monotonic()
            feeder.start()
            victim_pid = cluster.daemon_pids()["worker-1"]
            port = worker_port(victim_pid)
            executors = cluster.executors(app)
            assert len({e.worker for e in executors}) == 2, f"the application should run on both workers: {executors}"
            victim = next(e for e in executors if e.worker.endswith(f"-{port}"))
            survivor = next(e for e in executors if e is not victim)
            assert third[1].wait(120), "the feeder did not reach a third of the stream"
            wait_until(lambda: task_running(victim.log), 120, "a task on the executor of worker 1", every=0.005)
            lost_task = task_running(victim.log)
            killed_at_seq, accepted_at_kill = applied_seq(client, evaluator.pk), tally["accepted"]
            killed = time.monotonic()
            os.kill(victim_pid, signal.SIGKILL)
            executor_gone = wait_until(lambda: not process_group_members(victim_pid), 60,
                                       "the killed worker's executor and its Python workers to exit", every=0.1)
            workers = {w["id"]: w["state"] for w in cluster.state()["workers"]}
            feeder.join(timeout=300)
            assert not feeder.is_alive()
            wait_published(client, evaluator.pk, OPS, [(query, reference)])
            done_after = time.monotonic() - killed
            last_id = client.xrevrange(bus.Keys.changes(query.pk), count=1)[0][0]
            wait_until(lambda: last_id in feed_out.read_text(), 60, "the feed client to get the last change")
            fed_for = time.monotonic() - fed_at
            assert cluster.state()["activeapps"][0]["id"] == app, "the application should go on, not be replaced"
            survivor_log = survivor.log.read_text(errors="replace")
            master_log = (tmp_path / "spark" / "logs" / "master.log").read_text(errors="replace")
        finally:
            stop_beat.set()
            if beating.is_alive():
                beating.join(timeout=30)
            if follower is not None:
                follower.terminate()
                follower.wait(timeout=10)
            supervisor.stop(stream.evaluator.pk)
    HistoryPersister(client).run()

    assert workers[victim.worker] == "DEAD" and workers[survivor.worker] == "ALIVE"
    assert accepted_at_kill < OPS and killed_at_seq < OPS - 1, "the kill should land mid-stream"
    assert Stream.objects.get(pk=stream.pk).evaluator.restarts == 0, "the evaluator itself should not restart"
    # Spark's account: the driver (its log holds warnings and errors) lost the executor, the master removed the
    # worker and told the application, and the task that ran there ran again on the other executor.
    driver_log = (tmp_path / "log" / f"evaluator-{evaluator.pk}.log").read_text(errors="replace")
    lost = re.search(r"Lost executor \d+ on 127\.0\.0\.1: worker lost.*", driver_log)
    assert lost, driver_log[-3000:]
    told = [line.split(": ", 1)[1] for line in master_log.splitlines() if "Telling app of lost" in line]
    assert told, master_log[-3000:]
    attempt, stage, tid = lost_task
    index = attempt.split(".")[0]
    retried = re.search(rf"Running task {index}\.[1-9] in stage {re.escape(stage)} \(TID \d+\)", survivor_log)
    assert retried, f"task {index} of stage {stage} should run again on the other worker's executor"

    check_landing(settings.LANDING_DIR, stream, lines, tally)
    assert by_seq(history_of(query)) == by_seq(reference)  # every change once, in its op, in seq order
    snapshots = check_feed(reference, [json.loads(line) for line in feed_out.read_text().splitlines()])
    print(f"evaluator up on the cluster in {up_after:.1f} s; worker 1 SIGKILLed with {accepted_at_kill} ops "
          f"accepted and {killed_at_seq + 1} applied, while "
          f"task {attempt} of stage {stage} (TID {tid}) ran on its executor; its executor and Python workers gone "
          f"{executor_gone:.1f} s later; the driver: '{lost.group(0).strip()}'; the master: {told}; the task ran "
          f"again on the other executor ('{retried.group(0)}'); "
          f"every op applied and published {done_after:.1f} s after the kill, fed and followed in {fed_for:.1f} s; "
          f"{len(reference)} reference changes, each once in history and in the feed ({snapshots} snapshot); "
          f"beat rounds that failed: {dict(beat_errors)}")
    assert snapshots == 1  # the feed never dropped: the web server and Redis were not touched
