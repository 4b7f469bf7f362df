"""The pre-processor job on Spark: its derived landing files are the core's records, read back by an evaluator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import orjson
import pytest

from streaming import bus
from streaming.evaluator import GroupEvaluator
from streaming.preprocess import Preprocessor, StreamNeeds, derived_ops
from streaming.schema import Schema
from streaming.sharing.properties import EvaluatorPlan
from streaming.sources import is_landing_file, landing_archive, landing_file_name, stamp
from streaming.spark.landing_source import LandingOpsReader
from streaming.spark.preprocessor import PreprocessHandler, start_preprocessor

from ..test_evaluator import EXPENSIVE, LINES, SCHEMA, TEXAN, parsed, published, query

pytestmark = [pytest.mark.redis, pytest.mark.spark]


def plan_doc(path):
    return {"version": 1, "evaluator": 1,
            "stream": {"id": 2, "name": "shop", "schema": SCHEMA, "source": {"kind": "landing", "path": str(path)}},
            "queries": [query(5, predicates=[EXPENSIVE]),
                        query(8, keywords=(), window=5.0, predicates=[EXPENSIVE, TEXAN])]}


def test_the_job_writes_the_cores_records_and_an_evaluator_reading_them_publishes_the_raw_changes(
        spark, redis_client, tmp_path):
    raw_dir, out_dir = tmp_path / "landing" / "2", tmp_path / "derived" / "2"
    raw_dir.mkdir(parents=True)
    for start in range(0, len(LINES), 10):
        (raw_dir / landing_file_name(start)).write_text("".join(line + "\n" for line in LINES[start:start + 10]))
    doc = plan_doc(raw_dir)
    bus.write_plan(redis_client, 1, EvaluatorPlan.model_validate(doc))
    handler = PreprocessHandler(redis_client, 1, out_dir)
    start_preprocessor(spark, handler, doc["stream"]["source"], "", tmp_path / "ckpt", available_now=True
                       ).awaitTermination()
    written = [line.encode() for f in sorted(p for p in out_dir.iterdir() if is_landing_file(p.name))
               for line in f.read_text().splitlines()]
    core = Preprocessor(Schema.from_dict(SCHEMA), StreamNeeds.of_plan(EvaluatorPlan.model_validate(doc)))
    assert [orjson.loads(r) for r in written] == [orjson.loads(core.derive(line)) for line in LINES]
    vocabularies = {int(v): tuple(orjson.loads(w)) for v, w in redis_client.hgetall(bus.Keys.stream_vocabularies(2)).items()}
    assert vocabularies == {1: ("dress", "texas")}

    raw = GroupEvaluator(redis_client, 1)
    raw.start()
    raw.apply_batch(0, parsed(redis_client, LINES))
    expected = {q: published(redis_client, q) for q in (5, 8)}
    redis_client.flushdb()
    bus.write_plan(redis_client, 1, EvaluatorPlan.model_validate(doc))
    derived = GroupEvaluator(redis_client, 1)
    derived.start()
    derived.apply_batch(0, derived_ops(written, vocabularies, Schema.from_dict(SCHEMA)), parsed_with_version=1)
    assert {q: published(redis_client, q) for q in (5, 8)} == expected


def test_two_evaluators_over_the_derived_stream_publish_the_raw_streams_changes_and_dead_letters_once(
        spark, redis_client, redis_url, tmp_path):
    """The pre-processor (its state hash 7) derives the raw landing directory; evaluators 1 and 2 read the
    derived one, each with its queries: their change streams equal one evaluator over the raw stream, the
    dead letters are published once (by the pre-processor, not again after a replay)."""
    from streaming.placement import Placement, evaluator_plans
    from streaming.spark.job import start_query

    raw_dir, out_dir = tmp_path / "landing" / "2", tmp_path / "derived" / "2"
    raw_dir.mkdir(parents=True)
    bad = [stamp(len(LINES), '{"op":"insert","relation":"Nope","tuple":{},"ts":99}'),
           stamp(len(LINES) + 1, '{"op":"insert","relation":"Product","tuple":{"pid":"x"},"ts":99}')]
    lines = LINES + bad
    for start in range(0, len(lines), 10):
        (raw_dir / landing_file_name(start)).write_text("".join(line + "\n" for line in lines[start:start + 10]))
    full = plan_doc(raw_dir)
    full["queries"].append(query(9, keywords=("hat",), window=5.0))
    full["stream"]["source"] = {"kind": "derived", "path": str(out_dir), "consumers": [1, 2],
                                "raw": {"kind": "landing", "path": str(raw_dir), "consumers": [7]}}
    plans = evaluator_plans(EvaluatorPlan.model_validate(full), [1, 2], Placement({5: 1, 8: 2, 9: 1}), {1: 1, 2: 1})
    for e, plan in plans.items():
        bus.write_plan(redis_client, e, plan)
    handler = PreprocessHandler(redis_client, 1, out_dir, state_id=7)
    raw_source = full["stream"]["source"]["raw"]
    start_preprocessor(spark, handler, raw_source, redis_url, tmp_path / "pre", available_now=True).awaitTermination()
    state = redis_client.hgetall(bus.Keys.evaluator_state(7))
    assert state["seq"] == str(len(lines) - 1) and float(state["rows_per_second"]) > 0 and float(state["batch_ms"]) > 0
    evaluators = {e: GroupEvaluator(redis_client, e) for e in (1, 2)}
    for e, evaluator in evaluators.items():
        evaluator.start()
        run = start_query(spark, evaluator, redis_url, tmp_path / f"ck-{e}", available_now=True, max_rows=12)
        run.awaitTermination()
        assert run.exception() is None and evaluator.session.applied_seq == len(lines) - 1
    def dead_seqs() -> list[int]:
        return sorted(e.seq for _, e in bus.read_stream_events(redis_client, 2, count=1000) if e.type == "deadletter")

    dead = dead_seqs()  # parse rejects by the pre-processor, stream-rule rejects by the primary evaluator
    assert {len(LINES), len(LINES) + 1} <= set(dead) and len(set(dead)) == len(dead)
    # a replay of the pre-processor's last batch publishes no dead letter again
    replay = PreprocessHandler(redis_client, 1, tmp_path / "derived-again" / "2", state_id=7)
    start_preprocessor(spark, replay, {"kind": "landing", "path": str(raw_dir)}, redis_url,
                       tmp_path / "pre-again", available_now=True).awaitTermination()
    assert dead_seqs() == dead
    expected = {}
    for q in (5, 8, 9):
        expected[q] = published(redis_client, q)
    redis_client.flushdb()
    alone = dict(full, stream=dict(full["stream"], source={"kind": "landing", "path": str(raw_dir)}))
    bus.write_plan(redis_client, 1, EvaluatorPlan.model_validate(alone))
    raw = GroupEvaluator(redis_client, 1)
    raw.start()
    raw.apply_batch(0, parsed(redis_client, lines))
    assert {q: published(redis_client, q) for q in (5, 8, 9)} == expected
    assert dead_seqs() == dead  # the same rejects as over the raw stream, each once
    assert any(expected[q][0] for q in (5, 8, 9))


def test_a_running_evaluator_follows_its_stream_onto_the_derived_stream_and_back_losing_nothing(
        spark, redis_client, redis_url, tmp_path):
    """The stream's pre-processor is switched on under a running evaluator process: it restarts its
    streaming query on the derived stream, in the same process. Switched off while the evaluator is
    stopped and the pre-processor has derived (and archived) ops the evaluator never applied: the
    evaluator applies them from the raw archive before reading the raw directory again. Its change
    streams equal one evaluator's over every op."""
    raw_dir, out_dir = tmp_path / "landing" / "2", tmp_path / "derived" / "2"
    raw_dir.mkdir(parents=True)
    doc = plan_doc(raw_dir)
    bus.write_plan(redis_client, 1, EvaluatorPlan.model_validate(doc))
    reference = GroupEvaluator(redis_client, 1)
    reference.start()
    reference.apply_batch(0, parsed(redis_client, LINES))
    expected = {q: published(redis_client, q) for q in (5, 8)}
    redis_client.flushdb()

    raw_key, derived_key = bus.Keys.landing_consumers(2, "raw"), bus.Keys.landing_consumers(2, "derived")
    raw = {"kind": "landing", "path": str(raw_dir), "consumers": [1], "consumers_key": raw_key}
    derived = {"kind": "derived", "path": str(out_dir), "consumers": [1], "consumers_key": derived_key,
               "raw": dict(raw, consumers=[7])}

    def publish(version: int, source: dict) -> None:  # as the web tier does: the consumers, then the plan
        bus.write_landing_consumers(redis_client, 2, "raw", [7] if source is derived else [1])
        bus.write_landing_consumers(redis_client, 2, "derived", [1] if source is derived else [])
        bus.write_plan(redis_client, 1, EvaluatorPlan.model_validate(
            dict(doc, version=version, stream=dict(doc["stream"], source=source))))

    def land(first: int, end: int) -> None:
        for start in range(first, end, 5):
            (raw_dir / landing_file_name(start)).write_text("".join(line + "\n" for line in LINES[start:min(start + 5, end)]))

    def derive() -> None:
        handler = PreprocessHandler(redis_client, 1, out_dir, state_id=7)
        start_preprocessor(spark, handler, derived["raw"], redis_url, tmp_path / "pre", available_now=True
                           ).awaitTermination()

    def evaluator() -> subprocess.Popen:
        log = open(tmp_path / "evaluator.log", "ab")
        return subprocess.Popen([sys.executable, "-m", "streaming.spark", "--evaluator", "1", "--redis-url", redis_url,
                                 "--checkpoint-dir", str(tmp_path / "checkpoint"), "--master", "local[1]",
                                 "--trigger-seconds", "0.5"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def applied_through(seq: int, process: subprocess.Popen) -> None:
        deadline = time.monotonic() + 180
        while int(redis_client.hget(bus.Keys.evaluator_state(1), "seq") or -1) < seq:
            assert process.poll() is None, (tmp_path / "evaluator.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"not applied through {seq}"
            time.sleep(0.2)

    publish(1, raw)
    land(0, 10)
    process = evaluator()
    try:
        applied_through(9, process)
        publish(2, derived)
        land(10, 20)
        derive()
        applied_through(19, process)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        land(20, len(LINES))
        derive()
        # what the running pre-processor's source does at its next commit: the raw files go to the archive once
        # their one consumer, the pre-processor, has them
        LandingOpsReader(str(raw_dir), str(landing_archive(raw_dir)), None, 1, (redis_url, [], raw_key)).commit(
            {"file": landing_file_name(25)})
        assert not any(is_landing_file(p.name) for p in raw_dir.iterdir())
        publish(3, raw)
        process = evaluator()
        applied_through(len(LINES) - 1, process)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(60)
    statuses = [(e.status, e.detail) for _, e in bus.read_stream_events(redis_client, 2, count=10_000)
                if e.type == "evaluator.status"]
    assert not [s for s in statuses if s[0] == "failed"]
    assert ("starting", "the stream's source changed: restarting the streaming query") in statuses
    assert {q: published(redis_client, q) for q in (5, 8)} == expected
