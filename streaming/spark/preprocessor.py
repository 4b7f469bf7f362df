"""The stream's pre-processor as a Spark Structured Streaming job: raw landing files -> derived landing files.

Each micro-batch of the raw source (``kwlanding``) is collected on the driver
and turned into derived records by one :class:`~streaming.preprocess.Preprocessor`
(stateful: the keys of kept and dropped inserts), whose needs are merged from
the stream's evaluator plan in Redis at each batch boundary (a new plan
version applies from the next batch on). The records go to one derived
landing file named by the batch's first seq, renamed into place after its
state file, so the derived directory is read by the consumers' own
``kwlanding`` source unchanged (every seq is there: dropped ops are ticks).
The vocabulary of each needs version is written to the Redis hash
``bus.Keys.stream_vocabularies`` before any record of that version.

A batch replayed after a crash is derived again from the state saved with
the last file written (lines at or below its seq are skipped), so it writes
the same records under the same name.

Run as a process (``python -m streaming.spark.preprocessor --evaluator ID
--plan-evaluator PRIMARY --out DIR ...``, what the supervisor launches for a
stream with ``preprocess``), it beats like an evaluator, reads the raw source
of the primary's plan (``source["raw"]`` of a derived source), and keeps its
last derived seq in its own state hash (``bus.Keys.evaluator_state(ID)``,
field ``seq``): the raw directory's files are archived once it has derived
them. It publishes the dead letters of the raw stream, each once: they go
out in one MULTI with that seq, before the batch's files are written, and a
replayed batch publishes none at or below it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Sequence

import orjson
import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming import bus
from streaming.evaluator_state import StateField
from streaming.preprocess import Preprocessor, StreamNeeds
from streaming.schema import Schema
from streaming.sharing.properties import EvaluatorPlan
from streaming.events import DEAD_LETTER_LINE_CHARS, DeadLetter
from streaming.sources import SourceError, applied_seq_of, input_kind, landing_file_name, line_seq, write_atomic
from streaming.spark import DEFAULT_TRIGGER_SECONDS
from streaming.spark.job import source_frame
from streaming.spark.process import SparkProcess

__all__ = ["STATE_FILE", "PreprocessHandler", "start_preprocessor", "raw_source", "PreprocessorProcess", "main"]

STATE_FILE = ".preprocessor-state.json"


def _seq(line: str) -> int:
    """A stored line's seq; -1 for a line without one (ingest stamps every line it lands: never here)."""
    try:
        return line_seq(line)
    except SourceError:
        return -1


class PreprocessHandler:
    """The ``foreachBatch`` function of the pre-processor; with ``state_id`` (the process's evaluator
    id) it keeps its applied seq in that state hash and publishes the dead letters."""

    def __init__(self, client: redis.Redis, plan_evaluator: int, out_dir: str | Path, state_id: int | None = None):
        self.client = client
        self.plan_evaluator = plan_evaluator
        self.state_key = bus.Keys.evaluator_state(state_id) if state_id is not None else None
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        plan = self.plan()
        self.stream_id = plan.stream.id
        self.pre = Preprocessor(Schema.from_dict(plan.stream.schema_), StreamNeeds.of_plan(plan))
        self.last_seq = -1
        state = self.out / STATE_FILE
        if state.exists():
            obj = orjson.loads(state.read_bytes())
            self.pre.restore(obj["keys"])
            self.last_seq = obj["last_seq"]
        self._publish_vocabulary()

    def _publish_vocabulary(self) -> None:
        needs = self.pre.needs
        self.client.hset(bus.Keys.stream_vocabularies(self.stream_id), str(needs.version),
                         orjson.dumps(needs.vocabulary))

    def plan(self) -> EvaluatorPlan:
        """The plan the needs are merged from (the stream's primary evaluator's)."""
        plan = bus.read_plan(self.client, self.plan_evaluator)
        if plan is None:
            raise RuntimeError(f"evaluator {self.plan_evaluator} has no plan in Redis")
        return plan

    def __call__(self, frame: DataFrame, _batch_id: int) -> None:
        started = time.perf_counter()
        plan = self.plan()
        if plan.version != self.pre.needs.version:
            self.pre.follow(StreamNeeds.of_plan(plan))
            self._publish_vocabulary()
        lines = [line for line in frame.toArrow().column("value").to_pylist() if line and line.strip()]
        numbered = sorted((seq, line) for seq, line in ((_seq(line), line) for line in lines) if seq > self.last_seq)
        if not numbered:
            return
        records = [self.pre.derive(line) for _, line in numbered]
        first = numbered[0][0]
        self.last_seq = numbered[-1][0]
        if self.state_key is not None:
            self._publish(numbered, records)
        write_atomic(self.out / STATE_FILE, orjson.dumps({"last_seq": self.last_seq, "keys": self.pre.state()}))
        write_atomic(self.out / landing_file_name(first), b"\n".join(records) + b"\n")
        if self.state_key is not None:  # the stream page's rate and batch duration of this process
            seconds = time.perf_counter() - started
            self.client.hset(self.state_key, mapping={
                StateField.BATCH_MS: round(seconds * 1000, 1),
                StateField.ROWS_PER_SECOND: round(len(numbered) / max(seconds, 1e-6), 1)})

    def _publish(self, numbered: list[tuple[int, str]], records: list[bytes]) -> None:
        """The batch's dead letters not yet published, with the last seq, in one MULTI."""
        assert self.state_key is not None
        published = applied_seq_of(self.client, self.state_key)
        now = time.time()
        dead = []
        for (seq, line), record in zip(numbered, records):
            reason = orjson.loads(record).get("x") if seq > published and b'"x":' in record else None
            if reason is not None:
                dead.append(DeadLetter(stream=self.stream_id, seq=seq if seq >= 0 else None,
                                       line=line[:DEAD_LETTER_LINE_CHARS], reason=reason, ts=now))
        with self.client.pipeline(transaction=True) as pipe:
            for letter in dead:
                bus.publish_stream_event(pipe, self.stream_id, letter)
            pipe.hset(self.state_key, StateField.SEQ, max(self.last_seq, published))
            pipe.execute()


def start_preprocessor(spark: SparkSession, handler: PreprocessHandler, source: dict, redis_url: str,
                       checkpoint_dir: str | Path, available_now: bool = False,
                       trigger_seconds: float = 1.0) -> StreamingQuery:
    """Start the pre-processor's streaming query over the raw ``source`` (a landing directory)."""
    frame = source_frame(spark, source, redis_url)
    writer = (frame.writeStream.foreachBatch(handler)
              .option("checkpointLocation", str(Path(checkpoint_dir) / "query"))
              .queryName(f"preprocessor-{handler.stream_id}"))
    writer = (writer.trigger(availableNow=True) if available_now
              else writer.trigger(processingTime=f"{int(trigger_seconds * 1000)} milliseconds"))
    return writer.start()


def raw_source(plan_source: dict) -> dict:
    """The raw source a pre-processor reads: the plan's own, or the ``raw`` one of a derived source."""
    return input_kind(plan_source).raw(plan_source)


class PreprocessorProcess(SparkProcess):
    """Runs a stream's pre-processor (the supervisor's ``PREPROCESSOR_COMMAND``)."""

    app_name = "kwmonitor-preprocessor"

    def __init__(self, args: argparse.Namespace):
        super().__init__(args)
        self.handler: PreprocessHandler | None = None

    def plan_id(self) -> int:
        return self.args.plan_evaluator

    def stream_id(self) -> int | None:
        return self.handler.stream_id if self.handler is not None else None

    def plan_version(self) -> int:
        return self.handler.pre.needs.version if self.handler is not None else 0

    def prepare(self) -> None:
        self.handler = PreprocessHandler(self.client, self.args.plan_evaluator, self.args.out, self.args.evaluator)

    def start_query(self, spark) -> StreamingQuery:
        assert self.handler is not None
        source = raw_source(self.handler.plan().stream.source)
        return start_preprocessor(spark, self.handler, source, self.args.redis_url, self.args.checkpoint_dir,
                                  available_now=self.args.available_now, trigger_seconds=self.args.trigger_seconds)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m streaming.spark.preprocessor",
                                     description="run a stream's pre-processor (Spark Structured Streaming)")
    parser.add_argument("--evaluator", type=int, required=True, help="its own id (heartbeat and state hash)")
    parser.add_argument("--plan-evaluator", type=int, required=True,
                        help="the stream's primary evaluator, whose plan gives the needs")
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--out", required=True, help="the derived landing directory it writes")
    parser.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    parser.add_argument("--trigger-seconds", type=float, default=DEFAULT_TRIGGER_SECONDS,
                        help=f"micro-batch interval (default {DEFAULT_TRIGGER_SECONDS})")
    parser.add_argument("--available-now", action="store_true", help="derive what the source holds, then exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return PreprocessorProcess(build_parser().parse_args(argv)).run()


if __name__ == "__main__":
    raise SystemExit(main())
