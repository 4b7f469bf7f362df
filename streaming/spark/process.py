"""The evaluator process: plan, Spark query, heartbeats, status events, clean SIGTERM.

``python -m streaming.spark --evaluator ID --redis-url URL --checkpoint-dir DIR
[--master local[2]]`` is what the web tier's supervisor launches. It waits for
its plan in Redis, rebuilds the engines from the persisted tuples (reconciling
the published live sets), starts the streaming query from its checkpoint and
runs until SIGTERM/SIGINT (exit 0) or a failure of the query (exit 1). A
heartbeat (``bus.write_heartbeat``, every ~2 s, TTL 15 s) says it is alive; the
heartbeat thread also re-reads the plan between batches, so queries join and
leave while no data flows.
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

from streaming import bus
from streaming.evaluator import GroupEvaluator
from streaming.events import EvaluatorStatus
from streaming.spark import DEFAULT_TRIGGER_SECONDS

__all__ = ["HEARTBEAT_SECONDS", "REDIS_PATIENCE_SECONDS", "EvaluatorProcess", "build_parser", "main"]

HEARTBEAT_SECONDS = 2.0
# How long the evaluator waits for a Redis that went away (a restart) before its batch fails.
REDIS_PATIENCE_SECONDS = 60.0


class EvaluatorProcess:
    """Runs one evaluator; :meth:`run` returns the exit code."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.client = bus.connect(args.redis_url, retry_seconds=REDIS_PATIENCE_SECONDS)
        self.evaluator = GroupEvaluator(self.client, args.evaluator, sharing=args.sharing, asc_sequence=args.asc_sequence,
                                        asc_period=args.asc_period, asc_mu=args.asc_mu)
        self.stopping = threading.Event()
        self.status = "starting"
        self.detail = ""

    # -------------------------------------------------------------- status

    def _status(self) -> EvaluatorStatus:
        return EvaluatorStatus(
            evaluator=self.args.evaluator,
            stream=self.evaluator.stream_id or 0,
            status=self.status,
            pid=os.getpid(),
            host=socket.gethostname(),
            plan_version=self.evaluator.plan_version,
            detail=self.detail,
            query_errors={str(query): error for query, error in self.evaluator.query_errors.items()},
            ts=time.time(),
        )

    def set_status(self, status: str, detail: str = "") -> None:
        """Record a transition: heartbeat now and, once the stream is known, a status event."""
        self.status, self.detail = status, detail
        current = self._status()
        bus.write_heartbeat(self.client, current)
        if self.evaluator.stream_id is not None:
            bus.publish_stream_event(self.client, self.evaluator.stream_id, current)

    def _beat(self) -> None:
        while not self.stopping.wait(HEARTBEAT_SECONDS):
            try:
                bus.write_heartbeat(self.client, self._status())
                if self.status == "running" and self.evaluator.lock.acquire(blocking=False):
                    try:
                        self.evaluator.refresh_plan()
                    finally:
                        self.evaluator.lock.release()
            except Exception as exc:  # a Redis hiccup must not kill the heartbeat
                print(f"heartbeat: {exc!r}", file=sys.stderr)

    # -------------------------------------------------------------- run

    def _on_signal(self, signum: int, _frame) -> None:
        self.stopping.set()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        self.set_status("starting")
        beat = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        beat.start()
        while bus.read_plan(self.client, self.args.evaluator) is None:
            if self.stopping.wait(1.0):
                self.set_status("stopped", "stopped before a plan was written")
                return 0
        self.evaluator.start()
        self.set_status("starting", "plan loaded, starting Spark")

        from streaming.spark.job import BatchHandler, recover_committed, spark_session, start_query, warm_up

        spark = spark_session(self.args.master, app_name=f"kwmonitor-evaluator-{self.args.evaluator}")
        query = None
        handler = BatchHandler(self.evaluator, pipelined=not self.args.available_now)
        code = 0
        try:
            recovered = recover_committed(self.evaluator, self.args.checkpoint_dir, self.args.redis_url)
            if recovered:
                print(f"applied {recovered} ops Spark had committed before the last stop", file=sys.stderr)
            warm_up(spark, self.evaluator)
            query = start_query(
                spark,
                self.evaluator,
                self.args.redis_url,
                self.args.checkpoint_dir,
                trigger_seconds=self.args.trigger_seconds,
                available_now=self.args.available_now,
                max_rows=self.args.max_rows_per_batch or None,
                handler=handler,
            )
            self.set_status("running")
            while not self.stopping.is_set():
                if query.awaitTermination(0.5):
                    error = query.exception()
                    if error is not None:
                        raise RuntimeError(str(error))
                    break
            self.set_status("stopping")
            query.stop()
            handler.close()
        except Exception as exc:
            # After SIGTERM to the whole process group the JVM may be gone first: still a clean stop.
            if not self.stopping.is_set():
                code = 1
                self.set_status("failed", f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            self.stopping.set()
            if query is not None:
                _quietly(query.stop)
            _quietly(handler.close)
            _quietly(spark.stop)
        if code == 0:
            self.set_status("stopped")
        return code


def _quietly(step) -> None:
    """Run a shutdown step; report, never raise (the JVM may already be gone)."""
    try:
        step()
    except Exception as exc:
        print(f"shutting down: {exc!r}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m streaming.spark", description="run one evaluator (Spark Structured Streaming)")
    parser.add_argument("--evaluator", type=int, required=True, help="evaluator id (its plan is read from Redis)")
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--checkpoint-dir", required=True, help="Spark checkpoint directory of this evaluator")
    parser.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    parser.add_argument(
        "--sharing", default="widen", choices=["widen", "match"],
        help="widen (default): one class per keyword set; match: share only where a class serves a query unchanged",
    )
    parser.add_argument("--asc-sequence", default="hybrid", choices=["hybrid", "macro"],
                        help="ASC evaluation sequence for selection predicates")
    parser.add_argument("--asc-period", type=int, default=10_000, help="ASC monitor period (tuples per relation)")
    parser.add_argument("--asc-mu", type=float, default=0.1, help="ASC rearrangement threshold")
    parser.add_argument("--trigger-seconds", type=float, default=DEFAULT_TRIGGER_SECONDS,
                        help=f"micro-batch interval (default {DEFAULT_TRIGGER_SECONDS})")
    parser.add_argument("--max-rows-per-batch", type=int, default=20_000,
                        help="cap on ops per micro-batch (0: none); keeps batches steady when catching up")
    parser.add_argument("--available-now", action="store_true", help="process what the source holds, then exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return EvaluatorProcess(build_parser().parse_args(argv)).run()
