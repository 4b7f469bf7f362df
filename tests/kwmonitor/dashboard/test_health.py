"""What /status/ says is alive: heartbeats decide, not the last event or the database; input rate and idleness."""

from __future__ import annotations

import datetime as dt
import re
import time

import pytest

from kwmonitor.streams.liveness import liveness
from kwmonitor.streams.models import Evaluator
from streaming import bus
from streaming.events import BatchMetrics, EvaluatorStatus

from .conftest import added

NOW = 1_800_000_000.0


def at(ago: float | None) -> dt.datetime | None:
    return None if ago is None else dt.datetime.fromtimestamp(NOW - ago, tz=dt.timezone.utc)


def row(lifecycle: str, started_ago: float | None = 30.0, changed_ago: float | None = None, restarts: int = 0,
        **fields) -> Evaluator:
    """What the supervisor recorded: launched ``started_ago`` s ago; the lifecycle recorded ``changed_ago`` s ago
    (a launch: when it launched)."""
    changed = started_ago if lifecycle == "launched" and changed_ago is None else changed_ago
    return Evaluator(lifecycle=lifecycle, lifecycle_at=at(changed), desired="running", pid=42, host="h",
                     started_at=at(started_ago), restarts=restarts, **fields)


def beat(status: str, ago: float, **progress) -> EvaluatorStatus:
    return EvaluatorStatus(evaluator=1, stream=1, status=status, pid=42, ts=NOW - ago, **progress)


def progress(waiting: int, progress_ago: float, applying: int | None = None) -> dict:
    return {"applied_seq": 99, "input_seq": 99 + waiting, "progress_at": NOW - progress_ago, "applying_seq": applying}


@pytest.mark.parametrize("evaluator, heartbeat, expected", [
    (row("launched"), beat("running", 1.0), "running"),
    (row("launched"), beat("starting", 1.0), "starting"),  # Spark still starting: the heartbeat says so
    (row("launched"), beat("running", 7.0), "unresponsive"),  # beating stopped 7 s ago
    (row("launched"), None, "unresponsive"),  # the key expired: not running, whatever the database says
    (row("launched", started_ago=5.0), None, "starting"),  # just launched, first heartbeat to come
    (row("launched", started_ago=5.0, restarts=1), None, "restarting"),
    (row("launched", started_ago=25.0), None, "unresponsive"),  # it never beat
    # the previous process's last heartbeat, written before this launch: not this one's
    (row("launched", started_ago=2.0, restarts=1), beat("running", 4.0), "restarting"),
    # the supervisor saw the process end after its last heartbeat: not running, though that heartbeat is fresh
    (row("failed", changed_ago=2.0), beat("running", 4.0), "failed"),
    (row("stopped", changed_ago=2.0), beat("running", 4.0), "stopped"),
    (row("stopping", changed_ago=2.0), beat("running", 4.0), "running"),  # a stopping process beats until it ends
    (row("failed"), None, "failed"),
    (row("stopped"), None, "stopped"),
    (row("stopped", changed_ago=30.0), beat("running", 1.0), "running"),  # something beats since: say so
    (None, None, "stopped"),
    # progress (EVALUATOR_STALL_SECONDS 10): input waits and no batch for 12 s is a stall, whatever the heartbeat's status
    (row("launched"), beat("running", 1.0, **progress(5, 12.0, applying=100)), "stalled"),
    (row("launched"), beat("running", 1.0, **progress(5, 3.0)), "running"),  # a batch finished lately
    (row("launched"), beat("running", 1.0, **progress(0, 600.0)), "running"),  # caught up: idle, not stalled
    (row("launched"), beat("starting", 1.0, **progress(5, 60.0, applying=100)), "stalled"),  # a restart's catch-up
])
def test_liveness_comes_from_the_heartbeat(evaluator, heartbeat, expected, settings):
    settings.EVALUATOR_STALL_SECONDS = 10.0
    assert liveness(evaluator, heartbeat, NOW).status == expected


def test_a_current_heartbeat_is_the_whole_live_state_whatever_the_database_says():
    heartbeat = EvaluatorStatus(evaluator=1, stream=1, status="running", pid=7, host="there", plan_version=9,
                                detail="reading", query_errors={"3": "ValueError: no"}, ts=NOW - 1.0)
    for stale in (row("launched", plan_version=2), row("stopped", changed_ago=60.0), row("failed", changed_ago=60.0)):
        live = liveness(stale, heartbeat, NOW)
        assert (live.status, live.detail, live.pid, live.host, live.plan_version, live.query_errors, live.beating) == (
            "running", "reading", 7, "there", 9, {"3": "ValueError: no"}, True)
    live = liveness(row("launched", plan_version=2), None, NOW)
    assert (live.pid, live.host, live.plan_version, live.query_errors, live.beating) == (None, "", 2, {}, False)


def test_a_stall_and_a_silence_say_what_was_seen_last(settings):
    settings.EVALUATOR_STALL_SECONDS = 10.0
    detail = liveness(row("launched"), beat("running", 1.0, **progress(5, 12.0, applying=100)), NOW).detail
    assert detail == "no batch applied for 12 s while 5 ops wait (applied seq 99; applying seq 100)"
    # the heartbeat expired: last seen is the evaluator's own last heartbeat, not when a worker last looked
    detail = liveness(row("launched", started_ago=300.0), None, NOW, last_seen=NOW - 40.0).detail
    assert detail == "no heartbeat for 40 s (last seen 07:59:20 UTC); pid 42 on h"
    assert liveness(row("launched", started_ago=25.0), None, NOW).detail == "no heartbeat since its launch 25 s ago; pid 42 on h"
    # a failure says why and when the supervisor restarts it
    failed = row("failed", changed_ago=1.0, last_error="process 42 exited", next_restart_at=at(-5.0))
    assert liveness(failed, None, NOW).detail == "process 42 exited; restart due at 08:00:05 UTC"


@pytest.mark.redis
@pytest.mark.django_db
def test_status_and_the_stream_page_say_stalled(user_client, query, redis_client, settings):
    settings.EVALUATOR_STALL_SECONDS = 1.0
    s, evaluator = query.stream_id, query.stream.evaluator
    now = time.time()
    bus.record_ingest(redis_client, s, 21)  # input comes in: not idle
    bus.publish_stream_event(redis_client, s, BatchMetrics(evaluator=evaluator.pk, stream=s, batch_id=0, input_rows=9,
                                                           rows_per_second=1234.0, duration_ms=7.3, ts=now - 6.0))
    bus.write_heartbeat(redis_client, EvaluatorStatus(evaluator=evaluator.pk, stream=s, status="running", ts=now,
                                                      applied_seq=9, input_seq=9, progress_at=now))
    processing = 'id="stat-processing" data-field="processing">{}</div>'
    assert processing.format("1234.0") in user_client.get(f"/streams/{s}/").content.decode()
    bus.write_heartbeat(redis_client, EvaluatorStatus(evaluator=evaluator.pk, stream=s, status="running", ts=now,
                                                      applied_seq=9, input_seq=30, progress_at=now - 5.0,
                                                      applying_seq=10))
    report = user_client.get("/status/").json()
    (stream,) = report["streams"]
    assert stream["evaluator"] == "stalled"
    assert re.fullmatch(r"no batch applied for [56] s while 21 ops wait \(applied seq 9; applying seq 10\)",
                        stream["detail"])
    assert {q["query"]: (q["state"], q["detail"]) for q in report["queries"]}[query.pk] == (
        "not running", "the stream's evaluator is stalled")
    html = user_client.get(f"/streams/{s}/").content.decode()
    assert '<span class="badge stalled" id="evaluator-status" data-field="status"' in html
    assert "ops wait (applied seq 9; applying seq 10)</div>" in html
    assert processing.format("–") in html  # the last batch's rate is not what happens now


@pytest.mark.redis
@pytest.mark.django_db
def test_a_dead_process_the_database_calls_launched_never_shows_running(client, user, staff_user, query, redis_client):
    """The row says launched (the supervisor has not looked since the process died): every page, /status/ and the
    admin say unresponsive once its last heartbeat is stale, and running again as soon as a heartbeat is current."""
    from django.utils import timezone

    s, evaluator = query.stream_id, query.stream.evaluator
    launched = timezone.now() - dt.timedelta(seconds=60)
    Evaluator.objects.filter(pk=evaluator.pk).update(desired="running", lifecycle="launched", lifecycle_at=launched,
                                                     started_at=launched, pid=4353, host="h")
    running = dict(evaluator=evaluator.pk, stream=s, status="running", pid=4353, host="h")
    bus.publish_stream_event(redis_client, s, EvaluatorStatus(**running, ts=time.time() - 9.0))  # its last event

    def shown() -> dict[str, str]:
        client.force_login(user)
        (health,) = client.get("/status/").json()["streams"]
        stream_page = client.get(f"/streams/{s}/").content.decode()
        overview = client.get("/").content.decode()
        client.force_login(staff_user)
        evaluators = client.get("/admin/streams/evaluator/").content.decode()
        streams = client.get("/admin/streams/stream/").content.decode()
        change = client.get(f"/admin/streams/evaluator/{evaluator.pk}/change/").content.decode()
        return {
            "status": health["evaluator"],
            "stream page": re.search(r'id="evaluator-status" data-field="status" title="[^"]*">(\w+)<', stream_page)[1],
            "overview": re.search(rf'<tr data-stream="{s}">.*?data-field="status" title="[^"]*">(\w+)<', overview, re.S)[1],
            "admin list": re.search(r'<td class="field-status_now"><span title="[^"]*">(\w+)<', evaluators)[1],
            "admin stream list": re.search(r'<td class="field-evaluator_status">(\w+) \(wants running\)<', streams)[1],
            "admin change": re.search(r'<div class="readonly"><span title="[^"]*">(\w+)</span></div>', change)[1],
        }

    # the heartbeat key expired (or holds a beat 8 s old): unresponsive everywhere
    assert set(shown().values()) == {"unresponsive"}
    bus.write_heartbeat(redis_client, EvaluatorStatus(**running, ts=time.time() - 8.0))
    assert set(shown().values()) == {"unresponsive"}
    # a current heartbeat is running everywhere, whatever the row says
    Evaluator.objects.filter(pk=evaluator.pk).update(lifecycle="stopped", lifecycle_at=launched, pid=None)
    bus.write_heartbeat(redis_client, EvaluatorStatus(**running, ts=time.time()))
    assert set(shown().values()) == {"running"}


@pytest.mark.redis
@pytest.mark.django_db
def test_status_reports_input_rate_then_idle_with_the_last_op(user_client, query, redis_client, settings):
    settings.INPUT_RATE_WINDOW_SECONDS = 1.0
    s = query.stream_id
    before = time.time()
    bus.record_ingest(redis_client, s, 30)
    (stream,) = user_client.get("/status/").json()["streams"]
    assert (stream["stream"], stream["input_rate"], stream["idle"]) == (s, 30.0, False)
    assert before - 0.5 <= stream["last_op_at"] <= time.time() + 0.5
    time.sleep(1.2)
    (stream,) = user_client.get("/status/").json()["streams"]
    assert (stream["input_rate"], stream["idle"]) == (0.0, True) and stream["last_op_at"] <= before + 1.0
    assert '<span class="idle">idle</span>' in user_client.get(f"/streams/{s}/").content.decode()


@pytest.mark.redis
@pytest.mark.django_db
def test_status_says_what_each_query_is_doing(user_client, query, redis_client):
    from kwmonitor.queries.models import KeywordQuery

    s, evaluator = query.stream_id, query.stream.evaluator
    off = KeywordQuery.objects.create(owner=query.owner, name="off", schema=query.schema, stream=query.stream,
                                      keywords="hat", tmax=2, enabled=False)
    states = lambda: {q["query"]: q["state"] for q in user_client.get("/status/").json()["queries"]}  # noqa: E731
    assert states() == {query.pk: "not running", off.pk: "disabled"}
    bus.write_heartbeat(redis_client, EvaluatorStatus(evaluator=evaluator.pk, stream=s, status="running", ts=time.time(),
                                                      query_errors={str(query.pk): "ValueError: bad predicate"}))
    report = user_client.get("/status/").json()
    assert {q["query"]: (q["state"], q["detail"]) for q in report["queries"]}[query.pk] == ("error", "ValueError: bad predicate")
    html = user_client.get(f"/queries/{query.pk}/").content.decode()
    assert 'id="query-state" data-field="state" title="ValueError: bad predicate">error<' in html


@pytest.mark.redis
@pytest.mark.django_db
def test_status_needs_a_login_and_shows_only_what_the_user_may_see(client, query, django_user_model, redis_client):
    assert client.get("/status/").status_code == 401
    client.force_login(django_user_model.objects.create_user("bob", "bob@example.com", "bob-password-1"))
    report = client.get("/status/").json()
    assert report["streams"] == [] and report["queries"] == []
    assert {c["name"] for c in report["components"]} == {"worker", "beat"}
    assert not any(c["alive"] for c in report["components"])  # no worker, no beat in this test


@pytest.mark.redis
@pytest.mark.django_db
def test_a_snapshot_carries_the_seq_of_its_last_change(user_client, query, redis_client):
    bus.publish_changes(redis_client, query.pk, [added(query.pk, 1, seq=17)])
    snapshot = bus.snapshot_of(query.pk, redis_client.hvals(bus.Keys.live(query.pk)),
                               redis_client.xrevrange(bus.Keys.changes(query.pk), count=bus.SNAPSHOT_SEQ_SCAN), None)
    assert snapshot.last_seq == 17
