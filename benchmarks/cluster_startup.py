"""Spark standalone cluster start-up: the cluster's cold start, and a Spark session on it vs local[2].

Each run starts a :class:`~streaming.spark.cluster.LocalCluster` (``--workers``
workers of one core and 1 GB) and times it until every worker has registered
with the master. Then, alternating local[2] and the cluster, a fresh Python
process (a cold JVM, as an evaluator starts) times

* ``session``: ``spark_session(master)`` returning (the driver is up);
* ``first_job``: a two-partition job whose tasks import ``streaming.spark.parse``
  (pyarrow, orjson) in the Python workers, as an evaluator's first batch does:
  on the cluster, executors are launched, register and start their Python
  workers first.

::

    .venv/bin/python benchmarks/cluster_startup.py --runs 3

prints one line per measurement and writes ``<workdir>/cluster-startup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def probe(master: str) -> dict:
    """Run in a fresh process: the session's start and its first job, in seconds."""
    from streaming.spark.job import spark_session

    started = time.perf_counter()
    spark = spark_session(master, app_name="cluster-startup")
    session = time.perf_counter() - started
    modules = spark.sparkContext.parallelize(range(2), 2).map(lambda _: __import__("streaming.spark.parse").__name__)
    assert modules.collect() == ["streaming", "streaming"]
    first_job = time.perf_counter() - started - session
    app_id = spark.sparkContext.applicationId
    spark.stop()
    return {"session_s": round(session, 2), "first_job_s": round(first_job, 2), "app_id": app_id}


def run_probe(master: str) -> dict:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    out = subprocess.run([sys.executable, __file__, "--probe", master], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "cluster-startup")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(args.probe)))
        return
    from streaming.spark.cluster import LocalCluster

    runs = []
    for run in range(args.runs):
        load = os.getloadavg()[0]
        started = time.perf_counter()
        with LocalCluster(args.workdir / f"run-{run}", workers=args.workers) as cluster:
            cold_start = round(time.perf_counter() - started, 2)
            print(f"run {run}: cluster of {args.workers} workers up in {cold_start} s (load {load:.1f})", flush=True)
            local = run_probe("local[2]")
            print(f"run {run}: local[2]  {local}", flush=True)
            on_cluster = run_probe(cluster.master_url)
            executors = cluster.executors(on_cluster["app_id"])
            assert {e.worker for e in executors} == {w["id"] for w in cluster.state()["workers"]}
            print(f"run {run}: cluster   {on_cluster}", flush=True)
        runs.append({"cluster_cold_start_s": cold_start, "load_before": round(load, 2), "local": local,
                     "cluster": on_cluster})

    def median(pick) -> float:
        return statistics.median(pick(run) for run in runs)

    summary = {
        "cluster_cold_start_s": median(lambda run: run["cluster_cold_start_s"]),
        "local_session_s": median(lambda run: run["local"]["session_s"]),
        "local_first_job_s": median(lambda run: run["local"]["first_job_s"]),
        "cluster_session_s": median(lambda run: run["cluster"]["session_s"]),
        "cluster_first_job_s": median(lambda run: run["cluster"]["first_job_s"]),
    }
    print("medians:", summary)
    result = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()}, "workers": args.workers,
              "runs": runs, "median": summary}
    args.workdir.mkdir(parents=True, exist_ok=True)
    (args.workdir / "cluster-startup.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
