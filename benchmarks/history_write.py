"""How fast the history persister copies change streams into PostgreSQL (issue 20: the 30-minute soak's
history fell behind at ~1,500 changes/s on the 2-core machine).

Real changes, made by the reference engine over the E-commerce lines (seed 11) for ``--queries`` keyword sets
drawn as the soak draws them (its defaults: 10 sets, Tmax 4, a 2-hour window), each change's result shown as the evaluator shows it (its tuples' values and
keyword hits), are added to each query's change stream in a redis-server of the run's own; a throwaway
PostgreSQL cluster holds the history. Then ``HistoryPersister.run`` rounds (beat's task) copy them, timed
from the first round to the one that finds nothing new; the same is done a second time with every change
published again under new ids (what an evaluator does after Redis lost its data: history must skip them).

    .venv/bin/python benchmarks/history_write.py --ops 20000 --queries 100 [--profile]

prints and writes ``benchmarks/results/history-write.json``: changes, seconds, changes per second and the
microseconds per change of the first copy and of the skipped republish.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def changes_of(queries: list[str], ops: int, tmax: int, window_seconds: float) -> dict[int, list[tuple[str, int, dict]]]:
    """Per query index, its (kind, seq, result view) over the first ``ops`` E-commerce lines."""
    from streaming.engine import KeywordEngine
    from streaming.events import ResultView, TupleView, result_key
    from streaming.ops import OpRejected
    from streaming.schema import Schema
    from streaming.workloads import ecommerce

    schema = Schema.from_dict(ecommerce.SCHEMA_DOC)
    op_list = list(ecommerce.build(ops, seed=11).ops())
    out: dict[int, list[tuple[str, int, dict]]] = {}
    for index, words in enumerate(queries):
        engine = KeywordEngine(schema, words, tmax, window_seconds)
        keywords = words.split()
        values: dict[tuple[str, Any], dict] = {}
        changes = []
        for seq, op in enumerate(op_list):
            if op.kind == "insert":
                values[(op.relation, op.key)] = dict(op.values)
            try:
                applied = engine.apply(op)
            except OpRejected as exc:
                applied = exc.changes
            for change in applied:
                result = change.result
                tuples = []
                for relation, key in result.tuples:
                    row = values.get((relation, key), {})
                    text = " ".join(str(v) for v in row.values()).lower()
                    tuples.append(TupleView(relation=relation, key=key, values=row,
                                            hits=sorted(w for w in keywords if w in text)))
                view = ResultView(key=result_key(result.tuples, result.edges), tuples=tuples,
                                  edges=[((a[0], a[1]), (b[0], b[1]), fk) for a, b, fk in result.edges])
                changes.append((change.type, seq, view.model_dump(mode="json")))
        out[index] = changes
    return out


def publish(client, query_ids: list[int], changes: dict[int, list[tuple[str, int, dict]]]) -> int:
    """Add every change to its query's stream, as the evaluator does; returns how many."""
    from streaming.bus import Keys
    from streaming.events import change_json

    count = 0
    with client.pipeline(transaction=False) as pipe:
        for index, query_id in enumerate(query_ids):
            for kind, seq, view in changes[index]:
                pipe.xadd(Keys.changes(query_id), {"data": change_json(kind, query_id, seq, json.dumps(view))})
                count += 1
        pipe.execute()
    return count


def copy_all(client, profile: cProfile.Profile | None) -> tuple[float, int, int]:
    """Beat's rounds until one writes nothing: (seconds, rows written, rounds)."""
    from kwmonitor.streams.history import HistoryPersister

    began, written, rounds = time.perf_counter(), 0, 0
    while True:
        if profile is not None:
            profile.enable()
        done = HistoryPersister(client).run()["results"]
        if profile is not None:
            profile.disable()
        rounds += 1
        written += done
        if not done:
            return time.perf_counter() - began, written, rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--keyword-sets", type=int, default=10)
    parser.add_argument("--tmax", type=int, default=4)
    parser.add_argument("--window-seconds", type=float, default=7200.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="print the 25 costliest functions of the first copy")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/history-write.json")
    args = parser.parse_args()

    from tests.faults.services import MAKE_RUN_PERSISTENCE, OwnPostgres, OwnRedis

    workdir = Path(tempfile.mkdtemp(prefix="kw-history-"))
    own_redis, own_pg = OwnRedis(workdir / "redis", MAKE_RUN_PERSISTENCE), OwnPostgres()
    try:
        own_redis.start()
        own_pg.start()
        import psycopg

        with psycopg.connect(own_pg.url("postgres"), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "kw"')
        os.environ.update(DJANGO_SETTINGS_MODULE="kwmonitor.settings", DATABASE_URL=own_pg.url("kw"),
                          REDIS_URL=own_redis.url, SECRET_KEY="history-benchmark-not-secret", DEBUG="0")
        import django

        django.setup()
        report = run(args, own_redis.url)
    finally:
        own_redis.stop()
        own_pg.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(report, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")


def run(args: argparse.Namespace, redis_url: str) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from benchmarks.soak_faults import keyword_sets
    from kwmonitor.catalog.models import Schema
    from kwmonitor.queries.models import KeywordQuery
    from kwmonitor.streams.models import ResultEvent, Stream
    from streaming import bus
    from streaming.workloads import ecommerce

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", "bench@example.com", "bench-password-1")
    schema = Schema.import_document(ecommerce.SCHEMA_DOC, description="E-commerce demo")
    stream = Stream.objects.create(name="shop", schema=schema)
    words = keyword_sets(args.queries, args.keyword_sets, args.seed)
    query_ids = [KeywordQuery.objects.create(owner=user, name=w, schema=schema, stream=stream, keywords=w,
                                             tmax=args.tmax).pk for w in words]
    distinct = sorted(set(words))
    made = changes_of(distinct, args.ops, args.tmax, args.window_seconds)
    changes = {i: made[distinct.index(w)] for i, w in enumerate(words)}
    client = bus.connect(redis_url)
    profile = cProfile.Profile() if args.profile else None
    report: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "ops": args.ops, "queries": args.queries, "keyword_sets": len(distinct)}
    for phase in ("first", "republished"):
        published = publish(client, query_ids, changes)
        seconds, written, rounds = copy_all(client, profile if phase == "first" else None)
        report[phase] = {"changes": published, "rows_written": written, "rounds": rounds,
                         "seconds": round(seconds, 2), "changes_per_s": round(published / seconds),
                         "us_per_change": round(seconds / published * 1e6, 1)}
    report["rows_held"] = ResultEvent.objects.count()
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
    return report


if __name__ == "__main__":
    main()
