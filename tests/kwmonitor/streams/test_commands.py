import datetime as dt
import re
import socket
import time

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from kwmonitor.ingest.service import Ingestor
from kwmonitor.queries.models import AggregateSubscription, KeywordQuery
from kwmonitor.streams.demo import DEMO_QUERIES, load_demo
from kwmonitor.streams.history import HistoryPersister
from kwmonitor.streams.models import (AggregateValueRecord, DeadLetterRecord, Evaluator, HistoryCursor, ResultEvent,
                                       Stream)
from kwmonitor.streams.supervisor import process_alive
from streaming import bus
from streaming.events import (AggregateValue, DeadLetter, EvaluatorStatus, ResultAdded, ResultView, TupleView,
                              result_key)
from streaming.sources import landing_archive

from .conftest import HEARTBEAT_COMMAND


@pytest.mark.django_db
def test_load_demo_is_idempotent_and_keeps_an_existing_password(django_user_model, capsys):
    call_command("load_demo", "--password", "first-pass-1")
    assert "user 'demo' password first-pass-1" in capsys.readouterr().out
    call_command("load_demo")
    assert "password (unchanged)" in capsys.readouterr().out
    user = django_user_model.objects.get(username="demo")
    assert user.is_staff and user.check_password("first-pass-1")
    stream = Stream.objects.get(name="shop")
    queries = KeywordQuery.objects.filter(stream=stream).order_by("pk")
    assert [(q.name, q.keywords, q.tmax) for q in queries] == [(n, k, t) for n, k, t, _, _ in DEMO_QUERIES]
    for query in queries:
        query.full_clean()
    assert [[p.plan_entry() for p in q.predicates.all()] for q in queries] == [
        [{"relation": r, "attribute": a, "op": o, "value": v} for r, a, o, v in predicates]
        for _, _, _, _, predicates in DEMO_QUERIES]
    every = {p["relation"] for q in queries for p in [x.plan_entry() for x in q.predicates.all()]}
    assert every == {"Product", "Customer"} and all(q.predicates.filter(relation="Product").exists() for q in queries)
    assert Evaluator.objects.get(stream=stream).desired == "stopped"


@pytest.mark.django_db
def test_a_new_demo_user_gets_a_generated_password():
    demo = load_demo(username="visitor")
    assert demo.password and len(demo.password) >= 10


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_start_and_stop_evaluator_commands(shop, settings, tmp_path, reap_evaluators, capsys):
    settings.EVALUATOR_COMMAND = HEARTBEAT_COMMAND
    settings.CHECKPOINT_DIR = tmp_path
    settings.EVALUATOR_LOG_DIR = tmp_path / "log"
    call_command("start_evaluator", "shop")
    evaluator = Evaluator.objects.get(stream=shop)
    reap_evaluators.append(evaluator.pid)
    assert process_alive(evaluator.pid, evaluator.process_start) and evaluator.desired == "running"
    # what it does now (as the pages say) and the process launched
    assert re.fullmatch(rf"evaluator {evaluator.pk} of stream 'shop': (starting, pid {evaluator.pid} \(waiting for its "
                        rf"first heartbeat\)|running, pid {evaluator.pid})\n", capsys.readouterr().out)
    call_command("stop_evaluator", str(shop.pk))
    assert capsys.readouterr().out == f"evaluator {evaluator.pk} of stream 'shop': stopped\n"
    assert not process_alive(evaluator.pid)
    evaluator.refresh_from_db()
    assert (evaluator.desired, evaluator.lifecycle, evaluator.pid) == ("stopped", "stopped", None)
    with pytest.raises(CommandError, match="no stream 'nope'"):
        call_command("start_evaluator", "nope")


@pytest.mark.redis
@pytest.mark.django_db
def test_stopping_a_dead_process_says_stopped_though_its_last_heartbeat_said_running(shop, redis_client, capsys):
    evaluator = Evaluator.objects.get(stream=shop)
    launched = timezone.now() - dt.timedelta(seconds=30)
    dead = 2**22 + 1  # no such process: it died, and no supervision round has looked since
    Evaluator.objects.filter(pk=evaluator.pk).update(desired="running", lifecycle="launched", lifecycle_at=launched,
                                                     started_at=launched, pid=dead, host=socket.gethostname())
    bus.write_heartbeat(redis_client, EvaluatorStatus(evaluator=evaluator.pk, stream=shop.pk, status="running", pid=dead,
                                                      ts=time.time() - 1.0))
    call_command("stop_evaluator", "shop")
    # the supervisor saw it gone after its last heartbeat: that heartbeat no longer says what happens
    assert capsys.readouterr().out == f"evaluator {evaluator.pk} of stream 'shop': stopped\n"


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_reset_stream_erases_the_data_and_keeps_the_configuration(shop, settings, tmp_path, redis_client, monkeypatch):
    settings.LANDING_DIR = tmp_path / "landing"
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    query = KeywordQuery.objects.get(stream=shop, enabled=True)
    evaluator = Evaluator.objects.get(stream=shop)
    op = '{"op": "insert", "relation": "Customer", "tuple": {"cid": 1, "name": "Ann", "state": "Texas"}, "ts": 0}'
    assert Ingestor(shop).ingest([op, op.replace('"cid": 1', '"cid": 2')]).seqs == [0, 1]
    result = ResultView(key=result_key([["Customer", 1]], []), tuples=[TupleView(relation="Customer", key=1)], edges=[])
    bus.publish_changes(redis_client, query.pk, [ResultAdded(query=query.pk, seq=0, result=result)])
    bus.publish_stream_event(redis_client, shop.pk, DeadLetter(stream=shop.pk, seq=1, line=op, reason="late", ts=1.0))
    aggregate = AggregateSubscription.objects.create(owner=query.owner, name="customers", stream=shop,
                                                     source_relation="Customer", window=60, step=60)
    value = AggregateValue(stream=shop.pk, aggregate=aggregate.pk, seq=1, window_end=60.0, value=2, ts=1.0)
    assert bus.publish_aggregate_values(redis_client, shop.pk, [value]) == 1
    HistoryPersister(redis_client).run()
    assert AggregateValueRecord.objects.count() == 1
    evaluator.checkpoint_dir().mkdir(parents=True)
    archive = landing_archive(shop.landing_path())
    archive.mkdir(parents=True)
    (archive / "00000000000000000000.ndjson").write_text(op + "\n")
    assert ResultEvent.objects.count() == DeadLetterRecord.objects.count() == 1
    # what an earlier run left: restarts, an error, a poison op, the evaluator's last heartbeat, the history's
    # mark (the replayed stream's history starts again from nothing)
    Evaluator.objects.filter(pk=evaluator.pk).update(restarts=3, failures=1, last_error="process 4 exited")
    redis_client.hset(bus.Keys.stream_poison(shop.pk), "1", "poison op, set aside: ...")
    redis_client.set(bus.Keys.last_heartbeat(evaluator.pk), "1.0")
    redis_client.set(bus.Keys.persisted_seq(evaluator.pk), "0")

    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    with pytest.raises(CommandError, match="cancelled"):
        call_command("reset_stream", "shop")
    assert bus.read_snapshot(redis_client, query.pk)[1] == [result]

    call_command("reset_stream", "shop", "--no-input")
    assert bus.read_snapshot(redis_client, query.pk) == ("0-0", [])
    assert bus.read_stream_events(redis_client, shop.pk) == []
    assert not shop.landing_path().exists() and not evaluator.checkpoint_dir().exists() and not archive.exists()
    assert ResultEvent.objects.count() == DeadLetterRecord.objects.count() == HistoryCursor.objects.count() == 0
    assert AggregateValueRecord.objects.count() == 0
    evaluator.refresh_from_db()
    assert (evaluator.restarts, evaluator.failures, evaluator.last_error) == (0, 0, "")  # a new run
    assert not redis_client.exists(bus.Keys.stream_poison(shop.pk), bus.Keys.last_heartbeat(evaluator.pk),
                                   bus.Keys.persisted_seq(evaluator.pk))
    assert bus.read_plan(redis_client, evaluator.pk).queries  # configuration kept
    assert Ingestor(shop).ingest([op]).seqs == [0]
    assert bus.publish_aggregate_values(redis_client, shop.pk, [value]) == 1  # the replayed window is new again


@pytest.mark.django_db
def test_the_demo_feed_shifts_and_carries_bad_lines(tmp_path, capsys):
    from streaming.ops import OpRejected, parse_op
    from streaming.schema import Schema
    from streaming.workloads.ecommerce import SCHEMA_DOC

    path = tmp_path / "feed.ndjson"
    call_command("write_demo_feed", str(path), "--ops", "1200", "--shift-every", "400", "--bad-every", "250")
    schema = Schema.from_dict(SCHEMA_DOC)
    good, bad = [], []
    for line in path.read_text().splitlines():
        try:
            good.append(parse_op(line, schema))
        except OpRejected:
            bad.append(line)
    assert len(good) == 1200 and len(bad) == 4
    prices = [[op.values["price"] for op in good[i * 400:(i + 1) * 400] if op.relation == "Product"] for i in range(3)]
    assert max(prices[0]) <= 60 < min(prices[1]) and max(prices[2]) <= 60  # a sale, a premium season, a sale


def test_the_demo_feed_gives_the_selection_stage_work_that_shifts_with_the_season():
    """Some Products satisfy no demo query (they are dropped), and the share moves between seasons."""
    import json
    import operator

    from kwmonitor.streams.demo import demo_feed

    compare = {"<": operator.lt, ">=": operator.ge}
    product_predicates = [[(compare[o], v) for r, _, o, v in predicates if r == "Product"]
                          for _, _, _, _, predicates in DEMO_QUERIES]
    dropped_share = []
    for season in range(4):
        lines = list(demo_feed(400 * (season + 1), shift_every=400, bad_every=0))[400 * season:]
        prices = [op["tuple"]["price"] for op in map(json.loads, lines)
                  if op["op"] == "insert" and op["relation"] == "Product"]
        dropped = [p for p in prices if not any(all(c(p, v) for c, v in query) for query in product_predicates)]
        dropped_share.append(len(dropped) / len(prices))
    assert max(dropped_share) > 0.2 and max(dropped_share) - min(dropped_share) > 0.2, dropped_share
