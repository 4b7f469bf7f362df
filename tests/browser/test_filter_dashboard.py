"""A filter subscription's dashboard in a browser: one-tuple results (no edges) drawn and struck out.

No evaluator: a disabled query, which no plan includes, is fed with
``bus.publish_changes``; daphne serves kwmonitor.asgi and Debian's Chromium
runs the page's own query.js.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect, sync_playwright

from kwmonitor.queries.models import KeywordQuery
from streaming import bus
from streaming.events import ResultAdded, ResultRemoved, ResultView, TupleView, result_key
from tests.browser.server import asgi_server
from tests.browser.test_query_dashboard import CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def product(pid: int, price: float) -> ResultView:
    return ResultView(key=result_key([["Product", pid]], []), edges=[], tuples=[
        TupleView(relation="Product", key=pid, values={"pid": pid, "title": "Summer dress", "price": price})])


def test_one_tuple_results_are_drawn_and_removed(user, ecommerce_schema, redis_client, redis_url):
    query = KeywordQuery.objects.create(owner=user, name="expensive", schema=ecommerce_schema, keywords="",
                                        enabled=False)
    query.predicates.create(relation="Product", attribute="price", op=">=", value=40.0)
    q = query.pk
    with asgi_server(redis_url) as base, sync_playwright() as p:
        browser = p.chromium.launch(**CHROMIUM)
        errors: list[str] = []
        try:
            page = browser.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{base}/accounts/login/?next=/queries/{q}/")
            page.fill("#id_username", "ann")
            page.fill("#id_password", "ann-password-1")
            page.click("input[type=submit]")
            expect(page.locator("#feed-state")).to_have_text("live")
            expect(page.locator(".chip")).to_have_text(["filter subscription"])
            bus.publish_changes(redis_client, q, [ResultAdded(query=q, seq=3, result=product(1, 40.0)),
                                                  ResultAdded(query=q, seq=5, result=product(3, 55.0))])
            expect(page.locator("#count-live")).to_have_text("2")
            cards = page.locator(".result")
            expect(cards.locator(".result-size")).to_have_text(["1 tuple", "1 tuple"])
            expect(cards.locator(".tuple-head")).to_have_text(["Product#3", "Product#1"])  # newest first
            expect(cards.first.locator(".attrs")).to_contain_text("price: 55")
            expect(page.locator(".edge:visible")).to_have_count(0)
            bus.publish_changes(redis_client, q, [ResultRemoved(query=q, seq=8, result=product(1, 40.0))])
            expect(cards.nth(1)).to_have_class("result is-removed")
            expect(page.locator("#count-live")).to_have_text("1")
            assert errors == []
        finally:
            browser.close()
