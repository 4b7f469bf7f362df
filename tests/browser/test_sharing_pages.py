"""Sharing in a browser: the Sharing page lists the classes, a query says which class it rides on, and
aggregate tiles follow the values the evaluator publishes on the stream feed.

No evaluator: the sharing report and aggregate values are published on the bus as an evaluator would.
"""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect, sync_playwright

from kwmonitor.queries.models import AggregateSubscription, KeywordQuery
from kwmonitor.streams.models import Stream
from streaming import bus
from streaming.events import AggregateValue, SharingReport
from tests.browser.server import asgi_server
from tests.browser.test_query_dashboard import CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_sharing_page_class_note_and_aggregate_tiles(staff_user, ecommerce_schema, redis_client, redis_url):
    stream = Stream.objects.create(name="shop", schema=ecommerce_schema)
    mine = KeywordQuery.objects.create(owner=staff_user, name="dress in texas", schema=ecommerce_schema,
                                       stream=stream, keywords="dress texas", tmax=3, window_seconds=600)
    wide = KeywordQuery.objects.create(owner=staff_user, name="texas dresses, wide", schema=ecommerce_schema,
                                       stream=stream, keywords="texas dress", tmax=5)
    born = AggregateSubscription.objects.create(owner=staff_user, name="results born", stream=stream,
                                                source_query=mine, aggregate="count", window=600, step=60)
    AggregateSubscription.objects.create(owner=staff_user, name="avg price", stream=stream, source_relation="Product",
                                         aggregate="avg", attribute="price", window=600, step=60)
    bus.write_sharing_report(redis_client, SharingReport(
        stream=stream.pk, sharing="widen", ts=1e10,
        classes=[{"class": 0, "members": [mine.pk, wide.pk], "lattice_nodes": 120, "lattice_nodes_alone": 180,
                  "view_tuples": 900, "stored_tuples_alone": 1500, "subrelation_tuples": 40, "class_results": 7,
                  "produced": 30, "undelivered": 4,
                  "properties": {"keywords": ["dress", "texas"], "output": "results", "tmax": 5,
                                 "window_seconds": None, "relations": ["Customer", "Order", "Product"],
                                 "selection": {"Product": {"price": "[40, +inf)"}}}}],
        aggregate_classes=[{"subscribers": [born.pk], "source_relation": None, "source_query": mine.pk,
                            "kind": "time", "relaxed": [600, 60], "relaxed_instances": 12}],
        totals={"queries": 2, "classes": 1, "queries_sharing": 1, "stored_tuples": 900, "stored_tuples_alone": 1500,
                "lattice_nodes": 120, "lattice_nodes_alone": 180, "ops": 100, "evaluations_per_op": 0.5,
                "evaluations_per_op_alone": 2.0}))
    with asgi_server(redis_url) as base, sync_playwright() as p:
        browser = p.chromium.launch(**CHROMIUM)
        errors: list[str] = []
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{base}/accounts/login/?next=/sharing/")
            page.fill("#id_username", "root")
            page.fill("#id_password", "root-password-1")
            page.click("input[type=submit]")
            section = page.locator(f"#sharing-stream-{stream.pk}")
            expect(section).to_contain_text("2 queries in 1 class · 1 rides on another's class")
            expect(section.locator(".sharing-classes tbody tr")).to_have_count(1)
            expect(section.locator(".sharing-classes")).to_contain_text("Product.price ∈ [40, +inf)")
            expect(section.locator(".savings .value")).to_have_text(["1.7× less", "1.5× less", "4.0× less"])
            expect(section).to_contain_text("results of dress in texas")
            if os.environ.get("KWMONITOR_SCREENSHOTS"):
                page.screenshot(path="var/screenshots/sharing.png", full_page=True)

            page.goto(f"{base}/queries/{mine.pk}/")
            expect(page.locator("#sharing-note")).to_contain_text("Rides on sharing class 0")
            expect(page.locator("#sharing-note a")).to_have_text(["texas dresses, wide"])
            tile = page.locator(f'[data-aggregate="{born.pk}"]')
            expect(tile.locator('[data-field="value"]')).to_have_text("–")
            for end, value in ((60.0, 3), (120.0, 5)):
                bus.publish_aggregate_values(redis_client, stream.pk, [AggregateValue(
                    stream=stream.pk, aggregate=born.pk, seq=40, window_end=end, value=value, ts=1.0)])
            expect(tile.locator('[data-field="value"]')).to_have_text("5")
            expect(tile.locator('[data-field="window-end"]')).to_have_text("window ending at 120 (op 40)")
            expect(tile.locator("canvas")).to_have_count(1)

            page.goto(f"{base}/streams/{stream.pk}/")
            expect(page.locator("#panel-aggregates .stat.aggregate")).to_have_count(2)
            expect(page.locator(f'[data-aggregate="{born.pk}"] [data-field="value"]')).to_have_text("5")  # replayed
            if os.environ.get("KWMONITOR_SCREENSHOTS"):
                page.screenshot(path="var/screenshots/stream-aggregates.png", full_page=True)
            assert errors == []
        finally:
            browser.close()
