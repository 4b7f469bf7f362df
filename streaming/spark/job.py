"""The Structured Streaming query of an evaluator: source -> executors -> driver.

Per micro-batch (``foreachBatch`` on the driver): the plan is re-read, the
batch's op lines are parsed, validated, run through the selection constructs
and classified on the executors (``mapInArrow`` with the current plan's
schema, keywords, ASC indexes and sequences), collected as Arrow, and handed to
:class:`~streaming.evaluator.GroupEvaluator`, which feeds the dropping
monitors, applies the ops in ``seq`` order and publishes. Spark's checkpoint keeps the source
offsets; the evaluator's own state lives in Redis (see ``streaming.evaluator``).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming import bus
from streaming.evaluator import GroupEvaluator
from streaming.parsed import parse_stored_line
from streaming.sources import input_kind, landing_file_name
from streaming.spark import DEFAULT_TRIGGER_SECONDS
from streaming.spark.landing_source import MIN_PARTITION_OPS, LandingOpsSource
from streaming.spark.parse import PARSED_SCHEMA, collect_ops, make_parser
from streaming.spark.redis_source import RedisOpsSource

__all__ = ["WARM_UP_BATCHES", "WARM_UP_LINES", "PROJECT_ROOT", "spark_session", "warm_up", "source_frame",
           "BatchHandler", "query_checkpoint", "committed_offset", "recover_committed",
           "catch_up_archived", "start_query"]

WARM_UP_BATCHES = 3
WARM_UP_LINES = MIN_PARTITION_OPS  # a file per core, each its own partition


# Spark's default checkpoint writer (FileContext based) takes ~30 ms per small log file on a
# local disk, the FileSystem based one ~10 ms, with the same write-temp-then-rename protocol
# (atomic on a local or HDFS path). A micro-batch writes two (offsets, commit), three with
# Spark's file source: with that source, at 5k ops/s, the batch cycle went from 354 to 261 ms
# (benchmarks/results/README.md).
CHECKPOINT_FILE_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


# The folder holding the ``streaming`` package. An executor's Python worker starts in the
# executor's own directory (on a standalone cluster, below the worker's work dir), not in the
# driver's, so it finds the package only through PYTHONPATH; the driver's interpreter
# (PYSPARK_PYTHON) is the executors' too. Both are paths of this host: a worker on another
# host needs the project and its virtualenv at the same paths.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The driver's log4j configuration (warnings and errors, without Spark's start-up notes).
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def spark_session(master: str = "local[2]", app_name: str = "kwmonitor-evaluator") -> SparkSession:
    """A Spark session for an evaluator (or the tests): no UI, small shuffles, our Python and
    package on the executors (local or on a cluster), fast checkpoint writes."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # Adaptive query execution does not apply to streaming queries, the evaluator's only ones (left on,
        # Spark warns at every start that it turns it off).
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        .config("spark.sql.streaming.checkpointFileManagerClass", CHECKPOINT_FILE_MANAGER)
        .config("spark.executorEnv.PYTHONPATH", str(PROJECT_ROOT))
    )
    if os.environ.get("SPARK_CORES_MAX"):  # a standalone cluster: leave cores for the stream's other processes
        builder = builder.config("spark.cores.max", os.environ["SPARK_CORES_MAX"])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(LandingOpsSource)
    spark.dataSource.register(RedisOpsSource)
    return spark


def warm_up(spark: SparkSession, evaluator: GroupEvaluator, batches: int = WARM_UP_BATCHES,
            lines: int = WARM_UP_LINES) -> None:
    """Run the micro-batch path on throwaway lines before the real query starts.

    A streaming query over a scratch landing directory (``batches``
    micro-batches of one file of ``lines`` op-sized lines per core, so every
    core's Python worker takes part) goes through the same landing source,
    ``mapInArrow`` parse and Arrow collect as a real batch, so the Python
    workers are up and the JVM has planned and compiled that path before ops
    arrive: a slow first batch leaves a backlog that later batches, each
    bigger and slower, take seconds to drain. The lines are rejected by the
    parser; nothing reaches the evaluator.
    """
    spec = evaluator.session.parse_spec
    if spec is None:
        raise RuntimeError("the evaluator has no plan")
    parser = make_parser(spec.schema, list(spec.keywords), spec.selection)

    def parse_only(frame: DataFrame, _batch_id: int) -> None:
        collect_ops(frame.mapInArrow(parser, PARSED_SCHEMA).toArrow())

    parallelism = spark.sparkContext.defaultParallelism
    pad = "x" * 160
    with tempfile.TemporaryDirectory(prefix="kwmonitor-warm-up-") as scratch:
        landing = Path(scratch) / "landing"
        landing.mkdir()
        for f in range(batches * parallelism):
            text = "".join(f'{{"seq":{f * lines + i},"op":"warm-up","pad":"{pad}"}}\n' for i in range(lines))
            (landing / landing_file_name(f * lines)).write_text(text, encoding="utf-8")
        query = (
            source_frame(spark, {"kind": "landing", "path": str(landing)}, "", max_rows=lines * parallelism)
            .writeStream.foreachBatch(parse_only)
            .option("checkpointLocation", str(Path(scratch) / "checkpoint"))
            .queryName("evaluator-warm-up")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()


def source_frame(spark: SparkSession, source: dict[str, Any], redis_url: str, max_rows: int | None = None,
                 applied_key: str | None = None) -> DataFrame:
    """The streaming DataFrame (one ``value`` string column) of a plan's ``source``, read by its kind's
    reader (``streaming.sources``; ``applied_key``: the evaluator's state hash, whose unapplied input the
    source keeps). ``max_rows`` caps a micro-batch (whole landing files, at least one)."""
    reader = input_kind(source).reader(spark, source, redis_url, applied_key)
    if max_rows:
        reader = reader.option("maxRows", str(max_rows))
    return reader.load()


class BatchHandler:
    """The ``foreachBatch`` function: executors parse, the evaluator applies and publishes.

    ``pipelined``: the evaluator applies a batch on a worker thread while
    Spark plans, reads and parses the next one (at most one batch waits), so
    a batch costs the longer of the two stages instead of their sum. Spark
    then commits a batch before it is applied; the sources keep a batch's
    input until the evaluator has applied it (``applied_key`` of
    :func:`source_frame`) and :func:`recover_committed` applies it at the
    next start. Otherwise each batch is applied before ``foreachBatch`` returns.
    """

    def __init__(self, evaluator: GroupEvaluator, pipelined: bool = False):
        self.evaluator = evaluator
        self.batches = 0
        self.arrived_at: float | None = None  # when Spark last handed over a batch (unix time)
        self.pipelined = pipelined
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="apply") if pipelined else None
        self._pending: Future | None = None
        # what the query was started on: a plan may name another source before the query restarts on it
        plan = evaluator.session.plan
        self.source = dict(plan.stream.source) if plan is not None else {}
        self.row_reader = input_kind(self.source).row_reader(evaluator.client) if self.source else None

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        self.arrived_at = time.time()
        evaluator = self.evaluator
        if self._pool is None:
            with evaluator.lock:
                evaluator.refresh_plan()
        spec = evaluator.session.parse_spec
        assert spec is not None and evaluator.session.plan is not None
        started = time.perf_counter()
        if self.row_reader is not None:
            lines = frame.toArrow().column("value").to_pylist()
            rows, version = self.row_reader.rows(evaluator.session, lines, spec.version)
            selection_stats: list = []
        else:
            parser = make_parser(spec.schema, list(spec.keywords), spec.selection)
            table = frame.mapInArrow(parser, PARSED_SCHEMA).toArrow()
            rows, selection_stats = collect_ops(table)
            version = spec.version
        parse_ms = (time.perf_counter() - started) * 1000
        apply = functools.partial(evaluator.apply_batch, batch_id, rows, parse_ms=parse_ms,
                                  selection_stats=selection_stats, parsed_with_version=version)
        if self._pool is None:
            apply()
        else:
            self.drain()
            self._pending = self._pool.submit(apply)
        self.batches += 1

    def drain(self) -> None:
        """Wait for the batch being applied (re-raising its error)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """Finish the batch being applied and stop the worker."""
        try:
            self.drain()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)


def query_checkpoint(checkpoint_dir: str | Path, source: dict[str, Any]) -> Path:
    """The streaming query's checkpoint below an evaluator's checkpoint directory, named by the source's
    kind: switching a stream's pre-processor on or off starts the other source from its own offsets
    (raw and derived file names are both seqs, but their files do not start at the same seqs)."""
    return Path(checkpoint_dir) / input_kind(source).checkpoint


def committed_offset(checkpoint_dir: str | Path, source: dict[str, Any]) -> dict[str, Any] | None:
    """The source offset of the last batch Spark committed in a query checkpoint (None: none yet)."""
    query = query_checkpoint(checkpoint_dir, source)
    try:
        batches = sorted(int(p.name) for p in (query / "commits").iterdir() if p.name.isdigit())
    except FileNotFoundError:
        return None
    if not batches:
        return None
    lines = (query / "offsets" / str(batches[-1])).read_text(encoding="utf-8").splitlines()
    return json.loads(lines[-1])


def recover_committed(evaluator: GroupEvaluator, checkpoint_dir: str | Path, redis_url: str) -> int:
    """Apply what Spark committed but the evaluator had not applied when it stopped; returns how many lines.

    Only a pipelined evaluator leaves such a batch; its input is still in the
    source because the source keeps what the evaluator has not applied. An
    evaluator with no state in Redis (Redis lost it) while Spark committed
    batches is rebuilt from every stored op up to the committed file,
    archived ones included (``GroupEvaluator.rebuild``).
    """
    plan, schema = evaluator.session.plan, evaluator.session.schema
    if plan is None or schema is None:
        return 0
    source = plan.stream.source
    offset = committed_offset(checkpoint_dir, source)
    if offset is None:
        return 0
    lines, rebuild = input_kind(source).recover(source, offset, evaluator.session.applied_seq, redis_url,
                                                evaluator.evaluator_id)
    if rebuild:
        return evaluator.rebuild(lines)
    return _apply_outside_the_query(evaluator, source, list(lines))


def catch_up_archived(evaluator: GroupEvaluator) -> int:
    """Apply the ops its source archived that the evaluator has not applied; returns how many.

    A raw landing directory has them after the stream read the
    pre-processor's derived stream: the pre-processor, not the evaluator,
    gated archiving the raw directory then, and a query over the directory
    does not see them. An evaluator with no applied seq yet starts where the
    directory does.
    """
    plan, schema = evaluator.session.plan, evaluator.session.schema
    if plan is None or schema is None:
        return 0
    source = plan.stream.source
    lines = input_kind(source).catch_up(source, evaluator.session.applied_seq)
    return _apply_outside_the_query(evaluator, source, lines)


def _apply_outside_the_query(evaluator: GroupEvaluator, source: dict[str, Any], lines: list[str]) -> int:
    """Apply lines of ``source`` read outside the streaming query (derived records or raw stored lines)
    as one batch; returns how many."""
    if lines:
        row_reader = input_kind(source).row_reader(evaluator.client)
        if row_reader is not None:
            rows, _ = row_reader.rows(evaluator.session, lines, evaluator.session.plan_version)
        else:
            schema = evaluator.session.schema
            assert schema is not None
            rows = [parse_stored_line(line, schema, evaluator.session.keywords) for line in lines]
        evaluator.apply_batch(-1, rows, guarded=True)
    return len(lines)


def start_query(
    spark: SparkSession,
    evaluator: GroupEvaluator,
    redis_url: str,
    checkpoint_dir: str | Path,
    trigger_seconds: float = DEFAULT_TRIGGER_SECONDS,
    available_now: bool = False,
    max_rows: int | None = None,
    handler: BatchHandler | None = None,
) -> StreamingQuery:
    """Start the evaluator's streaming query from its checkpoint (the plan must be loaded).

    A pipelined ``handler`` needs the sources to keep what is not applied:
    its state key goes to them, and :func:`recover_committed` must have run.
    """
    plan = evaluator.session.plan
    if plan is None:
        raise RuntimeError("the evaluator has no plan")
    handler = handler or BatchHandler(evaluator)
    applied_key = bus.Keys.evaluator_state(evaluator.evaluator_id) if handler.pipelined else None
    frame = source_frame(spark, plan.stream.source, redis_url, max_rows, applied_key)
    writer = (
        frame.writeStream.foreachBatch(handler)
        .option("checkpointLocation", str(query_checkpoint(checkpoint_dir, plan.stream.source)))
        .queryName(f"evaluator-{evaluator.evaluator_id}")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(trigger_seconds * 1000)} milliseconds")
    return writer.start()
