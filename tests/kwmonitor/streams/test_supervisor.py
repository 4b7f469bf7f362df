"""The supervisor on real processes: start, death, silence, backoff, stop; it records what it did, never what a
heartbeat says."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from pathlib import Path

import pytest
from django.utils import timezone

from kwmonitor.streams.liveness import read_liveness
from kwmonitor.streams.models import Evaluator
from kwmonitor.streams.supervisor import (
    Supervisor,
    SupervisorSettings,
    backoff_seconds,
    process_alive,
    process_start_ticks,
)
from streaming import bus
from streaming.events import EvaluatorStatus

from .conftest import HEARTBEAT_COMMAND

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def wait_for(predicate, timeout: float = 10.0, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s")


@pytest.fixture
def supervisor(tmp_path: Path) -> Supervisor:
    return Supervisor(SupervisorSettings(
        command=tuple(HEARTBEAT_COMMAND), preprocessor_command=tuple(HEARTBEAT_COMMAND), heartbeat_timeout=1.0,
        start_grace=5.0, stable_after=60.0,
        backoff=0.5, backoff_max=4.0, stop_timeout=5.0, log_dir=tmp_path / "log",
    ))


@pytest.fixture
def evaluator(shop, settings, tmp_path) -> Evaluator:
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    return Evaluator.objects.get(stream=shop)


def statuses(redis_client, stream_id: int) -> list[str]:
    return [e.status for _, e in bus.read_stream_events(redis_client, stream_id) if e.type == "evaluator.status"]


def now_status(redis_client, evaluator: Evaluator) -> str:
    """What the pages say it does (its liveness)."""
    return read_liveness(redis_client, [Evaluator.objects.get(pk=evaluator.pk)])[0].status


def recorded(evaluator: Evaluator) -> dict:
    return Evaluator.objects.filter(pk=evaluator.pk).values().get()


def test_process_identity_is_pid_and_start_time():
    me = os.getpid()
    assert process_alive(me) and process_alive(me, process_start_ticks(me))
    assert not process_alive(me, process_start_ticks(me) + 1)  # same pid, another process
    assert not process_alive(None) and process_start_ticks(2**22 + 1) is None


def test_backoff_doubles_up_to_the_cap():
    assert [backoff_seconds(n, 2.0, 30.0) for n in range(1, 7)] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_start_launches_a_detached_process_with_the_plan_written(supervisor, evaluator, redis_client, reap_evaluators):
    started = supervisor.start(evaluator.pk)
    reap_evaluators.append(started.pid)
    started.refresh_from_db()
    assert started.desired == "running" and started.lifecycle == "launched"
    assert started.lifecycle_at == started.started_at
    assert now_status(redis_client, started) == "starting"
    assert process_alive(started.pid, started.process_start)
    assert started.command[2:4] == ["--evaluator", str(evaluator.pk)]
    parent = int(Path(f"/proc/{started.pid}/stat").read_text().rpartition(")")[2].split()[1])
    assert parent != os.getpid() and os.getsid(started.pid) == started.pid  # detached, in its own session
    plan = bus.read_plan(redis_client, evaluator.pk)
    assert plan is not None and plan.version == started.plan_version
    assert [q.keywords for q in plan.queries] == [["dress", "texas"]]
    # once it beats it runs, as its heartbeat says, and it announces so itself; supervision records nothing of it
    wait_for(lambda: bus.read_heartbeat(redis_client, evaluator.pk))
    before = recorded(evaluator)
    assert supervisor.supervise() == []
    assert recorded(evaluator) == before
    live = read_liveness(redis_client, [started])[0]
    assert (live.status, live.pid, live.plan_version) == ("running", started.pid, started.plan_version)
    assert statuses(redis_client, evaluator.stream_id) == ["starting", "running"]
    # starting again while it runs does not launch a second process
    assert supervisor.start(evaluator.pk).pid == started.pid


def test_a_killed_process_is_restarted_after_the_backoff(supervisor, evaluator, redis_client, reap_evaluators):
    first = supervisor.start(evaluator.pk).pid
    reap_evaluators.append(first)
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not process_alive(first))
    assert supervisor.supervise() == [(evaluator.pk, "died")]
    evaluator.refresh_from_db()
    assert evaluator.lifecycle == "failed" and evaluator.pid is None and evaluator.failures == 1
    assert "exited" in evaluator.last_error
    assert now_status(redis_client, evaluator) == "failed"
    assert supervisor.supervise() == []  # still within the backoff
    wait_for(lambda: timezone.now() >= evaluator.next_restart_at)
    assert supervisor.supervise() == [(evaluator.pk, "launched")]
    evaluator.refresh_from_db()
    reap_evaluators.append(evaluator.pid)
    assert evaluator.pid != first and process_alive(evaluator.pid, evaluator.process_start)
    assert evaluator.lifecycle == "launched" and evaluator.restarts == 1
    assert now_status(redis_client, evaluator) in ("restarting", "running")  # running once the new process beats
    assert statuses(redis_client, evaluator.stream_id)[:3] == ["starting", "failed", "restarting"]


def test_a_silent_process_is_killed_and_restarted(supervisor, evaluator, redis_client, reap_evaluators):
    pid = supervisor.start(evaluator.pk).pid
    reap_evaluators.append(pid)
    wait_for(lambda: bus.read_heartbeat(redis_client, evaluator.pk))
    supervisor.supervise()
    os.kill(pid, signal.SIGSTOP)  # alive but silent
    redis_client.delete(bus.Keys.heartbeat(evaluator.pk))  # as if its TTL ran out
    Evaluator.objects.filter(pk=evaluator.pk).update(started_at=timezone.now() - dt.timedelta(seconds=10))
    redis_client.set(bus.Keys.last_heartbeat(evaluator.pk), repr(time.time() - 2))  # its last beat, 2 s ago
    # it was replaying what Spark had committed, guarded: the op it was in is named (streaming/test_evaluator.py)
    redis_client.set(bus.Keys.failed_op(evaluator.pk), json.dumps({"seq": 5, "error": "killed while applying it"}))
    assert supervisor.supervise() == [(evaluator.pk, "silent")]
    wait_for(lambda: not process_alive(pid))
    evaluator.refresh_from_db()
    assert evaluator.lifecycle == "failed" and evaluator.last_error.startswith("no heartbeat")
    assert evaluator.last_error.endswith(" while applying seq 5")
    assert redis_client.hgetall(bus.Keys.poison_watch(evaluator.pk)) == {"seq": "5", "failures": "1"}


def test_stop_terminates_cleanly_and_supervision_keeps_it_stopped(supervisor, evaluator, redis_client, reap_evaluators):
    pid = supervisor.start(evaluator.pk).pid
    reap_evaluators.append(pid)
    wait_for(lambda: bus.read_heartbeat(redis_client, evaluator.pk))
    stopped = supervisor.stop(evaluator.pk)
    assert stopped.desired == "stopped" and stopped.lifecycle == "stopped" and stopped.pid is None
    assert now_status(redis_client, stopped) == "stopped"
    assert not process_alive(pid)
    assert statuses(redis_client, evaluator.stream_id)[-3:] == ["stopping", "stopped", "stopped"]
    assert supervisor.supervise() == []



def test_the_supervisor_records_what_it_did_never_what_the_heartbeat_says(supervisor, evaluator, redis_client):
    # This test process stands for the evaluator: alive, with its own command line.
    me = os.getpid()
    launched = timezone.now()
    Evaluator.objects.filter(pk=evaluator.pk).update(
        desired="running", lifecycle="launched", lifecycle_at=launched, pid=me, host=supervisor.hostname,
        process_start=process_start_ticks(me), started_at=launched,
    )
    supervisor.supervise()
    before = recorded(evaluator)
    beat = dict(evaluator=evaluator.pk, stream=evaluator.stream_id, pid=me, host="here", plan_version=7)
    for status in ("starting", "running", "stopping", "failed", "running"):
        bus.write_heartbeat(redis_client, EvaluatorStatus(status=status, detail=f"said {status}", ts=time.time(), **beat))
        assert supervisor.supervise() == []
        assert recorded(evaluator) == before  # nothing of the heartbeat is written to the database
        live = read_liveness(redis_client, [Evaluator.objects.get(pk=evaluator.pk)])[0]
        assert (live.status, live.detail, live.pid, live.plan_version) == (status, f"said {status}", me, 7)
    assert statuses(redis_client, evaluator.stream_id) == []  # nor announced: the process announces its own
    # a heartbeat left by another process does not count for this one, which is given its start grace
    bus.write_heartbeat(redis_client, EvaluatorStatus(status="running", ts=time.time(), **dict(beat, pid=me + 1)))
    assert supervisor.supervise() == [] and recorded(evaluator) == before


def test_a_redis_restart_gives_a_process_it_no_longer_hears_its_timeout_from_then(
        supervisor, evaluator, redis_client, monkeypatch):
    me = os.getpid()  # stands for a process on another host: never signalled from here
    launched = timezone.now() - dt.timedelta(seconds=600)  # long past its start grace
    Evaluator.objects.filter(pk=evaluator.pk).update(
        desired="running", lifecycle="launched", lifecycle_at=launched, pid=me, host="elsewhere",
        process_start=process_start_ticks(me), started_at=launched,
    )
    # an empty Redis came back 0.5 s ago: no heartbeat, no time of the last one
    monkeypatch.setattr("kwmonitor.streams.supervisor.redis_started_at", lambda client: time.time() - 0.5)
    assert supervisor.supervise() == []
    monkeypatch.setattr("kwmonitor.streams.supervisor.redis_started_at", lambda client: time.time() - 6.0)
    assert supervisor.supervise() == [(evaluator.pk, "silent")]
    evaluator.refresh_from_db()
    assert evaluator.last_error.startswith("no heartbeat for 6 s") and evaluator.lifecycle == "failed"


def test_an_evaluator_on_another_host_is_left_to_that_host(supervisor, evaluator, redis_client):
    me = os.getpid()  # stands for a process on another host: never signalled from here
    Evaluator.objects.filter(pk=evaluator.pk).update(
        desired="running", lifecycle="launched", lifecycle_at=timezone.now(), pid=me, host="elsewhere",
        process_start=process_start_ticks(me), started_at=timezone.now(),
    )
    bus.write_heartbeat(redis_client, EvaluatorStatus(evaluator=evaluator.pk, stream=evaluator.stream_id, status="running",
                                                      pid=me, ts=time.time()))
    assert supervisor.supervise() == []  # beating: alive, wherever it is
    stopped = supervisor.stop(evaluator.pk)
    assert (stopped.desired, stopped.lifecycle, stopped.pid) == ("stopped", "stopping", me)
    assert supervisor.supervise() == []  # still beating: its host's supervisor stops it
    redis_client.delete(bus.Keys.heartbeat(evaluator.pk))
    assert supervisor.supervise() == [(evaluator.pk, "marked stopped")]
    evaluator.refresh_from_db()
    assert (evaluator.lifecycle, evaluator.pid) == ("stopped", None) and process_alive(me)


def poison_supervisor(tmp_path: Path, *extra: str) -> Supervisor:
    return Supervisor(SupervisorSettings(
        command=(*HEARTBEAT_COMMAND, *extra), preprocessor_command=tuple(HEARTBEAT_COMMAND), heartbeat_timeout=5.0,
        start_grace=5.0, stable_after=60.0, backoff=0.2, backoff_max=1.0, stop_timeout=5.0, log_dir=tmp_path / "log",
        stall_seconds=0.5, poison_failures=2,
    ))


def relaunch(supervisor: Supervisor, evaluator: Evaluator, reap: list[int]) -> int:
    evaluator.refresh_from_db()
    wait_for(lambda: timezone.now() >= evaluator.next_restart_at)
    assert supervisor.supervise() == [(evaluator.pk, "launched")]
    evaluator.refresh_from_db()
    reap.append(evaluator.pid)
    return evaluator.pid


def test_a_stalled_evaluator_is_restarted_and_the_op_that_stalled_it_twice_is_set_aside(
        evaluator, redis_client, reap_evaluators, tmp_path):
    supervisor = poison_supervisor(tmp_path, "--stalled-at", "7")  # its heartbeat: on op 7, input waiting, no batch
    pid = supervisor.start(evaluator.pk).pid
    reap_evaluators.append(pid)
    for stall in (1, 2):
        wait_for(lambda: (bus.read_heartbeat(redis_client, evaluator.pk) or EvaluatorStatus(
            evaluator=0, stream=0, status="stopped", ts=0)).pid == pid)
        # alive and beating, "running" until the heartbeat shows 0.5 s without progress
        wait_for(lambda: (evaluator.pk, "stalled") in supervisor.supervise(), timeout=5.0, step=0.1)
        wait_for(lambda: not process_alive(pid))  # killed, like a dead one
        evaluator.refresh_from_db()
        assert (evaluator.lifecycle, evaluator.pid, evaluator.failures) == ("failed", None, stall)
        assert evaluator.last_error.startswith("stalled: no batch applied for ")
        assert "while 11 ops wait (applied seq 6; applying seq 7)" in evaluator.last_error
        if stall == 1:
            assert redis_client.hgetall(bus.Keys.poison_watch(evaluator.pk)) == {"seq": "7", "failures": "1"}
            assert not redis_client.exists(bus.Keys.stream_poison(evaluator.stream_id))
            pid = relaunch(supervisor, evaluator, reap_evaluators)
    assert evaluator.last_error.endswith("; op seq 7 set aside as a dead letter")
    reason = redis_client.hget(bus.Keys.stream_poison(evaluator.stream_id), "7")
    assert reason.startswith("poison op, set aside: it stalled the evaluator 2 times in a row (the last time: no batch "
                             "applied for ")
    assert reason.endswith("while 11 ops wait (applied seq 6; applying seq 7))")
    assert not redis_client.exists(bus.Keys.poison_watch(evaluator.pk))
    assert evaluator.restarts == 1


def test_an_op_that_crashed_the_evaluator_twice_is_set_aside_and_other_failures_start_the_count_over(
        evaluator, redis_client, reap_evaluators, tmp_path):
    supervisor = poison_supervisor(tmp_path)
    pid = supervisor.start(evaluator.pk).pid
    reap_evaluators.append(pid)
    poison = bus.Keys.stream_poison(evaluator.stream_id)
    for seq in (9, 4, 4):
        # what the evaluator records before an error ends it (tests/streaming/test_evaluator.py)
        redis_client.set(bus.Keys.failed_op(evaluator.pk), json.dumps({"seq": seq, "error": "MemoryError: "}))
        os.killpg(pid, signal.SIGKILL)
        wait_for(lambda: not process_alive(pid))
        assert supervisor.supervise() == [(evaluator.pk, "died")]
        evaluator.refresh_from_db()
        assert evaluator.last_error.startswith(f"process {pid} exited while applying seq {seq}: MemoryError: ")
        assert not redis_client.exists(bus.Keys.failed_op(evaluator.pk))
        assert (redis_client.hkeys(poison) == ["4"]) == (seq == 4 and evaluator.failures == 3)
        pid = relaunch(supervisor, evaluator, reap_evaluators)
    assert redis_client.hget(poison, "4") == (
        "poison op, set aside: it crashed the evaluator 2 times in a row (the last time: MemoryError: )")
    # a death that names no op counts nothing
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not process_alive(pid))
    assert supervisor.supervise() == [(evaluator.pk, "died")]
    evaluator.refresh_from_db()
    assert evaluator.last_error == f"process {pid} exited" and redis_client.hkeys(poison) == ["4"]
    # an operator's start begins a new run: no restarts, no error carried over
    pid = supervisor.start(evaluator.pk).pid
    reap_evaluators.append(pid)
    evaluator.refresh_from_db()
    assert (evaluator.restarts, evaluator.last_error, evaluator.lifecycle) == (0, "", "launched")
