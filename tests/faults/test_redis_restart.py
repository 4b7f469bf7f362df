"""Redis killed mid-stream, three times: the evaluator, the feed and the history go on or rebuild, nothing lost or
duplicated.

Real parts: a redis-server of the test's own, daphne serving ingest and the
feeds on it, the Spark evaluator launched by the supervisor, supervision and
history rounds as beat runs them, and the example feed client (``python -m
kwmonitor.feed_client``) following the query's feed as a program would. A
feeder posts ops over HTTP, sending a body again when the answer is 503 (Redis
away). Redis starts with the persistence of ``docker/compose.yaml``
(``appendfsync always``); a quarter of the way in it is SIGKILLed and started
again (it comes back as it was); halfway an empty instance with the
persistence of ``make run`` (none: ``scripts/ensure_redis.sh``) takes its
place after a SIGKILL (every live set, change stream, plan, cursor and seq
counter gone); three quarters in that one is SIGKILLed and started again
(empty again). The reference is the query's changes over the lines the feeder
sent, in the order sent; the landing files must hold those lines once each,
the history must hold the reference's changes exactly (seq by seq, type and
result), and each stretch of the feed client's output (a snapshot, then
changes) must be the reference's live set at the snapshot's seq followed by
the reference's changes after it.
"""

from __future__ import annotations

import json
import os
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
from streaming.sources import read_landing, split_seq
from streaming.workloads import ecommerce
from tests.browser.server import ROOT, asgi_server
from tests.faults.pipeline import BODY, beat, check_feed, feed, history_of
from tests.faults.reference import by_seq, reference_changes
from tests.faults.services import COMPOSE_PERSISTENCE, MAKE_RUN_PERSISTENCE, OwnRedis

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEYWORDS, TMAX = "gift texas", 4
OPS = 2400
DOWN_FOR = 0.5


def test_redis_killed_mid_stream_loses_and_duplicates_nothing(user, ecommerce_schema, settings, tmp_path):
    assert " ".join(f'"{o}"' if not o else o for o in MAKE_RUN_PERSISTENCE) in (ROOT / "scripts/ensure_redis.sh").read_text()
    assert " ".join(f'"{o}"' if not o else o for o in COMPOSE_PERSISTENCE) in (ROOT / "docker/compose.yaml").read_text()
    own = OwnRedis(tmp_path / "redis", COMPOSE_PERSISTENCE)
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
    reference = reference_changes(Schema.from_dict(ecommerce.SCHEMA_DOC), KEYWORDS, TMAX, lines)
    supervisor = Supervisor()
    tally: Counter = Counter()
    beat_errors: Counter = Counter()
    env = {"LANDING_DIR": str(settings.LANDING_DIR), "CHECKPOINT_DIR": str(settings.CHECKPOINT_DIR)}
    feed_out = tmp_path / "feed.ndjson"
    outages, rebuilt = [], []
    stop_beat = threading.Event()
    with asgi_server(own.url, extra_env=env) as base:
        evaluator = supervisor.start(stream.evaluator.pk)
        follower = None
        beating = threading.Thread(target=beat, args=(client, stop_beat, beat_errors), daemon=True)
        try:
            began = time.monotonic()
            deadline = began + 300
            while getattr(bus.read_heartbeat(client, evaluator.pk), "status", None) != "running":
                assert time.monotonic() < deadline, "the evaluator did not start"
                time.sleep(0.5)
            beating.start()
            fed_at = time.monotonic()
            up_after = fed_at - began
            follower = subprocess.Popen(
                [sys.executable, "-m", "kwmonitor.feed_client", "--url", f"{base.replace('http', 'ws')}/ws/queries/{query.pk}/"],
                cwd=ROOT, env=dict(os.environ, KWMONITOR_TOKEN=token), stdout=feed_out.open("w"),
                stderr=(tmp_path / "feed.err").open("w"))
            crashes = [(n * OPS // 4 // BODY * BODY, threading.Event()) for n in (1, 2, 3)]
            feeder = threading.Thread(target=feed, args=(base, stream, lines, tally, crashes), daemon=True)
            feeder.start()
            # as it was (compose's persistence), an empty instance with make run's in its place, empty again
            for (_, reached), directory in zip(crashes, (None, tmp_path / "redis-empty", None)):
                assert reached.wait(120)
                outages.append(own.crash(DOWN_FOR, directory, MAKE_RUN_PERSISTENCE if directory else None))
                restarted = time.monotonic()
                while client.hget(bus.Keys.evaluator_state(evaluator.pk), "seq") is None:
                    assert time.monotonic() < restarted + 120, "the evaluator did not rebuild its state"
                    time.sleep(0.1)
                rebuilt.append(time.monotonic() - restarted)
            feeder.join(timeout=300)
            assert not feeder.is_alive()
            fed_for = time.monotonic() - fed_at
            deadline = time.monotonic() + 300
            while int(client.hget(bus.Keys.evaluator_state(evaluator.pk), "seq") or -1) < OPS - 1 \
                    or int(client.get(bus.Keys.published_seq(query.pk)) or -1) < reference[-1][0]:
                assert time.monotonic() < deadline, "the evaluator did not apply every op and publish its changes"
                time.sleep(0.5)
            last_id = client.xrevrange(bus.Keys.changes(query.pk), count=1)[0][0]
            deadline = time.monotonic() + 60
            while last_id not in feed_out.read_text():
                assert time.monotonic() < deadline, "the feed client did not get the last change"
                time.sleep(0.3)
            caught_up_after = time.monotonic() - fed_at - fed_for
        finally:
            stop_beat.set()
            if beating.is_alive():
                beating.join(timeout=30)
            if follower is not None:
                follower.terminate()
                follower.wait(timeout=10)
            supervisor.stop(stream.evaluator.pk)
    HistoryPersister(client).run()
    own.stop()

    stored = [split_seq(line) for line in read_landing(settings.LANDING_DIR / str(stream.pk))]
    assert tally["accepted"] == OPS and stored == [(i, json.loads(line)) for i, line in enumerate(lines)]

    assert by_seq(history_of(query)) == by_seq(reference)  # every change once, in its op, in seq order

    snapshots = check_feed(reference, [json.loads(line) for line in feed_out.read_text().splitlines()])
    reconnects = (tmp_path / "feed.err").read_text().count("reconnecting")
    print(f"Redis SIGKILLed three times mid-stream, down {', '.join(f'{o:.1f}' for o in outages)} s, back as it was, "
          f"then empty twice; the evaluator held its state again {', '.join(f'{r:.1f}' for r in rebuilt)} s after "
          f"each restart; "
          f"evaluator up in {up_after:.1f} s, fed in {fed_for:.1f} s, evaluator and feed client done "
          f"{caught_up_after:.1f} s later; "
          f"{tally['503']} bodies answered 503 and {tally['unanswered']} unanswered, all sent again; "
          f"{len(reference)} reference changes, all in history once; the feed client reconnected {reconnects} times "
          f"and resynchronised from {snapshots - 1} new snapshots, each stretch equal to the reference; "
          f"beat rounds Redis failed: {dict(beat_errors)}")
    # the feed dropped with each crash and resumed: from its last id, a snapshot, or the start of the stream
    # published again when it held nothing yet
    assert reconnects >= 3 and snapshots >= 2
