"""The stream page's ASC panels: rearrangements list only changes of order (the checks that kept one are
counted per relation), and the dropping chart's scale is the ratios' own, 0 to 100 %."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from kwmonitor.streams.models import Stream
from streaming import bus
from streaming.events import DroppingRatio, Rearrangement
from tests.browser.server import ROOT, asgi_server
from tests.browser.test_query_dashboard import CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

SCREENSHOT = Path(os.environ.get("KWMONITOR_SCREENSHOTS_DIR", ROOT / "var" / "screenshots")) / "stream-panels.png"


def test_rearrangements_show_changes_of_order_only_and_the_dropping_axis_reads_shares(
        staff_user, ecommerce_schema, redis_client, redis_url):
    stream = Stream.objects.create(name="shop", schema=ecommerce_schema)
    now = time.time()

    def kept(relation: str, sequence: list[str], ts: float) -> Rearrangement:
        return Rearrangement(stream=stream.pk, relation=relation, old_sequence=sequence, new_sequence=sequence,
                             d_init=0.0, d_cur=0.0, mu=0.0, ts=ts)

    events = [
        DroppingRatio(stream=stream.pk, relation="Customer", period=0, tuples=40, dropped=0, ratio=0.0, ts=now - 30),
        kept("Customer", ["state"], now - 30),
        DroppingRatio(stream=stream.pk, relation="Customer", period=1, tuples=40, dropped=0, ratio=0.0, ts=now - 20),
        kept("Customer", ["state"], now - 20),
        kept("Product", ["price", "title"], now - 20),
        Rearrangement(stream=stream.pk, relation="Product", old_sequence=["price", "title"],
                      new_sequence=["title", "price"], d_init=0.25, d_cur=0.5, mu=0.0, ts=now - 10),
    ]
    for event in events:
        bus.publish_stream_event(redis_client, stream.pk, event)
    unchanged = Stream.objects.create(name="kept", schema=ecommerce_schema)
    bus.publish_stream_event(redis_client, unchanged.pk, Rearrangement(
        stream=unchanged.pk, relation="Product", old_sequence=["price"], new_sequence=["price"], d_init=0.4,
        d_cur=0.1, mu=0.0, ts=now))
    with asgi_server(redis_url) as base, sync_playwright() as p:
        browser = p.chromium.launch(**CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{base}/accounts/login/?next=/streams/{stream.pk}/")
            page.fill("#id_username", "root")
            page.fill("#id_password", "root-password-1")
            page.click("input[type=submit]")
            changes = page.locator("#rearrangements li")
            expect(changes).to_have_count(1)  # the checks that kept an order are no change
            expect(changes.locator(".relation")).to_have_text("Product")
            expect(changes.locator(".old")).to_have_text("price › title")
            expect(changes.locator(".new")).to_have_text("title › price")
            expect(page.locator("#rearr-empty")).to_be_hidden()
            checks = page.locator("#order-checks li")
            expect(checks).to_have_count(2)
            expect(checks.filter(has_text="Customer")).to_contain_text("Customer state · kept by 2 checks, the last at")
            expect(checks.filter(has_text="Product")).to_contain_text("Product title › price · set at")
            expect(page.locator("#dropping-empty")).to_be_hidden()
            scale = page.evaluate("() => { const y = document.getElementById('dropping-chart').kwChart.plot.scales.y;"
                                  " return [y.min, y.max]; }")
            assert scale == [0, 1]  # all the ratios are 0: the scale still reads 0 to 100 %, not 0 to 100
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.locator("#panel-rearrangements").scroll_into_view_if_needed()
            page.screenshot(path=str(SCREENSHOT), full_page=True)

            # a stream whose orders never changed says so, and lists the check that kept one
            page.goto(f"{base}/streams/{unchanged.pk}/")
            expect(page.locator("#order-checks li")).to_have_text(re.compile(r"^Product price · kept by 1 check, the"))
            expect(page.locator("#rearr-empty")).to_have_text("No change of predicate order yet.")
            expect(page.locator("#rearrangements li")).to_have_count(0)
            assert errors == []
        finally:
            browser.close()
