"""The pre-processor job on Spark: its derived landing files are the core's records, read back by an evaluator."""

from __future__ import annotations

import json

import orjson
import pytest

from streaming import bus
from streaming.evaluator import GroupEvaluator
from streaming.preprocess import Preprocessor, StreamNeeds, derived_ops
from streaming.schema import Schema
from streaming.sharing.properties import EvaluatorPlan
from streaming.sources import is_landing_file, landing_file_name
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
    bus.write_plan(redis_client, 1, doc)
    handler = PreprocessHandler(redis_client, 1, out_dir)
    start_preprocessor(spark, handler, doc["stream"]["source"], "", tmp_path / "ckpt", available_now=True
                       ).awaitTermination()
    written = [line.encode() for f in sorted(p for p in out_dir.iterdir() if is_landing_file(p.name))
               for line in f.read_text().splitlines()]
    plan = EvaluatorPlan.model_validate(doc)
    core = Preprocessor(Schema.from_dict(SCHEMA), StreamNeeds.of_plan(plan))
    assert [orjson.loads(r) for r in written] == [orjson.loads(core.derive(line)) for line in LINES]
    vocabularies = {int(v): tuple(orjson.loads(w)) for v, w in redis_client.hgetall(bus.Keys.stream_vocabularies(2)).items()}
    assert vocabularies == {1: ("dress", "texas")}

    raw = GroupEvaluator(redis_client, 1)
    raw.start()
    raw.apply_batch(0, parsed(redis_client, LINES))
    expected = {q: published(redis_client, q) for q in (5, 8)}
    redis_client.flushdb()
    bus.write_plan(redis_client, 1, json.loads(json.dumps(doc)))
    derived = GroupEvaluator(redis_client, 1)
    derived.start()
    derived.apply_batch(0, derived_ops(written, vocabularies), parsed_with_version=1)
    assert {q: published(redis_client, q) for q in (5, 8)} == expected
