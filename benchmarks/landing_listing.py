"""Landing sources: time per micro-batch and checkpoint size as the stream ages.

Writes ``--batch-files`` NDJSON files (100 op lines each, named as ingest names
them) per micro-batch into a scratch landing directory and lets one streaming
query (``foreachBatch`` counting rows, local[2], the evaluator's Spark
settings) take them; at each size of ``--sizes`` it times five more batches,
keeps the median and measures the checkpoint. ``--mode kwlanding`` is the
evaluator's source (``streaming.spark.landing_source``); the other two are
Spark's file source, ``--mode archive`` with ``cleanSource=archive`` (what the
evaluator used before), ``--mode none`` keeping every file where Spark lists it::

    .venv/bin/python benchmarks/landing_listing.py --mode kwlanding
    .venv/bin/python benchmarks/landing_listing.py --mode archive
    .venv/bin/python benchmarks/landing_listing.py --mode none

Prints one line per size and writes ``<workdir>/landing-<mode>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = json.dumps({"seq": 0, "op": "insert", "relation": "Order", "tuple": {"oid": 1}, "ts": 1}) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("kwlanding", "archive", "none"), required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 5000, 10000, 20000])
    parser.add_argument("--batch-files", type=int, default=50)
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "landing-listing")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    sys.path.insert(0, str(ROOT))
    from streaming.sources import landing_archive, landing_file_name
    from streaming.spark.job import source_frame, spark_session

    root = args.workdir / args.mode
    shutil.rmtree(root, ignore_errors=True)
    landing = root / "landing" / "1"
    landing.mkdir(parents=True)
    spark = spark_session("local[2]", app_name="landing-listing")
    if args.mode == "kwlanding":
        frame = source_frame(spark, {"kind": "landing", "path": str(landing)}, "", max_rows=args.batch_files * 100)
    else:
        reader = spark.readStream.format("text").option("maxFilesPerTrigger", args.batch_files)
        if args.mode == "archive":
            reader = reader.option("cleanSource", "archive").option("sourceArchiveDir", str(landing_archive(landing)))
        frame = reader.load(str(landing))
    query = (frame.writeStream.foreachBatch(lambda frame, _id: frame.count())
             .option("checkpointLocation", str(root / "checkpoint")).trigger(processingTime="0 seconds").start())
    written = 0

    def write_batch() -> None:
        nonlocal written
        for _ in range(args.batch_files):
            name = landing_file_name(written * 100)
            tmp = landing / f".{name}.tmp"
            tmp.write_text(LINE * 100)
            os.replace(tmp, landing / name)
            written += 1

    points = []
    for size in args.sizes:
        while written < size:
            write_batch()
            query.processAllAvailable()
        times = []
        for _ in range(5):
            write_batch()
            start = time.perf_counter()
            query.processAllAvailable()
            times.append(time.perf_counter() - start)
        checkpoint = sum(p.stat().st_size for p in (root / "checkpoint").rglob("*") if p.is_file())
        point = {"files_ingested": written, "files_in_directory": len(list(landing.glob("*.ndjson"))),
                 "median_batch_ms": round(statistics.median(times) * 1000), "checkpoint_bytes": checkpoint}
        points.append(point)
        print(args.mode, point, flush=True)
    query.stop()
    spark.stop()
    out = args.workdir / f"landing-{args.mode}.json"
    out.write_text(json.dumps({"mode": args.mode, "batch_files": args.batch_files, "points": points}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
