"""Per-op cost of the evaluator's Python path on the demo workload, without Spark.

* parse: the ``mapInArrow`` function of ``streaming.spark.parse.make_parser``
  (what each executor core runs) over one Arrow batch of stored lines;
* collect: ``collect_ops`` turning its output back into ops on the driver;
* apply: ``GroupEvaluator.apply_batch`` (the stream session and its Redis I/O) with the three demo queries
  (``kwmonitor.streams.demo.DEMO_QUERIES``) or ``--random-queries N`` random
  saved queries (``streaming.workloads.queries``; ``--keyword-sets 400``: drawn
  from 400 keyword sets as in ``bench sharing``), batches of ``--batch`` ops,
  on a real Redis (``--redis-url``, flushed), after ``--ops`` ops of warm-up;
  ``--profile FILE`` writes a cProfile of the timed apply;
* session: ``StreamSession.apply`` alone on the same batches (no I/O: what
  ``apply`` costs on top of it is Redis)::

    .venv/bin/python benchmarks/driver_path.py [--random-queries 100]

Prints µs per op and the apply breakdown of the last batch.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_QUERIES = [  # kwmonitor.streams.demo.DEMO_QUERIES as plan entries (this script needs no Django)
    {"id": 1, "keywords": ["dress", "texas"], "tmax": 5, "window_seconds": 3600.0, "predicates": []},
    {"id": 2, "keywords": ["wedding", "scarf"], "tmax": 3, "window_seconds": 1800.0,
     "predicates": [{"relation": "Product", "attribute": "price", "op": ">=", "value": 40}]},
    {"id": 3, "keywords": ["boots", "oregon"], "tmax": 4, "window_seconds": 3600.0, "predicates": []},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=100_000, help="ops timed (and as many again to warm up)")
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "driver-path")
    parser.add_argument("--random-queries", type=int, default=0, help="N random saved queries instead of the demo's")
    parser.add_argument("--keyword-sets", type=int, default=0,
                        help="with --random-queries: draw their keyword sets uniformly from a pool of this many sets "
                             "of the stream's words (as bench sharing's many-queries part), instead of the default "
                             "skewed pool of 24")
    parser.add_argument("--profile", type=Path, default=None, help="write a cProfile of the timed apply here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import json

    import pyarrow as pa

    from streaming import bus
    from streaming.evaluator import GroupEvaluator, group_keywords
    from streaming.session import StreamSession
    from streaming.parsed import parse_stored_line
    from streaming.schema import Schema
    from streaming.sharing.properties import EvaluatorPlan
    from streaming.sources import stamp
    from streaming.spark.parse import collect_ops, make_parser

    subprocess.run([sys.executable, "-m", "streaming", "workload", "ecommerce", "--out-dir", str(args.workdir),
                    "--ops", str(2 * args.ops), "--seed", "7"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    schema_doc = json.loads((args.workdir / "schema.json").read_text())
    with (args.workdir / "ops.ndjson").open() as ops:
        lines = [stamp(seq, line.strip()) for seq, line in enumerate(ops)]
    queries = DEMO_QUERIES
    if args.random_queries:
        from streaming.workloads.queries import StreamProfile, random_queries

        with (args.workdir / "ops.ndjson").open() as ops:
            profile = StreamProfile(schema_doc, (json.loads(line) for line in ops))
        many = {"pool": args.keyword_sets, "skew": 0.0, "word_skew": 1.0} if args.keyword_sets else {}
        queries = random_queries(profile, args.random_queries, seed=7, windows=(1800.0, 3600.0, 7200.0), filters=0,
                                 **many)
    plan = EvaluatorPlan.model_validate({
        "version": 1, "evaluator": 1, "queries": queries,
        "stream": {"id": 1, "name": "shop", "schema": schema_doc, "source": {"kind": "redis", "key": "bench"}}})
    keywords = group_keywords(plan)

    timed = lines[args.ops:]
    parse = make_parser(schema_doc, sorted(keywords))
    start = time.perf_counter()
    table = pa.Table.from_batches(list(parse(iter([pa.RecordBatch.from_pydict({"value": timed})]))))
    parse_us = (time.perf_counter() - start) / len(timed) * 1e6
    start = time.perf_counter()
    collect_ops(table)
    collect_us = (time.perf_counter() - start) / len(timed) * 1e6

    client = bus.connect(args.redis_url)
    client.flushdb()
    bus.write_plan(client, 1, plan)
    evaluator = GroupEvaluator(client, 1)
    evaluator.start()
    schema = Schema.from_dict(schema_doc)
    rows = [parse_stored_line(line, schema, keywords) for line in lines]
    for b in range(0, args.ops, args.batch):
        evaluator.apply_batch(b // args.batch, rows[b:b + args.batch])
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start = time.perf_counter()
    for b in range(args.ops, 2 * args.ops, args.batch):
        metrics = evaluator.apply_batch(b // args.batch, rows[b:b + args.batch])
    apply_us = (time.perf_counter() - start) / args.ops * 1e6
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    client.flushdb()
    session = StreamSession()
    session.adopt(plan)
    for b in range(0, args.ops, args.batch):
        session.apply(rows[b:b + args.batch])
    start = time.perf_counter()
    for b in range(args.ops, 2 * args.ops, args.batch):
        session.apply(rows[b:b + args.batch])
    session_us = (time.perf_counter() - start) / args.ops * 1e6
    print(f"parse {parse_us:.1f} us/op, collect {collect_us:.1f} us/op, apply_batch {apply_us:.1f} us/op, "
          f"session {session_us:.1f} us/op "
          f"({len(queries)} queries; last batch ms: {', '.join(f'{k} {v:.0f}' for k, v in metrics.breakdown_ms.items())})")


if __name__ == "__main__":
    main()
