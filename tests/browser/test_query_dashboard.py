"""The whole product in a browser: log in, open a query dashboard, ingest ops
over HTTP, see the new MTJNT appear (highlighted) and vanish after a delete.

Midway the page's socket is cut and the delete is ingested while it
reconnects: the page resumes from its last id and shows the removal as a
change, once. Real parts only: daphne serving kwmonitor.asgi, the ingest endpoint writing
the landing directory, the Spark evaluator process started by the supervisor,
Redis, and Debian's Chromium driven by Playwright. Saves a screenshot to
var/screenshots/ (or to $KWMONITOR_SCREENSHOT: docs/screenshot.png refreshes
the README's picture).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.models import Stream
from kwmonitor.streams.supervisor import Supervisor
from streaming import bus
from tests.browser.server import ROOT, asgi_server

pytestmark = [
    pytest.mark.browser,
    pytest.mark.spark,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

CHROMIUM = dict(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-background-networking", "--headless"])
DEMO_OPS = ROOT / "kwmonitor" / "streams" / "demo" / "ops.ndjson"
SCREENSHOT = Path(os.environ.get("KWMONITOR_SCREENSHOT", ROOT / "var" / "screenshots" / "query-dashboard.png"))
NEW_OPS = [
    {"op": "insert", "relation": "Customer", "tuple": {"cid": 10, "name": "Eve Park", "state": "Texas"}, "ts": 100},
    {"op": "insert", "relation": "Product", "tuple": {"pid": 10, "title": "Linen dress", "price": 59.0}, "ts": 101},
    {"op": "delete", "relation": "Order", "key": 9, "ts": 102},  # ends Customer 1 - Order 9 - Product 4
    {"op": "insert", "relation": "Order", "tuple": {"oid": 20, "cid": 10, "pid": 10, "note": "birthday"}, "ts": 103},
]
DELETE_NEW = [{"op": "delete", "relation": "Order", "key": 20, "ts": 110}]
ANOTHER_ORDER = [{"op": "insert", "relation": "Order", "tuple": {"oid": 21, "cid": 10, "pid": 10, "note": "gift"}, "ts": 111}]


def ingest(base: str, stream: Stream, lines: list[str]) -> dict:
    request = urllib.request.Request(
        f"{base}/ingest/{stream.pk}/", data="".join(line + "\n" for line in lines).encode(), method="POST",
        headers={"Authorization": f"Bearer {stream.ingest_token}", "Content-Type": "application/x-ndjson"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def wait_running(redis_client, evaluator_id: int, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        heartbeat = bus.read_heartbeat(redis_client, evaluator_id)
        if heartbeat is not None and heartbeat.status == "running":
            return
        time.sleep(0.5)
    pytest.fail(f"evaluator {evaluator_id} did not report running within {timeout}s")


def card(page, oid: int):
    """The result card holding Order #oid."""
    return page.locator(".result").filter(has=page.locator(".tuple-head", has_text=f"Order#{oid}"))


def test_new_result_appears_then_vanishes_after_a_delete(user, ecommerce_schema, redis_client, redis_url, settings, tmp_path):
    settings.LANDING_DIR = tmp_path / "landing"
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    settings.EVALUATOR_LOG_DIR = tmp_path / "log"
    stream = Stream.objects.create(name="shop", schema=ecommerce_schema, source_kind="landing")
    query = KeywordQuery.objects.create(
        owner=user, name="dress in texas", schema=ecommerce_schema, stream=stream, keywords="dress texas", tmax=4,
    )
    supervisor = Supervisor()
    env = {"LANDING_DIR": str(settings.LANDING_DIR), "CHECKPOINT_DIR": str(settings.CHECKPOINT_DIR)}
    with asgi_server(redis_url, extra_env=env) as base:
        supervisor.start(stream.evaluator.pk)
        try:
            background = ingest(base, stream, DEMO_OPS.read_text().splitlines())
            assert background["rejected"] == 1  # the unknown relation; stream-level rejects come from the evaluator
            wait_running(redis_client, stream.evaluator.pk)
            latency = drive_browser(base, stream, query, redis_client)
        finally:
            supervisor.stop(stream.evaluator.pk)
    print(f"browser event latency (ingest POST -> new card in the DOM): {latency:.2f}s")


def drive_browser(base: str, stream: Stream, query: KeywordQuery, redis_client) -> float:
    with sync_playwright() as p:
        browser = p.chromium.launch(**CHROMIUM)
        page = browser.new_page(viewport={"width": 1280, "height": 860}, device_scale_factor=1)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: print(f"browser console {m.type}: {m.text}"))
        try:
            page.goto(f"{base}/queries/{query.pk}/")
            assert "/accounts/login/" in page.url  # login required
            page.fill("#id_username", "ann")
            page.fill("#id_password", "ann-password-1")
            page.click("input[type=submit]")
            page.wait_for_url(f"{base}/queries/{query.pk}/")
            expect(page.locator("#feed-state")).to_have_text("live")
            # the background workload's results (6 live once the evaluator caught up)
            expect(page.locator("#count-live")).to_have_text("6", timeout=150_000)
            expect(page.locator(".result.is-removed, .result.is-new")).to_have_count(0, timeout=20_000)  # settled

            start = time.monotonic()
            ingest(base, stream, [json.dumps(op) for op in NEW_OPS])
            new = card(page, 20)
            expect(new).to_have_class("result is-new", timeout=60_000)
            added = time.monotonic() - start
            expect(card(page, 9)).to_have_class("result is-removed")
            expect(new.locator("mark.hit")).to_have_text(["Texas", "dress"])
            expect(page.locator("#count-live")).to_have_text("6")
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENSHOT, full_page=True)

            # pause the feed (socket closed), delete meanwhile, resume: the page reconnects from
            # its last id, so the remove arrives as a change (struck out), once, not as a snapshot
            adds, removes = (int(page.locator(f"#count-{c}").inner_text()) for c in ("adds", "removes"))
            page.click("#feed-toggle")
            expect(page.locator("#feed-state")).to_have_text("paused")
            published = redis_client.xlen(bus.Keys.changes(query.pk))
            ingest(base, stream, [json.dumps(op) for op in DELETE_NEW])
            deadline = time.monotonic() + 60
            while redis_client.xlen(bus.Keys.changes(query.pk)) == published and time.monotonic() < deadline:
                time.sleep(0.1)
            expect(new).not_to_have_class(re.compile("is-removed"))  # nothing reached the paused page
            page.click("#feed-toggle")
            expect(new).to_have_class("result is-removed")
            expect(new).to_have_count(0, timeout=10_000)  # struck out, faded, then gone
            expect(page.locator("#count-live")).to_have_text("5")
            expect(page.locator("#count-removes")).to_have_text(str(removes + 1))
            expect(page.locator("#count-adds")).to_have_text(str(adds))
            expect(page.locator("#feed-state")).to_have_text("live")

            # the stream page: the evaluator's status, metrics and stream-level rejects
            page.goto(f"{base}/streams/{stream.pk}/")
            expect(page.locator("#evaluator-status")).to_have_text("running")
            expect(page.locator("#stat-processing")).not_to_have_text("–")
            # the unknown relation (rejected at ingest), an insert of a live key, a delete of a missing one
            expect(page.locator("#dead-letters tr")).to_have_count(3)
            page.goto(f"{base}/")
            expect(page.locator(f'tr[data-stream="{stream.pk}"] [data-field="status"]')).to_have_text("running")
            live = page.locator(f'tr[data-query="{query.pk}"] [data-field="live"]')
            expect(live).to_have_text("5")
            ingest(base, stream, [json.dumps(op) for op in ANOTHER_ORDER])
            expect(live).to_have_text("6", timeout=60_000)  # the overview follows the batches' metrics
            assert errors == []
        finally:
            print("page errors:", errors)
            browser.close()
    return added


def test_websocket_to_dom_latency(user, ecommerce_schema, redis_client, redis_url):
    """Changes published on the bus reach the page's DOM in order, quickly (no evaluator here:
    a disabled query, which no plan includes, is fed with bus.publish_changes)."""
    from tests.kwmonitor.dashboard.conftest import added

    query = KeywordQuery.objects.create(
        owner=user, name="probe", schema=ecommerce_schema, keywords="dress texas", tmax=4, enabled=False,
    )
    q, samples = query.pk, 30
    with asgi_server(redis_url) as base, sync_playwright() as p:
        browser = p.chromium.launch(**CHROMIUM)
        try:
            page = browser.new_page()
            page.goto(f"{base}/accounts/login/?next=/queries/{q}/")
            page.fill("#id_username", "ann")
            page.fill("#id_password", "ann-password-1")
            page.click("input[type=submit]")
            expect(page.locator("#feed-state")).to_have_text("live")
            latencies = []
            for i in range(samples):
                page.evaluate(
                    "window.seenAt = null; new MutationObserver((_, o) => { window.seenAt = performance.timeOrigin"
                    " + performance.now(); o.disconnect(); }).observe(document.getElementById('count-adds'),"
                    " {childList: true, characterData: true, subtree: true})"
                )
                sent = time.time() * 1000
                bus.publish_changes(redis_client, q, [added(q, 100 + i)])
                deadline = time.monotonic() + 10  # polled from here: the page's policy forbids eval'd predicates
                while page.evaluate("window.seenAt") is None:
                    assert time.monotonic() < deadline, "the change did not reach the page"
                    time.sleep(0.002)
                latencies.append(page.evaluate("window.seenAt") - sent)
            expect(page.locator("#count-adds")).to_have_text(str(samples))
            roots = page.locator(".result > ul.tree > li > .tuple .key").all_inner_texts()  # each tree's Order
            assert roots == [f"#{100 + i}" for i in reversed(range(samples))]  # all, once, newest first
        finally:
            browser.close()
    latencies.sort()
    median = latencies[samples // 2]
    print(f"websocket -> DOM latency over {samples} changes: median {median:.1f} ms, "
          f"p90 {latencies[int(samples * 0.9)]:.1f} ms, max {latencies[-1]:.1f} ms")
    assert median < 1000
