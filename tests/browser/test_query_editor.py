"""A user writes a query in the browser: keyword chips, predicates picked from the stream's schema with typed
values, the live preview; then edits, disables and deletes it. Another user cannot reach it.

No evaluator: the editor needs only the web tier (the preview's CN count runs the engine's CLI, its class and
cost read a sharing report published as an evaluator would). Screenshots in var/screenshots/.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect, sync_playwright

from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.models import Stream
from streaming import bus
from streaming.events import SharingReport
from tests.browser.server import ROOT, asgi_server, orm
from tests.browser.test_query_dashboard import CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

SHOTS = ROOT / "var" / "screenshots"


def saved(name: str) -> tuple:
    query = KeywordQuery.objects.get(name=name)
    return (query.pk, query.owner_id, query.keywords, query.tmax,
            sorted((p.relation, p.attribute, p.op, p.value) for p in query.predicates.all()))


def log_in(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")


def test_a_user_writes_edits_disables_and_deletes_a_query(user, django_user_model, ecommerce_schema, redis_client,
                                                          redis_url, staff_user):
    stream = Stream.objects.create(name="shop", schema=ecommerce_schema, user_queries=True)
    theirs = KeywordQuery.objects.create(owner=staff_user, name="staff dresses", schema=ecommerce_schema,
                                         stream=stream, keywords="dress texas", tmax=5)
    bus.write_sharing_report(redis_client, SharingReport(
        stream=stream.pk, evaluator=stream.evaluator.pk, sharing="widen", totals={"ops": 2000}, ts=time.time(),
        classes=[{"class": 0, "properties": {"keywords": ["dress", "texas"]}, "members": [theirs.pk],
                  "busy_seconds": 0.3}]))
    django_user_model.objects.create_user("bea", "bea@example.com", "bea-password-1")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with asgi_server(redis_url) as base, sync_playwright() as p:
        browser = p.chromium.launch(**CHROMIUM)
        errors: list[str] = []
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 950})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            log_in(page, base, "ann", "ann-password-1")
            page.click("#new-query")
            page.fill("#id_name", "cheap dresses in Texas")
            entry = page.locator("#keyword-entry")
            entry.fill("Dress")
            entry.press("Enter")
            entry.fill("texas")
            entry.press(" ")
            entry.fill("boots")
            entry.press("Enter")
            page.locator('#keyword-chips [aria-label="remove boots"]').click()
            expect(page.locator("#keyword-chips .chip")).to_have_text(["dress×", "texas×"])
            page.fill("#id_tmax", "4")
            page.click("#add-predicate")
            row = page.locator(".predicate-row").nth(0)
            row.locator("select.relation").select_option("Product")
            row.locator("select.attribute").select_option("price")
            row.locator('select[name$="-op"]').select_option("between")
            typed = row.locator(".typed")
            expect(typed).to_have_count(2)
            typed.nth(0).fill("10")
            typed.nth(1).fill("59.5")
            page.click("#add-predicate")
            second = page.locator(".predicate-row").nth(1)
            second.locator("select.relation").select_option("Customer")
            second.locator("select.attribute").select_option("state")
            second.locator('select[name$="-op"]').select_option("=")
            second.locator(".typed").fill("Texas")
            preview = page.locator("#query-preview")
            expect(preview.locator('[data-field="sharing"]')).to_contain_text("joins class {dress, texas}")
            expect(preview.locator('[data-field="members"]')).to_have_text("shared with 1 other query: 1 of another user")
            expect(preview.locator('[data-field="cns"]')).to_contain_text("network templates")
            expect(preview.locator('[data-field="cost"]')).to_contain_text("µs of evaluation per op")
            expect(preview).not_to_contain_text("staff dresses")
            page.screenshot(path=str(SHOTS / "query-editor.png"), full_page=True)

            second.locator(".typed").fill("")  # an empty value: the server says so, nothing is saved
            expect(preview.locator(".preview-errors")).to_contain_text("This field is required")
            second.locator(".typed").fill("Texas")
            page.click("#save-query")
            expect(page.locator("#messages")).to_contain_text("Saved 'cheap dresses in Texas'")
            pk, owner, keywords, tmax, predicates = orm(lambda: saved("cheap dresses in Texas"))
            assert (owner, keywords, tmax) == (user.pk, "dress texas", 4)
            assert predicates == [("Customer", "state", "=", "Texas"), ("Product", "price", "between", [10.0, 59.5])]
            expect(page.locator("#query-keywords .chip")).to_have_text(["dress", "texas"])
            page.screenshot(path=str(SHOTS / "query-saved.png"), full_page=True)

            page.click("#edit-query")
            expect(page.locator("#keyword-chips .chip")).to_have_text(["dress×", "texas×"])
            row = page.locator(".predicate-row").nth(0)
            expect(row.locator(".typed").nth(1)).to_have_value("59.5")
            page.locator(".predicate-row").nth(1).locator("button", has_text="Remove").click()
            page.locator('#keyword-chips [aria-label="remove texas"]').click()
            page.click("#save-query")
            expect(page.locator("#messages")).to_contain_text("Saved")
            _, _, keywords, _, predicates = orm(lambda: saved("cheap dresses in Texas"))
            assert keywords == "dress" and len(predicates) == 1

            page.click("#toggle-query")
            expect(page.locator("#query-state")).to_have_text("disabled")
            expect(page.locator("#toggle-query")).to_have_text("Enable")
            url = page.url

            other = browser.new_page()
            log_in(other, base, "bea", "bea-password-1")
            response = other.goto(url)
            assert response is not None and response.status == 404
            assert other.goto(url + "edit/").status == 404
            other.close()

            page.click("#delete-query")
            page.click("#confirm-delete")
            expect(page.locator("#messages")).to_contain_text("Deleted 'cheap dresses in Texas'")
            assert not orm(lambda: KeywordQuery.objects.filter(pk=pk).exists())
            assert not errors, errors
        finally:
            browser.close()
