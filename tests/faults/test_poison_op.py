"""A poison op in a real evaluator: it stalls the apply loop, the pages say "stalled", the supervisor restarts
the evaluator, and after the second stall at the same op sets the op aside as a dead letter; the stream goes on.

The op is no mock: an insert of a customer whose 400 orders (200 with "dress", 200 with "gift") were
stored before it, under the query "dress gift" (Tmax 3). Applied, it makes 40,000 results
(Order-Customer-Order pairs), about 14 s of the evaluator's apply loop on the 2-core test machine, so with
``EVALUATOR_STALL_SECONDS`` set to 5 s it holds the loop past the limit every time (in the Spark batch, and
in the restart that applies what Spark had committed before the kill). Everything runs for real: the
ingest view, the landing directory, the Spark evaluator process (``python -m streaming.spark``) launched
and killed by the supervisor, Redis. A spark test: three cold evaluator starts are most of its time
(211 s measured with the 2-core machine at a load of 7 to 10; each start is 7 to 9 s of it when idle).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time

import pytest
from django.urls import reverse

from streaming import bus
from streaming.events import DeadLetter, EvaluatorStatus

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCHEMA = {"name": "star", "relations": [
    {"name": "Customer", "key": "cid", "attributes": {"cid": "int", "name": "text"}},
    {"name": "Order", "key": "oid", "attributes": {"oid": "int", "cid": "int", "note": "text"},
     "foreign_keys": [{"name": "cid", "column": "cid", "references": "Customer"}]},
]}
ORDERS = 400
STALL_SECONDS = 5.0


def ops() -> list[dict]:
    """The orders of customer 1, one order of each keyword for customer 2, then customer 1 (the poison op)
    and customer 2 (one result)."""
    orders = [{"op": "insert", "relation": "Order", "ts": 1.0,
               "tuple": {"oid": i, "cid": 1, "note": "dress" if i % 2 else "gift"}} for i in range(ORDERS)]
    orders += [{"op": "insert", "relation": "Order", "ts": 1.0, "tuple": {"oid": ORDERS + i, "cid": 2, "note": note}}
               for i, note in enumerate(("dress", "gift"))]
    customers = [{"op": "insert", "relation": "Customer", "ts": 2.0, "tuple": {"cid": cid, "name": f"c{cid}"}}
                 for cid in (1, 2)]
    return orders + customers


def test_a_poison_op_is_set_aside_after_it_stalled_the_evaluator_twice(client, user, redis_client, settings,
                                                                        tmp_path):
    from kwmonitor.catalog.models import Schema
    from kwmonitor.dashboard.health import stream_health
    from kwmonitor.queries.models import KeywordQuery
    from kwmonitor.streams.models import Evaluator, Stream
    from kwmonitor.streams.supervisor import Supervisor, SupervisorSettings

    settings.LANDING_DIR = tmp_path / "landing"
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    settings.EVALUATOR_LOG_DIR = tmp_path / "log"
    settings.SPARK_MASTER = "local[2]"
    settings.EVALUATOR_STALL_SECONDS = STALL_SECONDS
    schema = Schema.import_document(SCHEMA)
    stream = Stream.objects.create(name="star", schema=schema)
    query = KeywordQuery.objects.create(owner=user, name="dress gift", schema=schema, stream=stream,
                                        keywords="dress gift", tmax=3)
    body = "".join(json.dumps(op) + "\n" for op in ops())
    answer = client.post(reverse("ingest:ingest", args=[stream.pk]), data=body, content_type="application/x-ndjson",
                         HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}")
    assert answer.status_code == 200 and answer.json()["errors"] == []
    poison, last = ORDERS + 2, ORDERS + 3
    supervisor = Supervisor(dataclasses.replace(SupervisorSettings.from_django(), stall_seconds=STALL_SECONDS,
                                                poison_failures=2, backoff=0.5, start_grace=90.0))
    evaluator_id = stream.evaluator.pk
    seen: list[str] = []
    started = time.monotonic()
    try:
        supervisor.start(evaluator_id)
        while int(redis_client.hget(bus.Keys.evaluator_state(evaluator_id), "seq") or -1) < last:
            assert time.monotonic() - started < 400, f"not done: {seen}"
            supervisor.supervise()
            row = Evaluator.objects.select_related("stream").get(pk=evaluator_id)
            health = stream_health(redis_client, row.stream, row, bus.read_heartbeat(redis_client, evaluator_id),
                                   time.time())
            if not seen or seen[-1] != health.evaluator:
                seen.append(health.evaluator)
            time.sleep(0.2)
        elapsed = time.monotonic() - started
    finally:
        supervisor.stop(evaluator_id)
    row = Evaluator.objects.get(pk=evaluator_id)
    log = next((tmp_path / "log").glob("evaluator-*.log")).read_text()
    assert row.restarts == 2, (row.last_error, log[-3000:])
    assert seen.count("stalled") == 2, seen  # what /status/ and the pages said, each time, before the restart
    reason = redis_client.hget(bus.Keys.stream_poison(stream.pk), str(poison))
    assert reason.startswith("poison op, set aside: it stalled the evaluator 2 times in a row (the last time: no batch "
                             "applied for ")
    assert f"applying seq {poison})" in reason
    events = [e for _, e in bus.read_stream_events(redis_client, stream.pk, count=10_000)]
    failures = [e.detail for e in events if isinstance(e, EvaluatorStatus) and e.status == "failed"]
    assert len(failures) == 2 and all(f.startswith("stalled: no batch applied for ") for f in failures)
    assert re.search(f"; op seq {poison} set aside as a dead letter; restart in [0-9]+ s$", failures[1])
    [dead] = [e for e in events if isinstance(e, DeadLetter)]
    assert (dead.seq, dead.reason, json.loads(dead.line)["tuple"]) == (poison, reason, {"cid": 1, "name": "c1"})
    # the stream went on past it: customer 2 made its one result, customer 1 none
    _, live = bus.read_snapshot(redis_client, query.pk)
    assert [sorted((t.relation, t.key) for t in r.tuples) for r in live] == [
        [("Customer", 2), ("Order", ORDERS), ("Order", ORDERS + 1)]]
    print(f"poison op set aside after two stalls and the stream caught up in {elapsed:.1f} s")
