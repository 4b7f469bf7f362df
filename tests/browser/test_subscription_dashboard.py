"""A WXQuery subscription's page in a browser: XML items posted to the ingest endpoint, evaluated by the
stream's evaluator (its Spark-free core, fed the landing lines), arrive on the page as result items.

daphne serves kwmonitor.asgi, Debian's Chromium runs the page's own
subscription.js; the page must run under the site's CSP without a violation.
Saves a screenshot to var/screenshots/subscription-dashboard.png.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from kwmonitor.queries.models import WXQuerySubscription
from streaming import sources
from streaming.evaluator import GroupEvaluator
from streaming.parsed import parse_stored_line
from streaming.schema import Schema
from streaming.workloads.photons import PAPER_QUERIES, photon_items
from tests.browser.server import asgi_server
from tests.browser.test_query_dashboard import CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "var" / "screenshots" / "subscription-dashboard.png"


def ingest(base: str, stream_id: int, token: str, items: list[str]) -> dict:
    body = ("<photons>" + "\n".join(items) + "</photons>").encode()
    request = urllib.request.Request(f"{base}/ingest/{stream_id}/", data=body, method="POST", headers={
        "Content-Type": "application/xml", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def evaluate(evaluator: GroupEvaluator, schema: Schema, landing: Path, batch: int) -> None:
    """One batch of every landing line (what the evaluator's Spark source would read; applied seqs are skipped)."""
    evaluator.apply_batch(batch, [parse_stored_line(line, schema, frozenset()) for line in sources.read_landing(landing)])


def test_result_items_arrive_on_the_subscription_page(photons_stream, user, redis_client, redis_url, settings,
                                                      tmp_path):
    from kwmonitor.streams.plans import publish_plan

    settings.LANDING_DIR = tmp_path / "landing"
    sub = WXQuerySubscription.objects.create(owner=user, name="RX J0852 photons", stream=photons_stream,
                                             text=PAPER_QUERIES["q3"])
    WXQuerySubscription.objects.create(owner=user, name="Vela photons", stream=photons_stream, text=PAPER_QUERIES["q4"])
    publish_plan(photons_stream.pk)
    evaluator = GroupEvaluator(redis_client, photons_stream.evaluator.pk)
    evaluator.start()
    items = list(photon_items(1500, seed=9))
    schema = Schema.from_dict(photons_stream.schema.to_document())
    landing = sources.landing_directory(settings.LANDING_DIR, photons_stream.pk)
    stream_id, token = photons_stream.pk, photons_stream.ingest_token
    with asgi_server(redis_url, extra_env={"LANDING_DIR": str(settings.LANDING_DIR)}) as base, \
            sync_playwright() as p:
        browser = p.chromium.launch(**CHROMIUM)
        problems: list[str] = []
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.goto(f"{base}/accounts/login/?next=/subscriptions/{sub.pk}/")
            page.fill("#id_username", "ann")
            page.fill("#id_password", "ann-password-1")
            page.click("input[type=submit]")
            expect(page.locator("#feed-state")).to_have_text("live")
            expect(page.locator("#results-empty")).to_be_visible()
            expect(page.locator("#panel-apt .apt-note").first).to_contain_text("σ: (/photons/photon/coord/cel/dec")
            assert ingest(base, stream_id, token, items[:700])["accepted"] == 700
            evaluate(evaluator, schema, landing, 0)
            first = page.locator(".subscription-result")
            expect(first.first).to_be_visible()
            shown = first.count()
            assert ingest(base, stream_id, token, items[700:])["accepted"] == 800
            evaluate(evaluator, schema, landing, 1)
            expect(page.locator("#count-results")).not_to_have_text(str(shown))
            newest = first.first.locator(".item")
            expect(newest).to_contain_text("<rxj><ra>")
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SCREENSHOT, full_page=True)
            assert problems == []
        finally:
            browser.close()
