"""The web server SIGKILLed with 50 websocket clients connected: ``make run``'s supervision starts it again, and
every client resumes where it was, with no gap and no duplicate.

Real parts: daphne run under ``scripts/keep_up.sh`` (what ``make run`` runs it
under), the Spark evaluator launched by the supervisor, beat's rounds, and 50
feed clients, 10 on each of 5 queries, each speaking the browser's protocol
(``kwmonitor.feed_client.follow``: the ``LiveFeed`` of
``static/kwmonitor/js/livefeed.js`` in Python: a snapshot, then changes; on a
drop, reconnect with backoff and ``?after=`` the last id it holds). The ops are
ingested in the test's process, so the stream goes on while the web server is
down. A third of the way in, daphne is SIGKILLed. Each client's output must be
its query's reference (the changes over the lines sent) from its snapshot to
the end, under that one snapshot (it resumed, it was not resynchronised), and
must hold changes published while the server was down and after it came back.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter

import pytest

from kwmonitor.dashboard.feeds import entry_id_order
from kwmonitor.streams.history import HistoryPersister
from streaming import bus
from tests.browser.server import ROOT, asgi_server
from tests.faults.pipeline import (FeedClients, check_feed, evaluated, fault_stream, feed_in_process, history_of,
                                   wait_published, wait_until)
from tests.faults.reference import by_seq
from tests.faults.services import answers, daphne_pid

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUERIES = ["gift texas", "dress texas", "gift", "shoes california", "gift california"]
CLIENTS_PER_QUERY, TMAX = 10, 4
OPS, PAUSE = 3000, 0.25  # ~15 s of feed
BACKOFF_MAX = 15.0  # LiveFeed's cap


def test_web_server_killed_with_50_clients_every_client_resumes(user, ecommerce_schema, redis_client, redis_url,
                                                                 settings, tmp_path):
    assert "scripts/keep_up.sh .venv/bin/daphne" in (ROOT / "scripts/run.sh").read_text()
    faulty = fault_stream(settings, tmp_path, user, ecommerce_schema, QUERIES, TMAX, OPS)
    queries, references = faulty.queries, faulty.references
    client = bus.connect(redis_url)
    tally: Counter = Counter()
    with asgi_server(redis_url, extra_env=faulty.env, under=[str(ROOT / "scripts/keep_up.sh")]) as base, \
            evaluated(client, faulty.stream) as run, \
            FeedClients(base, faulty.token, [q.pk for q in queries], CLIENTS_PER_QUERY, BACKOFF_MAX) as clients:
        port = int(base.rpartition(":")[2])
        feeder = threading.Thread(target=feed_in_process, args=(faulty.stream, faulty.lines, tally, PAUSE), daemon=True)
        wait_until(lambda: all(got for got in clients.messages.values()), 60, "every client's snapshot")
        feeder.start()
        wait_until(lambda: tally["accepted"] >= OPS // 3, 120, "a third of the stream ingested")
        killed_pid, accepted_at_kill = daphne_pid(port), tally["accepted"]
        killed_at, killed_wall = time.monotonic(), time.time()
        os.kill(killed_pid, signal.SIGKILL)
        wait_until(lambda: not answers(base), 10, "the killed server to stop answering", every=0.05)
        back_after = wait_until(lambda: answers(base), 60, "the web server to come back", every=0.1)
        back_wall = time.time()
        assert daphne_pid(port) != killed_pid
        for q in queries:  # every client must get a change published after the server came back
            wait_until(lambda: client.xrange(bus.Keys.changes(q.pk), min=f"{int(back_wall * 1000)}"), 120,
                       f"a change of {q.keywords!r} after the restart")
        newest = {q.pk: client.xrevrange(bus.Keys.changes(q.pk), count=1)[0][0] for q in queries}
        wait_until(lambda: clients.holding(newest), 120, "every client to resume")
        resumed_after = time.monotonic() - killed_at
        feeder.join(timeout=300)
        assert not feeder.is_alive()
        wait_published(client, run.evaluator_id, faulty)
        newest = {q.pk: client.xrevrange(bus.Keys.changes(q.pk), count=1)[0][0] for q in queries}
        wait_until(lambda: clients.holding(newest), 60, "every client to get its query's last change")
    HistoryPersister(client).run()

    assert not clients.errors, clients.errors
    outage = {q.pk: len(client.xrange(bus.Keys.changes(q.pk), min=f"{int(killed_wall * 1000)}",
                                      max=f"{int(back_wall * 1000)}")) for q in queries}
    assert sum(outage.values()) > 0, "no change was published while the server was down: nothing was tested"
    firsts_after = []
    for (qid, _), got in clients.messages.items():
        messages = [m for _, m in got]
        assert check_feed(references[qid], messages) == 1  # one snapshot: resumed, never resynchronised
        ids = [entry_id_order(m["id"]) for m in messages[1:]]
        assert any(ms >= back_wall * 1000 for ms, _ in ids), "a client should have changes from after the restart"
        firsts_after.append(min(t for t, _ in got if t > killed_at) - killed_at)
    for q in queries:
        assert by_seq(history_of(q)) == by_seq(references[q.pk])
    print(f"evaluator up in {run.up_after:.1f} s; daphne SIGKILLed with {len(clients.messages)} clients connected and "
          f"{accepted_at_kill} of {OPS} ops ingested; it answered again {back_after:.1f} s later (keep_up.sh); "
          f"{sum(outage.values())} changes published while it was down; each client's first message after the kill "
          f"came {min(firsts_after):.1f}-{max(firsts_after):.1f} s after it, and every client held a change published after the "
          f"restart {resumed_after:.1f} s after it; every client's output equals its "
          f"query's reference under one snapshot ({sum(len(r) for r in references.values())} reference changes over "
          f"{len(queries)} queries); history equal; beat rounds that failed: {dict(run.beat_errors)}")
