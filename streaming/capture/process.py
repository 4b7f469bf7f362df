"""The capture of a PostgreSQL-sourced stream, as the supervisor runs it (``settings.CAPTURE_COMMAND``).

``python -m streaming.capture --evaluator ID --plan-evaluator PRIMARY --redis-url URL --dsn-env NAME
--publication PUB --slot SLOT --landing DIR --state FILE`` waits for the
primary evaluator's plan (the stream and its schema), reads the DSN from the
environment variable ``NAME`` (never from its command line, which the
database records and ``ps`` shows), and captures the publication into the
stream's landing directory through the ingest's landing writer
(:class:`~streaming.capture.sinks.LandingSink`). Like an evaluator it beats
every two seconds (``bus.write_heartbeat``), publishes its status changes on
the stream's events, and stops cleanly on SIGTERM; its progress (phase, LSN,
bytes and seconds behind, ops) is in the field ``capture`` of its state hash
(``bus.Keys.evaluator_state``), which the stream page shows.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from typing import Sequence

import orjson
import psycopg

from streaming import bus
from streaming.evaluator_state import StateField
from streaming.events import EvaluatorStatus
from streaming.sharing.properties import EvaluatorPlan
from streaming.sources import LandingWriter

from .capture import Capture, CaptureConfig, CaptureProgress
from .catalog import CatalogError
from . import CaptureError
from .sinks import LandingSink
from .state import CaptureState, StateBusy

__all__ = ["HEARTBEAT_SECONDS", "CaptureProcess", "build_parser", "main"]

HEARTBEAT_SECONDS = 2.0
#: How long a sealed batch may wait for more transactions: the evaluator's reader polls every 0.25 s, so
#: sealing each single-row transaction alone would only make more landing files.
LINGER_SECONDS = 0.2


class CaptureProcess:
    """One stream's capture: plan, DSN, state, heartbeats, status events, progress."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.client = bus.connect(args.redis_url, retry_seconds=60.0)
        self.stopping = threading.Event()
        self.capture: Capture | None = None
        self.stream_id = 0
        self.plan_version = 0
        self.status, self.detail = "starting", ""
        self._rate = (time.monotonic(), 0)

    def _heartbeat(self) -> EvaluatorStatus:
        return EvaluatorStatus(evaluator=self.args.evaluator, stream=self.stream_id, status=self.status,
                               pid=os.getpid(), host=socket.gethostname(), plan_version=self.plan_version,
                               detail=self.detail, ts=time.time())

    def set_status(self, status: str, detail: str = "") -> None:
        self.status, self.detail = status, detail
        beat = self._heartbeat()
        bus.write_heartbeat(self.client, beat)
        if self.stream_id:
            bus.publish_stream_event(self.client, self.stream_id, beat)

    def _beat(self) -> None:
        while not self.stopping.wait(HEARTBEAT_SECONDS):
            try:
                bus.write_heartbeat(self.client, self._heartbeat())
            except Exception as exc:  # a Redis hiccup must not kill the heartbeat
                print(f"heartbeat: {exc!r}", file=sys.stderr)

    def on_progress(self, progress: CaptureProgress) -> None:
        """Publish where the capture is; the first report of a phase is a status change."""
        began, ops = self._rate
        now = time.monotonic()
        rate = (progress.ops - ops) / (now - began) if now > began and progress.ops >= ops else 0.0
        self._rate = (now, progress.ops)
        detail = (f"copying the snapshot: {progress.ops} rows" if progress.phase == "snapshot"
                  else f"streaming the slot {self.args.slot}: {progress.bytes_behind} bytes of WAL behind")
        try:
            if self.status != "running":
                self.set_status("running", detail)
            self.detail = detail
            self.client.hset(bus.Keys.evaluator_state(self.args.evaluator), mapping={
                StateField.CAPTURE: orjson.dumps({**progress.to_json(), "notes": progress.notes,
                                              "ops_per_second": round(rate, 1), "ts": time.time()}),
                StateField.ROWS_PER_SECOND: round(rate, 1)})
        except Exception as exc:  # progress is shown, not needed: the capture goes on without Redis
            print(f"progress: {exc!r}", file=sys.stderr)

    def _plan(self) -> EvaluatorPlan | None:
        while (plan := bus.read_plan(self.client, self.args.plan_evaluator)) is None:
            if self.stopping.wait(1.0):
                return None
        return plan

    def _on_signal(self, _signum: int, _frame: object) -> None:
        self.stopping.set()
        if self.capture is not None:
            self.capture.stop()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        self.set_status("starting")
        threading.Thread(target=self._beat, name="heartbeat", daemon=True).start()
        plan = self._plan()
        if plan is None:
            self.set_status("stopped", "stopped before a plan was written")
            return 0
        self.stream_id, self.plan_version = plan.stream.id, plan.version
        try:
            self._capture(plan)
        except (CaptureError, CatalogError, StateBusy, psycopg.Error, OSError) as exc:
            if not self.stopping.is_set():
                self.set_status("failed", f"{type(exc).__name__}: {exc}"[:2000])
                return 1
        finally:
            self.stopping.set()
        self.set_status("stopped")
        return 0

    def _capture(self, plan: EvaluatorPlan) -> None:
        name = self.args.dsn_env
        dsn = os.environ.get(name, "")
        if not dsn:
            raise CaptureError(f"the environment variable {name} holding the DSN is not set for this process "
                               "(set it for the Celery worker, or in var/.env)")
        state = CaptureState(self.args.state)
        try:
            writer = LandingWriter(self.client, self.stream_id, self.args.landing)
            config = CaptureConfig(dsn=dsn, publication=self.args.publication, slot=self.args.slot,
                                   linger_seconds=LINGER_SECONDS)
            self.capture = Capture(config, LandingSink(writer, state), schema=plan.stream.schema_,
                                   on_progress=self.on_progress)
            if not self.stopping.is_set():
                self.capture.run()
        finally:
            state.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m streaming.capture",
                                     description="capture a PostgreSQL publication into a stream's landing directory")
    parser.add_argument("--evaluator", type=int, required=True, help="its own id (heartbeat and state hash)")
    parser.add_argument("--plan-evaluator", type=int, required=True,
                        help="the stream's primary evaluator, whose plan names the stream and its schema")
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--dsn-env", required=True, help="the environment variable holding the DSN")
    parser.add_argument("--publication", required=True)
    parser.add_argument("--slot", required=True)
    parser.add_argument("--landing", required=True, help="the stream's landing directory")
    parser.add_argument("--state", required=True, help="the capture's state file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return CaptureProcess(build_parser().parse_args(argv)).run()
