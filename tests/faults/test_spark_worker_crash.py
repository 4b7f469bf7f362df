"""A Spark worker SIGKILLed mid-stream on a two-worker standalone cluster: the evaluator goes on with the other
worker, and every change comes out exactly once.

Real parts: a standalone cluster of the test's own (``streaming.spark.cluster``,
what ``make cluster`` runs: a master and two workers of one core and 1 GB),
the evaluator launched on it by the supervisor (so its application has one
executor on each worker), daphne serving ingest and the feed, beat's rounds,
and the example feed client following the query. A feeder posts 2,400 ops over
HTTP once each executor has finished a task (the evaluator's warm-up). Once a
third of them is sent, the test watches the executors' logs and SIGKILLs the
JVM of the worker whose executor runs a task (started and not finished). That
executor, which watches its worker, then exits with its Python workers; the
driver loses it and runs the tasks it lost with it again on the other one. The
reference is the query's changes over the lines sent; the landing files, the
history and the feed client's output are held to it change by change.

Whether the task seen running runs again is a race the test cannot choose:
an executor's log reaches its file through its worker (a moment late, and its
last lines are lost with the worker), and the executor goes on for up to
seconds after its worker's death, so the task may end there and its result
reach the driver before the master's word of the loss (it then counts and does
not run again; a clean-clone CI run failed on expecting it to), or the driver
loses it with the executor and runs it again on the other one. The driver's
event log (``spark.eventLog``, on for this test's evaluator) tells which, and
each outcome is held to its account. A task that failed must be one the lost
executor took with it, its loss not caused by the application (such losses do
not count towards ``spark.task.maxFailures``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from kwmonitor.streams.history import HistoryPersister
from kwmonitor.streams.models import Stream
from streaming import bus
from streaming.spark.cluster import ExecutorRecord, LocalCluster, process_group_members
from tests.browser.server import asgi_server
from tests.faults.pipeline import (BODY, applied_seq, check_feed, check_landing, evaluated, fault_stream, feed,
                                   followed, history_of, wait_followed, wait_published, wait_until)
from tests.faults.reference import by_seq

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


def running_task(executors: list[ExecutorRecord], timeout: float) -> tuple[ExecutorRecord, tuple[str, str, str]]:
    """The first executor seen running a task, and that task."""
    deadline = time.monotonic() + timeout
    while True:
        for executor in executors:
            if task := task_running(executor.log):
                return executor, task
        assert time.monotonic() < deadline, "no task ran on the executors"
        time.sleep(0.005)


def task_ends(events: Path, app: str) -> list[dict]:
    """The driver's record of each task attempt that ended (``SparkListenerTaskEnd`` in the application's event
    log; a last line the evaluator's stop cut short is left out)."""
    ends = []
    for log in events.glob(f"{app}*"):
        for line in log.read_text(errors="replace").split("\n")[:-1]:
            if '"Event":"SparkListenerTaskEnd"' in line:
                ends.append(json.loads(line))
    return ends


def worker_port(pid: int) -> str:
    """The RPC port a worker daemon was started with (its id ends with it)."""
    argv = open(f"/proc/{pid}/cmdline").read().split("\0")
    return argv[argv.index("--port") + 1]


def test_a_worker_killed_mid_task_loses_nothing_and_repeats_nothing(user, ecommerce_schema, redis_client, redis_url,
                                                                     settings, tmp_path, monkeypatch):
    events = tmp_path / "events"
    events.mkdir()
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir={events} "
                       "--conf spark.eventLog.rolling.enabled=false --conf spark.eventLog.compress=false pyspark-shell")
    faulty = fault_stream(settings, tmp_path, user, ecommerce_schema, [KEYWORDS], TMAX, OPS)
    query, reference = faulty.queries[0], faulty.references[faulty.queries[0].pk]
    client = bus.connect(redis_url)
    tally: Counter = Counter()
    with LocalCluster(tmp_path / "spark", workers=2, cores=1, memory="1g") as cluster, \
            asgi_server(redis_url, extra_env=faulty.env) as base:
        settings.SPARK_MASTER = cluster.master_url
        with evaluated(client, faulty.stream) as run, followed(base, query, faulty.token, tmp_path) as feed_out:
            app = cluster.applications(f"kwmonitor-evaluator-{run.evaluator_id}")[0]["id"]
            third = (OPS // 3 // BODY * BODY, threading.Event())
            feeder = threading.Thread(target=feed, args=(base, faulty.stream, faulty.lines, tally, [third], PAUSE),
                                      daemon=True)
            workers = {worker_port(pid): pid for name, pid in cluster.daemon_pids().items() if name != "master"}
            executors = cluster.executors(app)
            assert len({e.worker for e in executors}) == 2, f"the application should run on both workers: {executors}"
            wait_until(lambda: all(FINISHED.search(e.log.read_text(errors="replace")) for e in executors), 120,
                       "each executor to finish a task (the warm-up)")
            fed_at = time.monotonic()
            feeder.start()
            assert third[1].wait(120), "the feeder did not reach a third of the stream"
            victim, lost_task = running_task(executors, timeout=120)
            survivor = next(e for e in executors if e is not victim)
            victim_pid = workers[victim.worker.rpartition("-")[2]]
            killed_at_seq, accepted_at_kill = applied_seq(client, run.evaluator_id), tally["accepted"]
            killed = time.monotonic()
            os.kill(victim_pid, signal.SIGKILL)
            executor_gone = wait_until(lambda: not process_group_members(victim_pid), 60,
                                       "the killed worker's executor and its Python workers to exit", every=0.1)
            states = {w["id"]: w["state"] for w in cluster.state()["workers"]}
            feeder.join(timeout=300)
            assert not feeder.is_alive()
            wait_published(client, run.evaluator_id, faulty)
            done_after = time.monotonic() - killed
            wait_followed(client, query, feed_out)
            fed_for = time.monotonic() - fed_at
            assert cluster.state()["activeapps"][0]["id"] == app, "the application should go on, not be replaced"
            survivor_log = survivor.log.read_text(errors="replace")
            master_log = (tmp_path / "spark" / "logs" / "master.log").read_text(errors="replace")
    HistoryPersister(client).run()

    assert states[victim.worker] == "DEAD" and states[survivor.worker] == "ALIVE"
    assert accepted_at_kill < OPS and killed_at_seq < OPS - 1, "the kill should land mid-stream"
    assert Stream.objects.get(pk=faulty.stream.pk).evaluator.restarts == 0, "the evaluator itself should not restart"
    # Spark's account: the driver (its log holds warnings and errors) lost the executor, the master removed the
    # worker and told the application, and the task seen running on the executor either ended there before the
    # driver lost it or ran again on the other executor.
    driver_log = (tmp_path / "log" / f"evaluator-{run.evaluator_id}.log").read_text(errors="replace")
    lost = re.search(r"Lost executor \d+ on 127\.0\.0\.1: worker lost.*", driver_log)
    assert lost, driver_log[-3000:]
    told = [line.split(": ", 1)[1] for line in master_log.splitlines() if "Telling app of lost" in line]
    assert told, master_log[-3000:]
    attempt, stage, tid = lost_task
    index = attempt.split(".")[0]
    ends = task_ends(events, app)
    failed = [end["Task End Reason"] for end in ends if end["Task End Reason"]["Reason"] != "Success"]
    assert all(reason["Reason"] == "ExecutorLostFailure" and reason["Executor ID"] == str(victim.executor)
               and reason["Exit Caused By App"] is False for reason in failed), \
        f"only the lost executor's tasks may fail, and not as failures of theirs: {failed}"
    seen = [end for end in ends if end["Task Info"]["Task ID"] == int(tid)]
    assert len(seen) == 1 and seen[0]["Task Info"]["Executor ID"] == str(victim.executor), seen
    again = [end for end in ends if f"{end['Stage ID']}.{end['Stage Attempt ID']}" == stage
             and end["Task Info"]["Index"] == int(index) and end["Task Info"]["Task ID"] != int(tid)]
    retried = re.search(rf"Running task {index}\.[1-9] in stage {re.escape(stage)} \(TID \d+\)", survivor_log)
    if seen[0]["Task End Reason"]["Reason"] != "Success":
        assert [(end["Task End Reason"]["Reason"], end["Task Info"]["Executor ID"]) for end in again] == [
            ("Success", str(survivor.executor))], f"lost task {index} of stage {stage} should run again once: {again}"
        assert retried, f"task {index} of stage {stage} should run again on the other worker's executor"
        outcome = f"lost with the executor and ran again on the other one ('{retried.group(0)}')"
    else:
        assert not again and not retried, f"task {index} of stage {stage} ended on its executor, yet ran again"
        outcome = "ended on its executor before the driver lost it (its result counted; it did not run again)"

    check_landing(settings.LANDING_DIR, faulty, tally)
    assert by_seq(history_of(query)) == by_seq(reference)  # every change once, in its op, in seq order
    snapshots = check_feed(reference, [json.loads(line) for line in feed_out.read_text().splitlines()])
    print(f"evaluator up on the cluster in {run.up_after:.1f} s; a worker SIGKILLed with {accepted_at_kill} ops "
          f"accepted and {killed_at_seq + 1} applied, while "
          f"task {attempt} of stage {stage} (TID {tid}) ran on its executor; its executor and Python workers gone "
          f"{executor_gone:.1f} s later; the driver: '{lost.group(0).strip()}'; the master: {told}; the task "
          f"{outcome}; task attempts the lost executor took with it: {len(failed)}; "
          f"every op applied and published {done_after:.1f} s after the kill, fed and followed in {fed_for:.1f} s; "
          f"{len(reference)} reference changes, each once in history and in the feed ({snapshots} snapshot); "
          f"beat rounds that failed: {dict(run.beat_errors)}")
    assert snapshots == 1  # the feed never dropped: the web server and Redis were not touched
