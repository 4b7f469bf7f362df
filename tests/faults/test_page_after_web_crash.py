"""A query page open in a browser while the web server is SIGKILLed and started again (``scripts/keep_up.sh``, as
``make run`` runs it): the page reconnects by itself and shows every change once, those published while the
server was down included, without a new snapshot.

Real parts: daphne under ``keep_up.sh``, Redis, Debian's Chromium driven by
Playwright, the page's own ``LiveFeed``. No evaluator: the query is disabled
(no plan includes it) and its changes are published with
``bus.publish_changes``, as the latency test of the query dashboard does. The
frames the page received are read from the browser's websockets.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from playwright.sync_api import expect, sync_playwright

from kwmonitor.queries.models import KeywordQuery
from streaming import bus
from tests.browser.server import ROOT, asgi_server
from tests.browser.test_query_dashboard import CHROMIUM
from tests.faults.pipeline import wait_until
from tests.faults.services import answers, daphne_pid
from tests.kwmonitor.dashboard.conftest import added

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BEFORE, DURING, AFTER = 5, 5, 5  # changes published before the kill, while the server is down, after it is back


def test_a_page_reconnects_by_itself_after_the_server_is_killed_and_misses_nothing(user, ecommerce_schema,
                                                                                    redis_client, redis_url):
    query = KeywordQuery.objects.create(owner=user, name="probe", schema=ecommerce_schema, keywords="dress texas",
                                        tmax=4, enabled=False)
    q = query.pk
    frames: list[dict] = []
    sockets = []

    def watch(ws) -> None:
        sockets.append(ws)
        ws.on("framereceived", lambda payload: frames.append(json.loads(payload)))

    def publish(first: int, count: int) -> None:
        for oid in range(first, first + count):
            bus.publish_changes(redis_client, q, [added(q, 100 + oid, seq=oid)])

    with asgi_server(redis_url, under=[str(ROOT / "scripts/keep_up.sh")]) as base, sync_playwright() as p:
        port = int(base.rpartition(":")[2])
        browser = p.chromium.launch(**CHROMIUM)
        try:
            page = browser.new_page()
            page.on("websocket", watch)
            page.goto(f"{base}/accounts/login/?next=/queries/{q}/")
            page.fill("#id_username", "ann")
            page.fill("#id_password", "ann-password-1")
            page.click("input[type=submit]")
            expect(page.locator("#feed-state")).to_have_text("live")
            publish(0, BEFORE)
            expect(page.locator("#count-adds")).to_have_text(str(BEFORE))
            killed, killed_at = daphne_pid(port), time.monotonic()
            os.kill(killed, signal.SIGKILL)
            expect(page.locator("#feed-state")).to_contain_text("reconnecting")
            publish(BEFORE, DURING)
            wait_until(lambda: answers(base), 60, "the web server to come back", every=0.1)
            back_after = time.monotonic() - killed_at
            assert daphne_pid(port) != killed
            expect(page.locator("#feed-state")).to_have_text("live", timeout=30_000)
            live_after = time.monotonic() - killed_at
            publish(BEFORE + DURING, AFTER)
            total = BEFORE + DURING + AFTER
            expect(page.locator("#count-adds")).to_have_text(str(total))
            roots = page.locator(".result > ul.tree > li > .tuple .key").all_inner_texts()
        finally:
            browser.close()
    assert roots == [f"#{100 + i}" for i in reversed(range(total))]  # every change, once, newest first
    assert [f["type"] for f in frames] == ["snapshot"] + ["result.add"] * total  # resumed: no second snapshot
    assert [f["seq"] for f in frames[1:]] == list(range(total))
    assert len(sockets) >= 2 and sockets[0].is_closed()
    print(f"daphne SIGKILLed under the page; it answered again {back_after:.1f} s later and the page was live again "
          f"{live_after:.1f} s after the kill ({len(sockets)} websockets opened), with all {total} changes once")
