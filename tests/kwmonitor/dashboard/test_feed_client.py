"""The example feed client against a real daphne server: snapshot, changes,
resume across a server restart with no gap and no duplicate, refusal."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kwmonitor.accounts.models import ApiToken
from kwmonitor.feed_client import last_id_of, origin_of, with_after
from streaming import bus
from tests.browser.server import ROOT, asgi_server, free_port
from .conftest import added, removed

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_url_helpers():
    assert with_after("ws://h:8/ws/queries/5/?token=t&after=1-0", "2-3") == "ws://h:8/ws/queries/5/?token=t&after=2-3"
    assert with_after("ws://h/ws/queries/5/?after=1-0", None) == "ws://h/ws/queries/5/"
    assert origin_of("wss://example.org/ws/queries/5/") == "https://example.org"
    assert last_id_of({"type": "snapshot", "last_id": "5-0"}) == "5-0"
    assert last_id_of({"type": "result.add", "id": "6-0"}) == "6-0"


def run_client(url: str, token: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kwmonitor.feed_client", "--url", url, *args],
        cwd=ROOT, env={"KWMONITOR_TOKEN": token, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60,
    )


def test_prints_snapshot_then_changes_and_resumes_from_the_last_id(query, user, redis_client, redis_url):
    q = query.pk
    _, token = ApiToken.issue(user, "feed client test")
    bus.publish_changes(redis_client, q, [added(q, 1), added(q, 2)])
    with asgi_server(redis_url) as base:
        url = base.replace("http", "ws") + f"/ws/queries/{q}/"
        first = run_client(url, token, "--limit", "1")
        assert first.returncode == 0, first.stderr
        (snapshot,) = [json.loads(line) for line in first.stdout.splitlines()]
        assert snapshot["type"] == "snapshot" and len(snapshot["results"]) == 2

        bus.publish_changes(redis_client, q, [removed(q, 1, seq=3), added(q, 3)])
        resumed = run_client(url, token, "--after", snapshot["last_id"], "--limit", "2")
        assert resumed.returncode == 0, resumed.stderr
        changes = [json.loads(line) for line in resumed.stdout.splitlines()]
        assert [(c["type"], c["result"]["tuples"][1]["key"]) for c in changes] == [("result.remove", 1), ("result.add", 3)]
        assert [c["id"] for c in changes] == [e for e, _ in redis_client.xrange(bus.Keys.changes(q))][2:]

        refused = run_client(url, "not-a-token", "--limit", "1")
        assert refused.returncode == 2 and "HTTP 403" in refused.stderr
        bad_after = run_client(url, token, "--after", "latest", "--limit", "1")
        assert bad_after.returncode == 2 and "refused the parameters" in bad_after.stderr


def test_reconnects_after_a_server_restart_with_no_gap_and_no_duplicate(query, user, redis_client, redis_url):
    q = query.pk
    _, token = ApiToken.issue(user, "feed client test")
    bus.publish_changes(redis_client, q, [added(q, 1)])
    port = free_port()
    url = f"ws://127.0.0.1:{port}/ws/queries/{q}/"
    with asgi_server(redis_url, port=port):
        client = subprocess.Popen(
            [sys.executable, "-m", "kwmonitor.feed_client", "--url", url, "--limit", "4"],
            cwd=ROOT, env={"KWMONITOR_TOKEN": token, "PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        snapshot = json.loads(client.stdout.readline())
        bus.publish_changes(redis_client, q, [added(q, 2)])
        first_change = json.loads(client.stdout.readline())
    bus.publish_changes(redis_client, q, [removed(q, 1, seq=3), added(q, 3)])  # while the server is down
    with asgi_server(redis_url, port=port):
        out, err = client.communicate(timeout=60)
    later = [json.loads(line) for line in out.splitlines()]
    assert client.returncode == 0, err
    assert "reconnecting" in err
    assert snapshot["type"] == "snapshot"
    ids = [m["id"] for m in [first_change, *later]]
    assert ids == [e for e, _ in redis_client.xrange(bus.Keys.changes(q), min=f"({snapshot['last_id']}")]
    assert [m["type"] for m in later] == ["result.remove", "result.add"]
