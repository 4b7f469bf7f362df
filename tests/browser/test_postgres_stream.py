"""End to end from PostgreSQL: a stream made in the admin from a publication, a query written on the dashboard,
and a row inserted into a table appearing as a new result (MTJNT) on the query's page.

Real parts only: a throwaway PostgreSQL with wal_level=logical, daphne, the supervisor starting the Spark
evaluator and the capture process, Redis, Debian's Chromium. About a minute: Spark starts, the capture makes
its slot. Screenshots in var/screenshots/.
"""

from __future__ import annotations

import time

import psycopg
import pytest
from playwright.sync_api import expect, sync_playwright

from kwmonitor.streams.models import Evaluator, Stream
from kwmonitor.streams.supervisor import Supervisor, process_alive
from tests.browser.server import ROOT, asgi_server, orm
from tests.browser.test_query_dashboard import CHROMIUM, wait_running

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.redis, pytest.mark.slow,
              pytest.mark.django_db(transaction=True)]

SHOTS = ROOT / "var" / "screenshots"
TABLES = """
CREATE TABLE customer (cid int PRIMARY KEY, name text, state text);
CREATE TABLE product (pid int PRIMARY KEY, title text, price numeric(8, 2));
CREATE TABLE orders (oid int PRIMARY KEY, cid int REFERENCES customer, pid int REFERENCES product, note text);
INSERT INTO customer VALUES (1, 'Ann Lee', 'Texas'), (2, 'Bob Ray', 'Oregon');
INSERT INTO product VALUES (1, 'Red dress', 49.5), (2, 'Boots', 120);
INSERT INTO orders VALUES (1, 2, 2, 'for the snow');
CREATE PUBLICATION shop FOR TABLE customer, product, orders;
"""


def stop_all(supervisor: Supervisor, stream_id: int) -> None:
    primary = Stream.objects.get(pk=stream_id).evaluator
    supervisor.stop(primary.pk)
    supervisor.supervise()  # the capture follows its primary
    for process in Evaluator.objects.filter(stream_id=stream_id):
        if process.pid and process_alive(process.pid, process.process_start):
            supervisor.stop(process.pk)


def test_a_row_inserted_into_a_table_appears_as_a_result(staff_user, source_db, redis_client, redis_url, settings,
                                                         tmp_path, monkeypatch):
    with psycopg.connect(source_db, autocommit=True) as conn:
        conn.execute(TABLES)
    monkeypatch.setenv("KW_DSN_E2E", source_db)
    settings.LANDING_DIR, settings.CHECKPOINT_DIR = tmp_path / "landing", tmp_path / "checkpoints"
    settings.EVALUATOR_LOG_DIR = tmp_path / "log"
    env = {"LANDING_DIR": str(settings.LANDING_DIR), "CHECKPOINT_DIR": str(settings.CHECKPOINT_DIR)}
    SHOTS.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor()
    stream_id = None
    with asgi_server(redis_url, extra_env=env) as base, sync_playwright() as p:
        browser = p.chromium.launch(**CHROMIUM)
        errors: list[str] = []
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 950})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{base}/accounts/login/?next=/admin/streams/stream/add/")
            page.fill("#id_username", "root")
            page.fill("#id_password", "root-password-1")
            page.click("input[type=submit]")
            page.fill("#id_name", "pgshop")
            page.select_option("#id_source_kind", "postgres")
            page.fill("#id_source_dsn_env", "KW_DSN_E2E")
            page.fill("#id_source_publication", "shop")
            page.fill("#id_source_slot", "kw_e2e")
            page.check("#id_schema_from_catalog")
            page.click("input[name=_save]")
            expect(page.locator(".messagelist")).to_contain_text("made from the catalog: customer, orders, product")
            stream_id = orm(lambda: Stream.objects.get(name="pgshop").pk)

            page.goto(f"{base}/queries/new/")
            page.fill("#id_name", "dresses in Texas")
            page.select_option("#id_stream", str(stream_id))
            for word in ("dress", "texas"):
                page.locator("#keyword-entry").fill(word)
                page.locator("#keyword-entry").press("Enter")
            page.fill("#id_tmax", "3")
            expect(page.locator('#query-preview [data-field="cns"]')).to_contain_text("network templates")
            page.click("#save-query")
            expect(page.locator("#messages")).to_contain_text("Saved 'dresses in Texas'")
            query_url = page.url

            primary = orm(lambda: supervisor.start(Stream.objects.get(pk=stream_id).evaluator.pk).pk)
            orm(supervisor.supervise)  # the capture follows the primary
            wait_running(redis_client, primary)
            page.goto(query_url)
            expect(page.locator("#feed-state")).to_have_text("live")
            expect(page.locator("#query-state")).to_have_text("evaluating", timeout=60_000)
            expect(page.locator("#count-live")).to_have_text("0")

            with psycopg.connect(source_db, autocommit=True) as conn:
                conn.execute("INSERT INTO orders VALUES (7, 1, 1, 'a gift')")
            started = time.monotonic()
            new = page.locator(".result").filter(has=page.locator(".tuple-head", has_text="orders#7"))
            expect(new).to_have_class("result is-new", timeout=90_000)
            print(f"PostgreSQL commit -> new card on the dashboard: {time.monotonic() - started:.2f} s")
            expect(new.locator("mark.hit")).to_have_text(["Texas", "dress"])
            page.screenshot(path=str(SHOTS / "postgres-result.png"), full_page=True)

            page.goto(f"{base}/streams/{stream_id}/")
            expect(page.locator('#panel-source [data-field="capture-status"]')).to_have_text("running")
            expect(page.locator('#panel-source [data-field="ops"]')).to_have_text("6")
            page.screenshot(path=str(SHOTS / "postgres-stream.png"), full_page=True)
            assert not errors, errors
        finally:
            browser.close()
            if stream_id is not None:
                orm(lambda: stop_all(supervisor, stream_id))
