"""Redis restarted mid-stream: the evaluator and the web tier reconnect, no change is lost or duplicated.

Real parts: a redis-server of the test's own (append-only, fsync always),
daphne serving ingest and the feeds on it, the Spark evaluator launched by
the supervisor, and the example feed client (``python -m kwmonitor.feed_client``)
following the query's feed as a program would. A feeder posts ops over HTTP,
sending a body again when the answer is 503 (Redis away). Midway Redis is
stopped and started again. Afterwards the published change stream must equal
the reference engine's events over the accepted ops (``python -m streaming
compare`` semantics), and the feed client must have received every change
after its snapshot exactly once, ending on the reference's live set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kwmonitor.accounts.models import ApiToken
from kwmonitor.dashboard.feeds import entry_id_order
from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.models import Stream
from kwmonitor.streams.supervisor import Supervisor
from streaming import bus
from streaming.cli.compare import event_key, first_difference
from streaming.engine import KeywordEngine
from streaming.ops import OpRejected, op_to_dict, parse_op
from streaming.schema import Schema
from streaming.sources import read_landing, split_seq
from streaming.workloads import ecommerce
from tests.browser.server import ROOT, asgi_server
from tests.faults.services import OwnRedis

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEYWORDS, TMAX = "gift texas", 4
OPS, BODY, PAUSE = 2400, 40, 0.1  # ~400 ops/s in bodies of 40
DOWN_FOR = 3.0


def feed(base: str, stream: Stream, lines: list[str], tally: dict[str, int], restart_after: int,
         restart: threading.Event) -> None:
    """POST the lines in bodies, in order; a body answered 503 (or not answered) is sent again."""
    for start in range(0, len(lines), BODY):
        if start == restart_after:
            restart.set()
        body = "".join(line + "\n" for line in lines[start:start + BODY]).encode()
        while True:
            request = urllib.request.Request(f"{base}/ingest/{stream.pk}/", data=body, method="POST", headers={
                "Authorization": f"Bearer {stream.ingest_token}", "Content-Type": "application/x-ndjson"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    tally["accepted"] += json.loads(response.read())["accepted"]
                    break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503, exc.read()
                tally["503"] += 1
            except OSError:
                tally["unanswered"] += 1
            time.sleep(0.3)
        time.sleep(PAUSE)


def reference_events(schema: Schema, landing: Path) -> list[dict]:
    """The events of the query over the stored ops, in seq order (what `python -m streaming run` writes)."""
    engine = KeywordEngine(schema, KEYWORDS, TMAX)
    events = []
    for seq, obj in sorted(split_seq(line) for line in read_landing(landing)):
        try:
            changes = engine.apply(parse_op(obj, schema))
        except OpRejected as exc:
            changes = exc.changes
        events += [{"seq": seq, "type": c.type, **c.result.to_json()} for c in changes]
    return events


def as_event(change: dict) -> dict:
    """A published change in the event format of `run`."""
    result = change["result"]
    return {"seq": change["seq"], "type": change["type"].removeprefix("result."),
            "tuples": [[t["relation"], t["key"]] for t in result["tuples"]], "edges": result["edges"]}


def write(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_a_redis_restart_mid_stream_loses_and_duplicates_nothing(user, ecommerce_schema, settings, tmp_path):
    own = OwnRedis(tmp_path / "redis")
    own.start()
    settings.REDIS_URL = own.url
    settings.LANDING_DIR = tmp_path / "landing"
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    settings.EVALUATOR_LOG_DIR = tmp_path / "log"
    client = bus.connect(own.url, retry_seconds=60)
    stream = Stream.objects.create(name="shop", schema=ecommerce_schema)
    query = KeywordQuery.objects.create(owner=user, name="q", schema=ecommerce_schema, stream=stream,
                                        keywords=KEYWORDS, tmax=TMAX)
    _, token = ApiToken.issue(user, "faults")
    lines = [json.dumps(op_to_dict(op)) for op in ecommerce.build(OPS, seed=11).ops()]
    supervisor = Supervisor()
    tally = {"accepted": 0, "503": 0, "unanswered": 0}
    env = {"LANDING_DIR": str(settings.LANDING_DIR), "CHECKPOINT_DIR": str(settings.CHECKPOINT_DIR)}
    feed_out = tmp_path / "feed.ndjson"
    with asgi_server(own.url, extra_env=env) as base:
        evaluator = supervisor.start(stream.evaluator.pk)
        follower = None
        try:
            deadline = time.monotonic() + 300
            while getattr(bus.read_heartbeat(client, evaluator.pk), "status", None) != "running":
                assert time.monotonic() < deadline, "the evaluator did not start"
                time.sleep(0.5)
            follower = subprocess.Popen(
                [sys.executable, "-m", "kwmonitor.feed_client", "--url", f"{base.replace('http', 'ws')}/ws/queries/{query.pk}/"],
                cwd=ROOT, env=dict(os.environ, KWMONITOR_TOKEN=token), stdout=feed_out.open("w"),
                stderr=(tmp_path / "feed.err").open("w"))
            restart = threading.Event()
            feeder = threading.Thread(target=feed, args=(base, stream, lines, tally, OPS // 3, restart), daemon=True)
            feeder.start()
            assert restart.wait(120)
            outage = own.restart(DOWN_FOR)
            feeder.join(timeout=300)
            assert not feeder.is_alive()
            stored = list(read_landing(settings.LANDING_DIR / str(stream.pk)))
            last_seq = max(split_seq(line)[0] for line in stored)
            deadline = time.monotonic() + 300
            while int(client.hget(bus.Keys.evaluator_state(evaluator.pk), "seq") or -1) < last_seq:
                assert time.monotonic() < deadline, "the evaluator did not apply every op"
                time.sleep(0.5)
            last_id = client.xrevrange(bus.Keys.changes(query.pk), count=1)[0][0]
            deadline = time.monotonic() + 60
            while last_id not in feed_out.read_text():
                assert time.monotonic() < deadline, "the feed client did not get the last change"
                time.sleep(0.3)
        finally:
            if follower is not None:
                follower.terminate()
                follower.wait(timeout=10)
            supervisor.stop(stream.evaluator.pk)
    published = [(entry_id, json.loads(fields["data"])) for entry_id, fields in client.xrange(bus.Keys.changes(query.pk))]
    own.stop()

    assert tally["accepted"] == OPS == len(stored)  # every op stored once, retried bodies included
    reference = reference_events(Schema.from_dict(ecommerce.SCHEMA_DOC), settings.LANDING_DIR / str(stream.pk))
    expected = write(tmp_path / "expected.ndjson", reference)
    actual = write(tmp_path / "published.ndjson", [as_event(change) for _, change in published])
    assert first_difference(expected, actual) is None  # no change lost, none duplicated, in the right op

    messages = [json.loads(line) for line in feed_out.read_text().splitlines()]
    snapshot = messages[0]
    assert snapshot["type"] == "snapshot" and all(m["type"] != "snapshot" for m in messages[1:])
    received = [m["id"] for m in messages[1:]]
    after_snapshot = [entry_id for entry_id, _ in published
                      if entry_id_order(entry_id) > entry_id_order(snapshot["last_id"])]
    live = {event_key(as_event({"seq": 0, "type": "result.add", "result": r})) for r in snapshot["results"]}
    for message in messages[1:]:
        key = event_key(as_event(message))
        assert (key not in live) if message["type"] == "result.add" else (key in live)
        live.symmetric_difference_update({key})
    reference_live: set = set()
    for event in reference:
        reference_live.symmetric_difference_update({event_key(event)})
    lost = len(set(after_snapshot) - set(received))
    duplicates = len(received) - len(set(received))
    reconnects = (tmp_path / "feed.err").read_text().count("reconnecting")
    print(f"Redis down {outage:.1f} s mid-stream; {tally['503']} bodies answered 503 and {tally['unanswered']} unanswered, "
          f"all sent again; {len(published)} changes published, feed client reconnected {reconnects} times and got "
          f"{len(received)} changes: lost {lost}, duplicated {duplicates}")
    assert received == after_snapshot and lost == 0 and duplicates == 0
    assert live == reference_live  # the client ends on the reference's live set
    assert reconnects >= 1  # the web tier dropped the feed with Redis, and the client resumed
