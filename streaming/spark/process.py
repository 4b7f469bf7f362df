"""The evaluator process: plan, Spark query, heartbeats, status events, clean SIGTERM.

``python -m streaming.spark --evaluator ID --redis-url URL --checkpoint-dir DIR
[--master local[2]]`` is what the web tier's supervisor launches. It waits for
its plan in Redis, rebuilds the engines from the persisted tuples (reconciling
the published live sets), starts the streaming query from its checkpoint and
runs until SIGTERM/SIGINT (exit 0) or a failure of the query (exit 1). A
heartbeat (``bus.write_heartbeat``, every ~2 s, TTL 15 s) says it is alive and
whether it makes progress: an evaluator's carries its applied seq, the newest
seq its source holds and when it last finished a batch or found nothing
waiting, from which the web tier and the supervisor tell a stalled apply loop
(``EvaluatorStatus.stalled_for``). The heartbeat thread also re-reads the plan
between batches, so queries join and leave while no data flows.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Sequence

from streaming import bus
from streaming.evaluator import GroupEvaluator
from streaming.events import EvaluatorStatus
from streaming.sources import input_seq
from streaming.spark import DEFAULT_TRIGGER_SECONDS

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["HEARTBEAT_SECONDS", "REDIS_PATIENCE_SECONDS", "SparkProcess", "EvaluatorProcess", "build_parser", "main"]

HEARTBEAT_SECONDS = 2.0
# How long the evaluator waits for a Redis that went away (a restart) before its batch fails.
REDIS_PATIENCE_SECONDS = 60.0


class SparkProcess(ABC):
    """One kwmonitor Spark application: plan wait, heartbeats, status events, clean SIGTERM.

    Subclasses say which plan they wait for (:meth:`plan_id`), prepare
    their state from it (:meth:`prepare`) and start their streaming query
    (:meth:`start_query`); :meth:`run` returns the exit code.
    """

    app_name = "kwmonitor"

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.client = bus.connect(args.redis_url, retry_seconds=REDIS_PATIENCE_SECONDS)
        self.stopping = threading.Event()
        self.status = "starting"
        self.detail = ""

    # -------------------------------------------------------------- what a subclass says

    def plan_id(self) -> int:
        return self.args.evaluator

    @abstractmethod
    def stream_id(self) -> int | None:
        """The stream, once the plan is loaded."""

    @abstractmethod
    def plan_version(self) -> int:
        """The version of the plan the process runs (0: none yet)."""

    def query_errors(self) -> dict[str, str]:
        return {}

    def progress(self) -> dict[str, Any]:
        """The heartbeat's progress fields (``EvaluatorStatus``); none for a process without an apply loop."""
        return {}

    def prepare(self) -> None:
        """Load the plan and any persisted state (before Spark starts)."""

    def between_batches(self) -> None:
        """Called by the heartbeat thread while running."""

    def source_changed(self) -> bool:
        """Whether the plan names another source than the running query reads (it is then restarted)."""
        return False

    @abstractmethod
    def start_query(self, spark) -> StreamingQuery:
        """Start the process's streaming query on ``spark``."""

    def close(self) -> None:
        """Finish work in flight after the query stopped."""

    # -------------------------------------------------------------- status

    def _status(self) -> EvaluatorStatus:
        return EvaluatorStatus(
            evaluator=self.args.evaluator,
            stream=self.stream_id() or 0,
            status=self.status,
            pid=os.getpid(),
            host=socket.gethostname(),
            plan_version=self.plan_version(),
            detail=self.detail,
            query_errors=self.query_errors(),
            ts=time.time(),
            **self.progress(),
        )

    def set_status(self, status: str, detail: str = "") -> None:
        """Record a transition: heartbeat now and, once the stream is known, a status event."""
        self.status, self.detail = status, detail
        current = self._status()
        bus.write_heartbeat(self.client, current)
        if self.stream_id() is not None:
            bus.publish_stream_event(self.client, current.stream, current)

    def _beat(self) -> None:
        while not self.stopping.wait(HEARTBEAT_SECONDS):
            try:
                bus.write_heartbeat(self.client, self._status())
                if self.status == "running":
                    self.between_batches()
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
        while bus.read_plan(self.client, self.plan_id()) is None:
            if self.stopping.wait(1.0):
                self.set_status("stopped", "stopped before a plan was written")
                return 0
        self.prepare()
        self.set_status("starting", "plan loaded, starting Spark")

        from streaming.spark.job import spark_session

        spark = spark_session(self.args.master, app_name=f"{self.app_name}-{self.args.evaluator}")
        query = None
        code = 0
        try:
            query = self.start_query(spark)
            self.set_status("running")
            while not self.stopping.is_set():
                if query.awaitTermination(0.5):
                    error = query.exception()
                    if error is not None:
                        raise RuntimeError(str(error))
                    break
                if self.source_changed():  # the stream's pre-processor was switched on or off
                    self.set_status("starting", "the stream's source changed: restarting the streaming query")
                    query.stop()
                    self.close()
                    query = self.start_query(spark)
                    self.set_status("running")
            self.set_status("stopping")
            query.stop()
            self.close()
        except Exception as exc:
            # After SIGTERM to the whole process group the JVM may be gone first: still a clean stop.
            if not self.stopping.is_set():
                code = 1
                self.set_status("failed", f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            self.stopping.set()
            if query is not None:
                _quietly(query.stop)
            _quietly(self.close)
            _quietly(spark.stop)
        if code == 0:
            self.set_status("stopped")
        return code


class EvaluatorProcess(SparkProcess):
    """Runs one evaluator: rebuilds its engines from the persisted tuples, then its streaming query."""

    app_name = "kwmonitor-evaluator"

    def __init__(self, args: argparse.Namespace):
        super().__init__(args)
        self.evaluator = GroupEvaluator(self.client, args.evaluator, sharing=args.sharing, asc_sequence=args.asc_sequence,
                                        asc_period=args.asc_period, asc_mu=args.asc_mu)
        self.handler = None
        self.caught_up_at: float | None = None
        self.moved_at: float | None = None  # when a beat last saw the apply loop on another op
        self.last_applying: int | None = None

    def stream_id(self) -> int | None:
        return self.evaluator.session.stream_id

    def plan_version(self) -> int:
        return self.evaluator.session.plan_version

    def query_errors(self) -> dict[str, str]:
        return {str(query): error for query, error in self.evaluator.session.query_errors.items()}

    def progress(self) -> dict[str, Any]:
        """Applied and waiting seqs, once Spark handed the running query a batch or while the apply loop works
        (a restart applying what Spark had committed); progress is the last batch that arrived from Spark or
        finished, the last beat that found the apply loop on another op than the beat before or nothing
        waiting. So a slow batch whose ops move is not stalled, one op that holds it is, and a Spark slow to
        plan its first batch (a loaded machine) is not taken for a stalled apply loop."""
        evaluator, plan = self.evaluator, self.evaluator.session.plan
        applied, applying = evaluator.saved_seq, evaluator.session.applying_seq
        arrived_at = self.handler.arrived_at if self.handler is not None else None
        if plan is None or (applying is None and (self.status != "running" or arrived_at is None)):
            return {}
        now = time.time()
        newest = input_seq(self.client, plan.stream.id, plan.stream.source)
        if newest <= applied and applying is None:
            self.caught_up_at = now
        if applying is not None and applying != self.last_applying:
            self.moved_at = now
        self.last_applying = applying
        progress_at = max(t for t in (evaluator.progress_at, arrived_at, self.caught_up_at, self.moved_at)
                          if t is not None)
        return {"applied_seq": applied, "input_seq": newest, "progress_at": progress_at, "applying_seq": applying}

    def prepare(self) -> None:
        self.evaluator.start()

    def between_batches(self) -> None:
        if self.evaluator.lock.acquire(blocking=False):
            try:
                self.evaluator.refresh_plan()
            finally:
                self.evaluator.lock.release()

    def source_changed(self) -> bool:
        plan = self.evaluator.session.plan
        if self.handler is None or plan is None:
            return False
        running, wanted = self.handler.source, plan.stream.source
        return (running.get("kind"), running.get("path")) != (wanted.get("kind"), wanted.get("path"))

    def start_query(self, spark) -> StreamingQuery:
        from streaming.spark.job import BatchHandler, catch_up_archived, recover_committed, start_query, warm_up

        first = self.handler is None
        with self.evaluator.lock:
            self.evaluator.refresh_plan()
        self.handler = BatchHandler(self.evaluator, pipelined=not self.args.available_now)
        recovered = recover_committed(self.evaluator, self.args.checkpoint_dir, self.args.redis_url)
        if recovered:
            print(f"applied {recovered} ops Spark had committed before the last stop", file=sys.stderr)
        caught_up = catch_up_archived(self.evaluator)
        if caught_up:
            print(f"applied {caught_up} archived ops the pre-processor's stream had carried", file=sys.stderr)
        if first:  # a restart on another source finds the executors warm
            warm_up(spark, self.evaluator)
        return start_query(
            spark,
            self.evaluator,
            self.args.redis_url,
            self.args.checkpoint_dir,
            trigger_seconds=self.args.trigger_seconds,
            available_now=self.args.available_now,
            max_rows=self.args.max_rows_per_batch or None,
            handler=self.handler,
        )

    def close(self) -> None:
        if self.handler is not None:
            self.handler.close()


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
