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
counter gone); three quarters in, once the evaluator has read a history
mark (``streaming.unpersisted``), that one is SIGKILLed and started again
(empty again): the evaluator gives its state back from its session, no op
applied again (the second loss is given back or rebuilt from the landing
files, as the marks it read allow). The reference is the query's changes over the lines the feeder
sent, in the order sent; the landing files must hold those lines once each,
the history must hold the reference's changes exactly (seq by seq, type and
result), and each stretch of the feed client's output (a snapshot, then
changes) must be the reference's live set at the snapshot's seq followed by
the reference's changes after it.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from kwmonitor.streams.history import HistoryPersister
from streaming import bus
from tests.browser.server import ROOT, asgi_server
from tests.faults.pipeline import (BODY, check_feed, check_landing, evaluated, fault_stream, feed, followed,
                                   history_of, wait_followed, wait_published, wait_until)
from tests.faults.reference import by_seq
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
    client = bus.connect(own.url, retry_seconds=60)
    faulty = fault_stream(settings, tmp_path, user, ecommerce_schema, [KEYWORDS], TMAX, OPS)
    query, reference = faulty.queries[0], faulty.references[faulty.queries[0].pk]
    tally: Counter = Counter()
    outages, rebuilt = [], []
    with asgi_server(own.url, extra_env=faulty.env) as base, evaluated(client, faulty.stream) as run, \
            followed(base, query, faulty.token, tmp_path) as feed_out:
        fed_at = time.monotonic()
        crashes = [(n * OPS // 4 // BODY * BODY, threading.Event()) for n in (1, 2, 3)]
        feeder = threading.Thread(target=feed, args=(base, faulty.stream, faulty.lines, tally, crashes), daemon=True)
        feeder.start()
        # as it was (compose's persistence), an empty instance with make run's in its place, empty again
        for n, ((_, reached), directory) in enumerate(zip(crashes, (None, tmp_path / "redis-empty", None))):
            assert reached.wait(120)
            if n == 2:  # the evaluator holds what the history may lack since a mark it read: it gives it back
                wait_mark_read(client, run.evaluator_id)
            outages.append(own.crash(DOWN_FOR, directory, MAKE_RUN_PERSISTENCE if directory else None))
            rebuilt.append(wait_until(lambda: client.hget(bus.Keys.evaluator_state(run.evaluator_id), "seq") is not None,
                                      120, "the evaluator to rebuild its state", every=0.1))
        feeder.join(timeout=300)
        assert not feeder.is_alive()
        fed_for = time.monotonic() - fed_at
        wait_published(client, run.evaluator_id, faulty)
        wait_followed(client, query, feed_out)
        caught_up_after = time.monotonic() - fed_at - fed_for
    HistoryPersister(client).run()
    own.stop()

    check_landing(settings.LANDING_DIR, faulty, tally)
    assert by_seq(history_of(query)) == by_seq(reference)  # every change once, in its op, in seq order

    snapshots = check_feed(reference, [json.loads(line) for line in feed_out.read_text().splitlines()])
    reconnects = (tmp_path / "feed.err").read_text().count("reconnecting")
    print(f"Redis SIGKILLed three times mid-stream, down {', '.join(f'{o:.1f}' for o in outages)} s, back as it was, "
          f"then empty twice; the evaluator held its state again {', '.join(f'{r:.1f}' for r in rebuilt)} s after "
          f"each restart; "
          f"evaluator up in {run.up_after:.1f} s, fed in {fed_for:.1f} s, evaluator and feed client done "
          f"{caught_up_after:.1f} s later; "
          f"{tally['503']} bodies answered 503 and {tally['unanswered']} unanswered, all sent again; "
          f"{len(reference)} reference changes, all in history once; the feed client reconnected {reconnects} times "
          f"and resynchronised from {snapshots - 1} new snapshots, each stretch equal to the reference; "
          f"beat rounds Redis failed: {dict(run.beat_errors)}; the evaluator's recoveries: {recoveries(tmp_path)}")
    # the feed dropped with each crash and resumed: from its last id, a snapshot, or the start of the stream
    # published again when it held nothing yet
    assert reconnects >= 3 and snapshots >= 2
    assert recoveries(tmp_path)[-1] == "given"  # the last loss cost no replay


def recoveries(tmp_path) -> list[str]:
    """How the evaluator came back from each loss, as its log says ("given back" from its session, or
    "rebuilt" from the landing files)."""
    logs = "".join(path.read_text(errors="replace") for path in (tmp_path / "log").glob("*.log"))
    return [line.split("Redis lost its state; ")[1].split(" ")[0] for line in logs.splitlines()
            if "Redis lost its state; " in line]


def wait_mark_read(client, evaluator_id: int) -> None:
    """Until the history persister has marked the evaluator on this Redis and the evaluator has finished a
    batch since (each batch reads the mark first)."""
    state = bus.Keys.evaluator_state(evaluator_id)
    wait_until(lambda: client.get(bus.Keys.persisted_seq(evaluator_id)) is not None, 60, "a history mark", every=0.1)
    published = int(client.hget(state, "published") or -1)
    wait_until(lambda: int(client.hget(state, "published") or -1) > published, 60, "a batch after the mark",
               every=0.1)
