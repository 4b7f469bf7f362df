"""What the clock guard costs at ingest: ops/s through ``Ingestor.ingest`` with the guard judged and not.

One stream of the E-commerce demo schema (landing-directory source) takes a
body of ``--ops`` demo ops again and again, alternately with the stream's
clock guard judged as shipped and with its judgement replaced by one that
takes every line (``kwmonitor.ingest.service.judge_times``), in ABBA order
after a warm-up and with a garbage collection before each run, so both see
the same machine. Everything else is the real path: validation, the landing
lock, the ingest clock, the file written and fsynced. A scratch SQLite
database and the Redis database ``--redis-db`` (flushed) are used::

    .venv/bin/python benchmarks/ingest_guard.py --redis-db 14 --out benchmarks/results/ingest-guard.json

Prints the median ops/s of each and their ratio, and writes them to ``--out``
(default ``<workdir>/ingest-guard.json``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=20_000, help="ops in the body")
    parser.add_argument("--rounds", type=int, default=4, help="ABBA rounds (4 runs each)")
    parser.add_argument("--redis-db", type=int, required=True, help="a Redis database number nothing else uses")
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "ingest-guard")
    parser.add_argument("--out", type=Path, default=None, help="the JSON of the results")
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    os.environ.update(DATABASE_URL=f"sqlite:///{args.workdir / 'db.sqlite3'}", LANDING_DIR=str(args.workdir / "landing"),
                      REDIS_URL=f"redis://127.0.0.1:6379/{args.redis_db}", DJANGO_SETTINGS_MODULE="kwmonitor.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from kwmonitor.catalog.models import Schema
    from kwmonitor.ingest import service
    from kwmonitor.streams.connection import redis_client
    from kwmonitor.streams.models import Stream
    from streaming.bench.shop import shop_ops
    from streaming.bus import Keys

    call_command("migrate", verbosity=0)
    client = redis_client()
    client.flushdb()
    schema = Schema.import_document(json.loads((ROOT / "kwmonitor/streams/demo/schema.json").read_text()))
    stream = Stream.objects.create(name="bench-guard", schema=schema)
    body = list(shop_ops(args.ops, seed=1, event_rate=50))

    def takes_all(guard, times, clock):
        return [None for _ in times], clock

    kinds = {"guard judged": service.judge_times, "guard not judged": takes_all}
    order = ["guard not judged"] + ["guard judged", "guard not judged", "guard not judged", "guard judged"] * args.rounds
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    for run, kind in enumerate(order):
        service.judge_times = kinds[kind]
        client.delete(Keys.stream_clock(stream.pk))
        ingestor = service.Ingestor(stream)
        gc.collect()
        started = time.perf_counter()
        result = ingestor.ingest(body)
        elapsed = time.perf_counter() - started
        assert result.accepted == args.ops and not result.errors, result.errors[:3]
        if run:  # the first is a warm-up
            rates[kind].append(result.accepted / elapsed)
    medians = {kind: statistics.median(r) for kind, r in rates.items()}
    ratio = medians["guard judged"] / medians["guard not judged"]
    for kind, r in rates.items():
        print(f"{kind}: median {medians[kind]:,.0f} ops/s (runs: {', '.join(f'{x:,.0f}' for x in r)})")
    print(f"judged / not judged: {ratio:.3f}")
    out = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()},
           "ops_per_body": args.ops, "ops_per_second": rates, "median": medians, "ratio": round(ratio, 4)}
    (args.out or args.workdir / "ingest-guard.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
