"""A stream on several evaluators and a pre-processor: rows, plans, supervision, moves, the stream page."""

from __future__ import annotations

import orjson
import pytest
from django.urls import reverse

from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.liveness import read_liveness
from kwmonitor.streams.models import Evaluator
from kwmonitor.streams.plans import advance_placement, publish_plan
from kwmonitor.streams.supervisor import Supervisor, SupervisorSettings
from streaming import bus
from streaming.placement import Placement

from .conftest import HEARTBEAT_COMMAND
from .test_supervisor import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scaled(shop, user, ecommerce_schema, settings, tmp_path):
    """The shop stream with five enabled queries (four keyword sets), two evaluators and a pre-processor."""
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    settings.LANDING_DIR = tmp_path / "landing"
    for name, words in (("dress", "dress"), ("hats", "hat"), ("texas dress cheap", "dress texas"), ("shoes", "shoes")):
        KeywordQuery.objects.create(owner=user, name=name, schema=ecommerce_schema, stream=shop, keywords=words, tmax=3)
    shop.evaluator_processes = 2
    shop.preprocess = True
    shop.save()
    return shop


def plans(redis_client, stream):
    """Each evaluator's plan as stored, by role and slot."""
    return {e.role + str(e.slot): bus.read_plan(redis_client, e.pk).model_dump(mode="json", by_alias=True)
            for e in Evaluator.objects.filter(stream=stream).exclude(role="preprocessor")}


def test_the_stream_gets_a_row_per_process_and_each_evaluator_a_plan_of_its_classes(scaled, redis_client):
    rows = {(e.role, e.slot) for e in Evaluator.objects.filter(stream=scaled)}
    assert rows == {("primary", 0), ("secondary", 1), ("preprocessor", 0)}
    by_role = plans(redis_client, scaled)
    primary, secondary = by_role["primary0"], by_role["secondary1"]
    enabled = set(KeywordQuery.objects.filter(stream=scaled, enabled=True).values_list("pk", flat=True))
    mine = {q["id"] for q in primary["queries"]}, {q["id"] for q in secondary["queries"]}
    # the queries were placed on the one evaluator the stream had; scaled out, the rule moves the smallest unit
    scaled.refresh_from_db()
    placement = Placement.from_json(scaled.placement)
    assert placement.moving and placement.move.source == primary["evaluator"]
    moving = set(placement.move.queries)
    assert mine[0] == enabled and mine[1] == moving  # the target runs it too until the hand-off ends
    assert secondary["handoff"]["joining"] == sorted(moving)
    assert {q["id"] for q in secondary["others"]} == enabled - moving  # the store keeps what the others need
    assert primary["primary"] and not secondary["primary"]
    pre = Evaluator.objects.get(stream=scaled, role="preprocessor")
    source = primary["stream"]["source"]
    assert source["kind"] == "derived" and source["path"].endswith(f".derived/{scaled.pk}")
    assert source["raw"]["consumers"] == [pre.pk]
    assert sorted(source["consumers"]) == sorted(e.pk for e in Evaluator.objects.filter(stream=scaled)
                                                  .exclude(role="preprocessor"))
    # what running readers follow: the raw directory is read by the pre-processor, the derived one by the evaluators
    assert redis_client.smembers(source["raw"]["consumers_key"]) == {bus.Keys.evaluator_state(pre.pk)}
    assert redis_client.smembers(source["consumers_key"]) == {bus.Keys.evaluator_state(e) for e in source["consumers"]}


def test_a_move_ends_once_the_source_published_the_seq_the_target_joined_at(scaled, redis_client):
    scaled.refresh_from_db()
    current = Placement.from_json(scaled.placement)
    assert len(current.assignment) == 5
    primary = Evaluator.objects.get(stream=scaled, role="primary")
    secondary = Evaluator.objects.get(stream=scaled, role="secondary")
    everything_on_primary = Placement({q: primary.pk for q in current.assignment})
    publish_plan(scaled.pk, everything_on_primary)
    scaled.refresh_from_db()
    # the measured work says the primary carries everything: the rule starts one move
    report = {"type": "sharing.report", "stream": scaled.pk, "evaluator": primary.pk, "sharing": "widen", "ts": 1.0,
              "totals": {"ops": 100}, "classes": [{"members": [q], "busy_seconds": 0.01} for q in current.assignment]}
    redis_client.hset(bus.Keys.sharing_report(scaled.pk), str(primary.pk), orjson.dumps(report))
    assert advance_placement(scaled.pk).startswith("moving queries")
    scaled.refresh_from_db()
    move = Placement.from_json(scaled.placement).move
    assert move is not None and move.source == primary.pk and move.target == secondary.pk and not move.done
    target_plan = bus.read_plan(redis_client, secondary.pk)
    assert target_plan is not None and target_plan.handoff.joining == sorted(move.queries)
    assert target_plan.handoff.source == primary.pk
    assert set(move.queries) <= {q.id for q in bus.read_plan(redis_client, primary.pk).queries}
    assert advance_placement(scaled.pk) == ""  # the target has not joined yet
    redis_client.hset(bus.Keys.evaluator_state(secondary.pk), "joined",
                      orjson.dumps({str(q): 120 for q in move.queries}))
    redis_client.hset(bus.Keys.evaluator_state(primary.pk), mapping={"seq": 120, "published": 119})
    assert advance_placement(scaled.pk) == ""  # the source saved the join seq's op but has not published it yet
    redis_client.hset(bus.Keys.evaluator_state(primary.pk), "published", 120)
    assert advance_placement(scaled.pk).startswith("moved queries")
    source_plan = bus.read_plan(redis_client, primary.pk)
    assert source_plan is not None and source_plan.handoff.leaving == sorted(move.queries)
    assert not set(move.queries) & {q.id for q in source_plan.queries}


def test_secondary_evaluators_and_the_pre_processor_follow_the_primary(scaled, redis_client, tmp_path, user, client):
    supervisor = Supervisor(SupervisorSettings(
        command=tuple(HEARTBEAT_COMMAND), preprocessor_command=tuple(HEARTBEAT_COMMAND), heartbeat_timeout=5.0,
        start_grace=10.0, stable_after=60.0, backoff=0.5, backoff_max=4.0, stop_timeout=5.0, log_dir=tmp_path / "log"))
    primary = Evaluator.objects.get(stream=scaled, role="primary")
    redis_client.hset(bus.Keys.evaluator_state(primary.pk), mapping={"seq": 41, "clock": "99.5"})
    redis_client.hset(bus.Keys.evaluator_tuples(primary.pk), "k", "line")
    supervisor.start(primary.pk)
    try:
        supervisor.supervise()
        others = Evaluator.objects.filter(stream=scaled).exclude(pk=primary.pk)
        assert all(e.desired == "running" and e.pid for e in others)
        secondary = others.get(role="secondary")
        # its first start holds the primary's store and reads on from its seq
        assert redis_client.hgetall(bus.Keys.evaluator_state(secondary.pk)) == {"seq": "41", "clock": "99.5"}
        assert redis_client.hgetall(bus.Keys.evaluator_tuples(secondary.pk)) == {"k": "line"}
        pre = others.get(role="preprocessor")
        command = Supervisor().command_for(pre)  # the settings' PREPROCESSOR_COMMAND
        assert command[command.index("--plan-evaluator") + 1] == str(primary.pk)
        assert command[command.index("--out") + 1] == str(scaled.derived_path().resolve())
        every = lambda: list(Evaluator.objects.filter(stream=scaled))  # noqa: E731
        wait_for(lambda: (supervisor.supervise(), all(
            live.status == "running" for live in read_liveness(redis_client, every())))[1])
        # the pre-processor publishes no batch metrics event: its last batch is in its state hash
        redis_client.hset(bus.Keys.evaluator_state(pre.pk), mapping={"seq": 40, "batch_ms": 87.2,
                                                                     "rows_per_second": 12345.6})
        client.force_login(user)
        page = client.get(reverse("dashboard:stream", args=[scaled.pk])).content.decode()
        assert 'id="panel-processes"' in page and "pre-processor of shop" in page and "evaluator 2 of shop" in page
        row = page[page.index(f'data-process="{pre.pk}"'):]
        row = row[:row.index("</tr>")]
        assert "12346" in row and "87 ms" in row
        assert "dress texas" in page
        supervisor.stop(primary.pk)
        supervisor.supervise()
        assert all(e.lifecycle == "stopped" for e in Evaluator.objects.filter(stream=scaled))
    finally:
        Supervisor(supervisor.config).halt_local()
