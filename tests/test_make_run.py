"""`make run` as a user runs it: every panel has live content within a minute, and Ctrl-C stops everything.

``scripts/run.sh`` (what ``make run`` runs after its set-up steps) is started
on the test database, the test Redis, a free port and a scratch ``VAR_DIR``.
Within 60 s of its evaluator running (Spark's own start-up, 15-20 s on a quiet
two-core machine and much more on a loaded one, is left out of the bound so
the test holds under load; the times from the start are printed), a browser
sees on the demo's pages: results of a query, batch metrics (processing
rate), dropping ratios, the rearrangement monitor's checks, dead letters, aggregate tiles and the Sharing page's classes. Then the web server is SIGKILLed:
make run starts it again and the open page goes live again. Then a second stream's evaluator is started
from the admin (a Celery task run by the demo's worker), and Ctrl-C (SIGINT)
must stop the feeder, beat, the worker, both evaluators with their Spark
JVMs, and the web server, saying so for each.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from streaming import bus
from tests.browser import server
from tests.browser.test_query_dashboard import CHROMIUM
from tests.faults.pipeline import wait_until
from tests.faults.services import answers, daphne_pid

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.redis, pytest.mark.slow,
              pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[1]
PANELS_WITHIN_SECONDS = 60


class Output:
    """The lines a process prints, read in a thread, with a wait for one matching a pattern."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines:
                if match := re.search(pattern, line):
                    return match
            time.sleep(0.2)
        raise AssertionError(f"no line matching {pattern!r} within {timeout} s:\n" + "\n".join(self.lines[-40:]))


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def daphne_pid_or_none(port: int) -> int | None:
    try:
        return daphne_pid(port)
    except LookupError:
        return None


def off_the_loop(function):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(function).result()


def test_the_demo_shows_every_panel_within_a_minute_and_ctrl_c_stops_everything(redis_client, redis_url, tmp_path):
    from kwmonitor.catalog.models import Schema
    from kwmonitor.streams.models import Evaluator, Stream

    port = server.free_port()
    env_file = tmp_path / "var" / ".env"
    env = dict(os.environ, DATABASE_URL=server.test_database_url(), REDIS_URL=redis_url, VAR_DIR=str(tmp_path / "var"),
               ENV_FILE=str(env_file), PORT=str(port), DEMO_OPS="3000")
    started = time.monotonic()
    run = subprocess.Popen([str(ROOT / "scripts" / "run.sh")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output = Output(run.stdout)
    try:
        output.wait_for(r"kwmonitor is up", 240)
        web_up = time.monotonic()
        written = env_file.read_text().splitlines()  # what a component started by hand reads
        period = env.get("ASC_MONITOR_PERIOD", "30")  # the environment's, else run.sh's for DEMO_RATE 20
        assert {f"REDIS_URL={redis_url}", f"ASC_MONITOR_PERIOD={period}", f"VAR_DIR={tmp_path / 'var'}",
                f"SPARK_LOCAL_IP={env.get('SPARK_LOCAL_IP', '127.0.0.1')}"} <= set(written)
        evaluator_id = int(output.wait_for(r"evaluator (\d+) of stream 'shop'", 10).group(1))
        deadline = time.monotonic() + 240
        while getattr(bus.read_heartbeat(redis_client, evaluator_id), "status", None) != "running":
            assert time.monotonic() < deadline, "the demo's evaluator did not start running"
            time.sleep(0.5)
        up = time.monotonic()
        password = (tmp_path / "var" / "demo" / "password").read_text().strip()
        base = f"http://127.0.0.1:{port}"
        with sync_playwright() as p:
            browser = p.chromium.launch(**CHROMIUM)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                page.goto(f"{base}/accounts/login/?next=/")
                page.fill("#id_username", "demo")
                page.fill("#id_password", password)
                page.click("input[type=submit]")
                stream_id = int(page.locator("tr[data-stream]").first.get_attribute("data-stream"))
                page.goto(f"{base}/streams/{stream_id}/")
                left = lambda: max(1.0, PANELS_WITHIN_SECONDS - (time.monotonic() - up)) * 1000  # noqa: E731
                expect(page.locator("#dead-letters tr").first).to_be_visible(timeout=left())
                expect(page.locator("#stat-processing")).not_to_have_text("–", timeout=left())
                expect(page.locator("#dropping-empty")).to_be_hidden(timeout=left())
                # the demo's relations have predicates on one attribute each: the monitor's checks keep their order
                expect(page.locator("#order-checks li").first).to_contain_text("kept by", timeout=left())
                average = page.locator(".stat.aggregate", has_text="average price")
                expect(average.locator('[data-field="value"]')).not_to_have_text("–", timeout=left())
                page.screenshot(path=str(tmp_path / "stream.png"), full_page=True)
                page.goto(f"{base}/sharing/")
                expect(page.locator(".sharing-classes")).to_contain_text("dress in texas, under $30", timeout=left())
                page.goto(f"{base}/")
                gifts = page.locator("tr[data-query]", has_text="gifts from Texans")
                gifts.locator("a").first.click()
                expect(page.locator(".result").first).to_be_visible(timeout=left())
                panels_after = time.monotonic() - up
                page.screenshot(path=str(tmp_path / "query.png"), full_page=True)

                # the web server dies: make run starts it again (scripts/keep_up.sh), and the page goes on
                killed = daphne_pid(port)
                os.kill(killed, signal.SIGKILL)
                web_back = wait_until(lambda: daphne_pid_or_none(port) not in (None, killed) and answers(base), 60,
                                      "make run to start the web server again", every=0.1)
                expect(page.locator("#feed-state")).to_have_text("live", timeout=30_000)

                def add_stream() -> int:
                    extra = Stream.objects.create(name="extra", schema=Schema.objects.get(name="ecommerce"))
                    return extra.evaluator.pk

                extra = off_the_loop(add_stream)
                page.goto(f"{base}/admin/streams/evaluator/")
                page.check(f'input[name=_selected_action][value="{extra}"]')
                page.select_option("select[name=action]", "start")
                page.click("button[name=index]")
                expect(page.locator(".messagelist")).to_contain_text("Asked the workers to start 1 evaluator")
            finally:
                browser.close()
        deadline = time.monotonic() + 60
        while not (pid := off_the_loop(lambda: Evaluator.objects.get(pk=extra).pid)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert pid, "the worker did not start the evaluator asked for in the admin"
        evaluators = off_the_loop(lambda: list(Evaluator.objects.exclude(pid=None).values_list("pid", flat=True)))
        assert len(evaluators) == 2 and all(group_alive(pid) for pid in evaluators)

        run.send_signal(signal.SIGINT)  # what Ctrl-C sends it
        run.wait(timeout=120)
        output.thread.join(timeout=10)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        for pid in off_the_loop(lambda: list(Evaluator.objects.exclude(pid=None).values_list("pid", flat=True))):
            if group_alive(pid):
                os.killpg(pid, signal.SIGKILL)
    text = "\n".join(output.lines)
    print(f"web up after {web_up - started:.1f} s, evaluator running after {up - started:.1f} s, every panel live "
          f"{panels_after:.1f} s after that ({up - started + panels_after:.1f} s after the start); the web server "
          f"SIGKILLed answered again {web_back:.1f} s later\n{text}")
    assert run.returncode == 0
    for component in ("the feeder", "Celery beat", "the Celery worker", "the web server"):
        assert re.search(rf"stopped {component} \(pid \d+\)", text), component
    assert "keep_up: " in (tmp_path / "var" / "log" / "web.log").read_text()  # the restart, in the web server's log
    for name in ("shop", "extra"):
        assert f"stopped the evaluator of {name} (pid" in text
    assert text.rstrip().endswith("stopped everything make run started")
    assert not group_alive(run.pid)  # daphne, Celery, the feeder
    assert not any(group_alive(pid) for pid in evaluators)  # each evaluator with its JVM
