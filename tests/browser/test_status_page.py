"""Status is the truth, in a browser: liveness comes from heartbeats, not from the last event.

Real parts: daphne, a Celery worker and beat on the test Redis, a
heartbeat-writing evaluator process launched by the supervisor, Chromium.
The stream page shows the evaluator running; after a SIGKILL (no event says
so, and nothing supervises it in this test) it turns "unresponsive" within
seconds, without a reload. The overview shows no banner while worker and
beat run, and a banner naming each once it is killed. The query page of a
query edited in the admin follows the edit (keywords, Tmax, predicates,
disabled state) without a reload, and says what a predicate means. No page
violates its Content-Security-Policy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.models import Evaluator, Stream
from kwmonitor.streams.supervisor import Supervisor, SupervisorSettings
from streaming import bus
from tests.browser import server
from tests.browser.server import ROOT, asgi_server
from tests.browser.test_query_dashboard import CHROMIUM
from tests.kwmonitor.streams.conftest import HEARTBEAT_COMMAND

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def celery(kind: str, redis_url: str, tmp_path: Path) -> subprocess.Popen:
    env = dict(os.environ, DATABASE_URL=server.test_database_url(), REDIS_URL=redis_url)
    args = (["worker", "--pool", "solo", "-Q", "status-test", "--without-gossip", "--without-mingle"] if kind == "worker"
            else ["beat", "--schedule", str(tmp_path / "beat-schedule")])
    log = open(tmp_path / f"{kind}.log", "wb")
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "kwmonitor", *args, "--loglevel", "INFO"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def off_the_loop(function):
    """Run a database call outside Playwright's event loop (Django refuses sync queries inside one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(function).result()


def log_in(page, base: str, path: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/?next={path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}{path}")


def test_pages_show_liveness_from_heartbeats_and_follow_edits(user, staff_user, ecommerce_schema, redis_client,
                                                              redis_url, settings, tmp_path):
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    stream = Stream.objects.create(name="shop", schema=ecommerce_schema)
    query = KeywordQuery.objects.create(owner=user, name="dress in texas", schema=ecommerce_schema, stream=stream,
                                        keywords="dress texas", tmax=4)
    supervisor = Supervisor(SupervisorSettings(
        command=tuple(HEARTBEAT_COMMAND), preprocessor_command=tuple(HEARTBEAT_COMMAND), heartbeat_timeout=15.0,
        start_grace=30.0, stable_after=60.0,
        backoff=2.0, backoff_max=4.0, stop_timeout=5.0, log_dir=tmp_path / "log"))
    evaluator = supervisor.start(stream.evaluator.pk)
    worker, beat = celery("worker", redis_url, tmp_path), celery("beat", redis_url, tmp_path)
    violations: list[str] = []
    try:
        with asgi_server(redis_url) as base, sync_playwright() as p:
            browser = p.chromium.launch(**CHROMIUM)
            try:
                context = browser.new_context()
                page = context.new_page()
                page.on("console", lambda m: "Content Security Policy" in m.text and violations.append(m.text))
                log_in(page, base, "/", "root", "root-password-1")
                expect(page.locator(f'tr[data-stream="{stream.pk}"] [data-field="status"]')).to_have_text("running",
                                                                                                          timeout=20_000)
                expect(page.locator("#health-banner")).to_be_hidden(timeout=20_000)  # worker answers, beat beats

                page.goto(f"{base}/streams/{stream.pk}/")
                expect(page.locator("#evaluator-status")).to_have_text("running")
                expect(page.locator("#stat-input")).to_contain_text("idle")
                os.killpg(evaluator.pid, signal.SIGKILL)  # no event, no supervise round: only the heartbeat stops
                killed = time.monotonic()
                expect(page.locator("#evaluator-status")).to_have_text("unresponsive", timeout=15_000)
                seen_after = time.monotonic() - killed
                assert off_the_loop(lambda: Evaluator.objects.get(pk=evaluator.pk).lifecycle) == "launched"
                last_status = [e.status for _, e in bus.read_stream_events(redis_client, stream.pk)
                               if e.type == "evaluator.status"][-1]
                assert last_status in ("starting", "running")  # and the last event

                page.goto(f"{base}/")
                worker.send_signal(signal.SIGKILL)
                expect(page.locator("#health-banner")).to_be_visible(timeout=15_000)
                expect(page.locator("#health-banner")).to_contain_text("Celery worker is down")
                beat.send_signal(signal.SIGKILL)
                expect(page.locator("#health-banner")).to_contain_text("Celery beat is down", timeout=20_000)
                page.screenshot(path=str(tmp_path / "overview-down.png"), full_page=True)

                page.goto(f"{base}/queries/{query.pk}/")
                expect(page.locator("#query-keywords .chip")).to_have_text(["dress", "texas"])
                expect(page.locator("#predicate-note")).to_be_hidden()
                change = context.new_page()
                change.goto(f"{base}/admin/queries/keywordquery/{query.pk}/change/")
                change.fill("#id_keywords", "silk scarf")
                change.fill("#id_tmax", "3")
                change.uncheck("#id_enabled")
                change.click(".add-row a")  # the admin's own script adds an empty predicate row
                change.fill("#id_predicates-0-relation", "Product")
                change.fill("#id_predicates-0-attribute", "price")
                change.select_option("#id_predicates-0-op", ">=")
                change.fill("#id_predicates-0-value", "40")
                change.click("input[name=_save]")
                expect(change.locator(".messagelist")).to_contain_text("was changed successfully")
                expect(page.locator("#query-keywords .chip")).to_have_text(["silk", "scarf"], timeout=10_000)
                expect(page.locator("#query-tmax")).to_have_text("3")
                expect(page.locator("#query-predicates")).to_have_text("Product.price >= 40.0")
                expect(page.locator("#predicate-note")).to_contain_text("results without a tuple of that relation are still results")
                expect(page.locator("#query-state")).to_have_text("disabled", timeout=10_000)
                page.screenshot(path=str(tmp_path / "query-edited.png"), full_page=True)
            finally:
                browser.close()
    finally:
        for proc in (worker, beat):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        supervisor.stop(evaluator.pk)
    print(f"evaluator shown unresponsive {seen_after:.1f} s after its SIGKILL")
    assert violations == []
