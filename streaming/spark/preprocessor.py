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
"""

from __future__ import annotations

from pathlib import Path

import orjson
import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming import bus
from streaming.preprocess import Preprocessor, StreamNeeds
from streaming.schema import Schema
from streaming.sharing.properties import EvaluatorPlan
from streaming.sources import SourceError, landing_file_name, line_seq, write_atomic
from streaming.spark.job import source_frame

__all__ = ["STATE_FILE", "PreprocessHandler", "start_preprocessor"]

STATE_FILE = ".preprocessor-state.json"


def _seq(line: str) -> int:
    """A stored line's seq; -1 for a line without one (ingest stamps every line it lands: never here)."""
    try:
        return line_seq(line)
    except SourceError:
        return -1


class PreprocessHandler:
    """The ``foreachBatch`` function of the pre-processor."""

    def __init__(self, client: redis.Redis, plan_evaluator: int, out_dir: str | Path):
        self.client = client
        self.plan_evaluator = plan_evaluator
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        plan = self._plan()
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

    def _plan(self) -> EvaluatorPlan:
        doc = bus.read_plan(self.client, self.plan_evaluator)
        if doc is None:
            raise RuntimeError(f"evaluator {self.plan_evaluator} has no plan in Redis")
        return EvaluatorPlan.model_validate(doc)

    def __call__(self, frame: DataFrame, _batch_id: int) -> None:
        plan = self._plan()
        if plan.version != self.pre.needs.version:
            self.pre.widen(StreamNeeds.of_plan(plan))
            self._publish_vocabulary()
        lines = [line for line in frame.toArrow().column("value").to_pylist() if line and line.strip()]
        numbered = sorted((seq, line) for seq, line in ((_seq(line), line) for line in lines) if seq > self.last_seq)
        if not numbered:
            return
        records = [self.pre.derive(line) for _, line in numbered]
        first = numbered[0][0]
        self.last_seq = numbered[-1][0]
        write_atomic(self.out / STATE_FILE, orjson.dumps({"last_seq": self.last_seq, "keys": self.pre.state()}))
        write_atomic(self.out / landing_file_name(first), b"\n".join(records) + b"\n")


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
