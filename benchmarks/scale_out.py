"""Scale-out benchmark (issue 10, the paper's Table 1 on this system): data shipping, sharing, sharing with a pre-processor.

N random saved keyword queries (``streaming.workloads.queries``, seed 7) on the
E-commerce demo stream, fed over HTTP ingest at a fixed offered rate through
daphne, each query with one websocket client, on a local Spark standalone
cluster (``streaming.spark.cluster``, two workers). One run per strategy, each
on a fresh stream with the same queries and ops:

* ``shipping``: data shipping, one evaluator (Spark application) per query,
  each reading and parsing the raw stream;
* ``sharing``: the queries grouped by the sharing issue's matching (one
  placement unit per keyword set = one widened sharing class), one evaluator
  per group, each reading the raw stream;
* ``preprocess``: the same groups, each evaluator reading the pre-processor's
  derived stream (one more application: the pre-processor, reading the raw
  stream once);
* ``placed`` (optional): the pre-processor and the groups placed by the
  placement rule (``streaming.placement.place``, each unit's cost its query
  count) on N evaluators, one run ``placed-N`` for each N of
  ``--placed-evaluators`` (e.g. ``2 4``).

Measured per run: CPU seconds of each process tree (the driver, its JVM and
its Python workers; the cluster's executors within their worker's tree) while
the ops are fed and applied, and apart over ``--idle-seconds`` with no ops
(each process's fixed cost: Spark's trigger loop, heartbeats, the cluster
daemons), bytes read per op by the
consumers from their source (each evaluator reads every file of its source
once: raw files for a raw reader, derived files for a derived reader; the
pre-processor's raw read is given apart, as the paper's source-side
processing) and by every reader, the pre-processor's raw read included
(``all_readers_bytes_per_op``), each evaluator's queries and classes as
placed and as it reported them (its sharing report), Spark applications,
websocket latency p50/p99 from the request to the change on the socket, and what was lost (changes in Redis that no
client received, ops not applied). Every query's change stream (seq, type,
result) is compared across the strategies.

    .venv/bin/python benchmarks/scale_out.py --queries 8 --rate 1000 --seconds 120
    .venv/bin/python benchmarks/scale_out.py --strategies preprocess placed --placed-evaluators 2 4

writes ``<workdir>/scale_out.json`` and ``scale_out.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pipeline import (CpuSampler, RateRun, _feed, _summarise, get_user, prepare,  # noqa: E402
                                 start_clients, start_web)
from streaming.sources import landing_files  # noqa: E402

STRATEGIES = ("shipping", "sharing", "preprocess", "placed")
# Every application the same share of the cluster: one executor of one core (the workers offer more cores
# than the machine has, so that data shipping's applications all run at once).
APP_CONF = "--conf spark.cores.max=1 --conf spark.executor.cores=1 --conf spark.executor.memory=512m pyspark-shell"


def _poll_min_applied(run: RateRun, client, evaluator_ids: list[int], done: threading.Event) -> None:
    """The stream is applied up to the smallest applied seq of its evaluators."""
    from streaming.bus import Keys

    last = -2
    while not done.is_set():
        with client.pipeline(transaction=False) as pipe:
            for e in evaluator_ids:
                pipe.hget(Keys.evaluator_state(e), "seq")
            seq = min(int(v) if v is not None else -1 for v in pipe.execute())
        if seq != last:
            run.applied.append((time.time(), seq))
            last = seq
        time.sleep(0.05)


def count_batches(client, stream, rows) -> dict[str, int]:
    """Micro-batches each process of the stream ran: an evaluator's batch metrics events, the pre-processor's
    derived files (one per batch)."""
    from streaming import bus
    from streaming.events import BatchMetrics

    events = [e for _, e in bus.read_stream_events(client, stream.pk, count=bus.EVENTS_MAXLEN)]
    out = {}
    for row in rows:
        if row.role == "preprocessor":
            out[f"{row} (driver, JVM, Python workers)"] = len(landing_files(stream.derived_path()))
        else:
            out[f"{row} (driver, JVM, Python workers)"] = sum(
                1 for e in events if isinstance(e, BatchMetrics) and e.evaluator == row.pk)
    return out


def configurations(strategies: Sequence[str], placed_evaluators: Sequence[int]) -> list[tuple[str, int | None]]:
    """The runs, in order: (name, evaluators placed on), ``placed`` once per count as ``placed-N``."""
    out: list[tuple[str, int | None]] = []
    for strategy in strategies:
        if strategy == "placed":
            out += [(f"placed-{n}", n) for n in placed_evaluators]
        else:
            out.append((strategy, None))
    return out


def reported_classes(client, stream_id: int) -> dict[int, dict[str, int]]:
    """What each evaluator of the stream says it evaluates (its latest sharing report): queries and classes."""
    from streaming import bus

    return {r.evaluator: {"queries": sum(len(c.get("members") or []) for c in r.classes), "classes": len(r.classes)}
            for r in bus.read_sharing_reports(client, stream_id)}


def _assignment(strategy: str, query_ids: list[int], units: list[list[int]], evaluators: list[int]) -> dict[int, int]:
    if strategy == "shipping":
        return dict(zip(query_ids, evaluators))
    return {q: e for unit, e in zip(units, evaluators) for q in unit}


def run_strategy(strategy: str, args: argparse.Namespace, lines: list[str], queries: list[dict[str, Any]], port: int,
                 web_pid: int, redis_url: str, master: str, cluster_roots: dict[str, int],
                 placed_on: int | None = None) -> dict[str, Any]:
    """One run of ``strategy`` (a name of ``configurations``; ``placed_on``: a ``placed-N`` run's N)."""
    from kwmonitor.accounts.models import ApiToken
    from kwmonitor.queries.models import AggregateSubscription, KeywordQuery, Predicate
    from kwmonitor.streams.demo import load_demo
    from kwmonitor.streams.models import Evaluator
    from kwmonitor.streams.plans import publish_plan
    from kwmonitor.streams.supervisor import Supervisor
    from streaming import bus
    from streaming.events import ResultAdded, ResultRemoved
    from streaming.placement import Placement, place, units_of
    from streaming.schema import Schema
    from streaming.sharing.properties import QueryEntry

    client = bus.connect(redis_url)
    demo = load_demo("bench", "bench-password", f"scale-{strategy}", "landing")
    stream = demo.stream
    AggregateSubscription.objects.filter(stream=stream).delete()
    KeywordQuery.objects.filter(stream=stream).delete()
    query_ids = []
    for entry in queries:
        query = KeywordQuery.objects.create(
            owner=get_user("bench"), name=f"random {entry['id']}", schema=demo.schema, stream=stream,
            keywords=" ".join(entry["keywords"]), tmax=entry["tmax"], window_seconds=entry["window_seconds"])
        for p in entry["predicates"]:
            Predicate.objects.create(query=query, **p)
        query_ids.append(query.pk)
    schema = Schema.from_dict(stream.schema.to_document())
    entries = [QueryEntry.model_validate(q.plan_entry()) for q in KeywordQuery.objects.filter(pk__in=query_ids)
               .order_by("id").prefetch_related("predicates")]
    units = units_of(entries, schema)
    groups = [list(u.queries) for u in units]
    placed = placed_on is not None
    count = placed_on if placed else {"shipping": len(query_ids), "sharing": len(groups),
                                      "preprocess": len(groups)}[strategy]
    stream.evaluator_processes = count
    stream.preprocess = placed or strategy == "preprocess"
    stream.save()
    evaluators = [e.pk for e in sorted(Evaluator.objects.filter(stream=stream).exclude(role="preprocessor"),
                                       key=Evaluator.process_order)]
    if placed:
        placement = place(units, {u.key: float(len(u.queries)) for u in units}, evaluators, Placement())
    else:
        placement = Placement(_assignment(strategy, query_ids, groups, evaluators))
    publish_plan(stream.pk, placement)
    _, token = ApiToken.issue(get_user("bench"), f"bench {strategy}")
    supervisor = Supervisor()
    processes: dict[str, subprocess.Popen] = {}
    logs = []
    rows = list(Evaluator.objects.filter(stream=stream).select_related("stream"))
    unit_of = {q: i for i, group in enumerate(groups) for q in group}
    described = {}
    for row in rows:
        mine = [q for q, e in placement.assignment.items() if e == row.pk]
        described[f"{row} (driver, JVM, Python workers)"] = {
            "role": row.role, "source": "derived" if stream.preprocess and row.role != "preprocessor" else "raw",
            "queries": len(mine), "classes": len({unit_of[q] for q in mine})}
    for row in rows:
        command = supervisor.command_for(row)
        command[command.index("--master") + 1] = master
        command += ["--trigger-seconds", str(args.trigger_seconds)]
        log = open(args.workdir / f"{strategy}-{row.role}-{row.pk}.log", "w")
        logs.append(log)
        name = f"{row} (driver, JVM, Python workers)"
        processes[name] = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True, env=dict(os.environ, PYSPARK_SUBMIT_ARGS=APP_CONF))
    try:
        deadline = time.monotonic() + args.start_timeout
        while not all((b := bus.read_heartbeat(client, row.pk)) is not None and b.status == "running" for row in rows):
            if any(p.poll() is not None for p in processes.values()) or time.monotonic() > deadline:
                raise RuntimeError(f"{strategy}: a process did not start; see {args.workdir}/{strategy}-*.log")
            time.sleep(0.5)
        run = RateRun(args.rate, args.seconds)
        done = threading.Event()
        listener = start_clients(run, port, query_ids, token, done)
        poller = threading.Thread(target=_poll_min_applied, args=(run, bus.connect(redis_url), evaluators, done))
        poller.start()
        roots = {"benchmark": os.getpid(), "web (daphne)": web_pid, **cluster_roots,
                 **{name: p.pid for name, p in processes.items()}}
        sampler = CpuSampler(roots).start()
        idle_before = sampler.reading()
        time.sleep(args.idle_seconds)
        idle_after = sampler.reading()
        idle = {name: round(idle_after.get(name, 0.0) - idle_before.get(name, 0.0), 2) for name in roots}
        cpu_before, wall_before = sampler.reading(), time.monotonic()
        _feed(run, lines[:int(args.rate * args.seconds)], port, stream.pk, stream.ingest_token,
              stop_at=time.monotonic() + args.seconds * 3)
        last_seq = run.requests[-1].last_seq if run.requests else -1
        drained, drain_deadline = False, time.monotonic() + args.drain_timeout
        while time.monotonic() < drain_deadline:
            if run.applied and run.applied[-1][1] >= last_seq:
                drained = True
                break
            if dead := [name for name, p in processes.items() if p.poll() is not None]:
                raise RuntimeError(f"{strategy}: {', '.join(dead)} exited; see {args.workdir}/{strategy}-*.log")
            time.sleep(0.1)
        cpu_after, wall = sampler.reading(), time.monotonic() - wall_before
        sampler.stop()
        time.sleep(args.trigger_seconds * 2 + 2)  # the last changes reach the sockets
        done.set()
        poller.join()
        listener.join()
        run.cpu_seconds = {}
        summary = _summarise(run, client, query_ids, drained)
        cpu = {name: round(cpu_after.get(name, 0.0) - cpu_before.get(name, 0.0), 2) for name in roots}
        ops = summary["ops_sent"]
        raw_bytes, derived_bytes = (sum(p.stat().st_size for p in landing_files(path))
                                    for path in (stream.landing_path(), stream.derived_path()))
        readers = {"shipping": len(query_ids), "sharing": len(groups)}.get(strategy, 0)
        derived_readers = count if stream.preprocess else 0
        consumer_bytes = readers * raw_bytes + derived_readers * derived_bytes
        for name, batches in count_batches(client, stream, rows).items():
            described[name]["batches"] = batches
        reported = reported_classes(client, stream.pk)
        for row in rows:
            if row.role != "preprocessor":
                described[f"{row} (driver, JVM, Python workers)"]["reported"] = reported.get(row.pk)
        preprocessor_read = raw_bytes if stream.preprocess else 0
        changes = {q: sorted((c.seq, c.type, c.result.key) for _, c in bus.read_changes(client, q, "0-0", count=10_000_000)
                             if isinstance(c, (ResultAdded, ResultRemoved))) for q in query_ids}
        return {
            "strategy": strategy,
            "spark_applications": len(processes),
            "evaluators": count,
            "groups": groups if strategy != "shipping" else [[q] for q in query_ids],
            "wall_seconds": round(wall, 1),
            "cpu_seconds": cpu,
            "cpu_seconds_total": round(sum(v for k, v in cpu.items() if k not in ("benchmark",)), 2),
            "processes": described,
            "idle_seconds": args.idle_seconds,
            "idle_cpu_seconds": idle,
            "bytes": {"raw_file_bytes": raw_bytes, "derived_file_bytes": derived_bytes,
                      "raw_readers": readers, "derived_readers": derived_readers,
                      "preprocessor_raw_read": preprocessor_read,
                      "consumers_bytes_per_op": round(consumer_bytes / ops, 1) if ops else None,
                      "all_readers_bytes_per_op": round((consumer_bytes + preprocessor_read) / ops, 1) if ops else None},
            "summary": summary,
            "changes": {str(k): v for k, v in changes.items()},
        }
    finally:
        for p in processes.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in processes.values():
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        for log in logs:
            log.close()


def all_readers_bytes_per_op(result: dict[str, Any]) -> float:
    """Bytes read per op by every reader, the pre-processor's raw read included (computed for runs written
    before the benchmark gave it)."""
    read = result["bytes"]
    if "all_readers_bytes_per_op" in read:
        return read["all_readers_bytes_per_op"]
    return read["consumers_bytes_per_op"] + read["preprocessor_raw_read"] / result["summary"]["ops_sent"]


def spread(result: dict[str, Any]) -> str:
    """Classes per evaluator as the evaluators reported them (as placed for runs without reports)."""
    counts = [p.get("reported", p) for p in result["processes"].values() if p["role"] != "preprocessor"]
    return "+".join(str(c["classes"]) if c else "?" for c in counts)


def table(report: dict[str, Any]) -> str:
    """The run as a Markdown table, each strategy against the first strategy run (data shipping when run)."""
    results = report["results"]
    base = results[0]
    rows = ["| strategy | Spark apps | classes per evaluator | CPU s (ratio) | consumer bytes/op (ratio) "
            "| all readers bytes/op (ratio) | ws p50 / p99 s | changes | missing |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        summary, cpu, read = r["summary"], r["cpu_seconds_total"], r["bytes"]["consumers_bytes_per_op"]
        every = all_readers_bytes_per_op(r)
        rows.append(
            f"| {r['strategy']} | {r['spark_applications']} | {spread(r)} "
            f"| {cpu:.1f} ({cpu / base['cpu_seconds_total']:.2f}) "
            f"| {read:.1f} ({read / base['bytes']['consumers_bytes_per_op']:.3f}) "
            f"| {every:.1f} ({every / all_readers_bytes_per_op(base):.3f}) "
            f"| {summary['ws_latency_s']['p50']:.2f} / {summary['ws_latency_s']['p99']:.2f} "
            f"| {r['changes_total']} | {sum(summary['ws_changes_missing'].values())} |")
    return "\n".join(rows)


def fit_model(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The CPU model of docs/scaling.md, fitted to one or more runs (two offered rates separate the cost of a
    micro-batch from the cost of an op).

    Fixed CPU per second of each kind of process comes from the idle phase.
    The fed phase, less each process's idle rate over it, is split by least
    squares over every process of every strategy and run:

    * an evaluator (its driver): beta_eval x its batches + ops x (b_raw or
      b_derived, by its source; taking its classes' work in, whose count
      was below the noise at these sizes);
    * the pre-processor (its driver): beta_pre x its batches + b_pre x ops;
    * the cluster's daemons and executors: beta_exec_raw x the batches of
      the raw readers (whose executors also parse and classify) +
      beta_exec_derived x the batches of the derived readers (which only
      read) + e_raw x ops x raw readers;
    * the web process (ingest, websocket push): w x ops.

    ``check`` sets the model against each strategy's measured total: a fit to
    the same runs, not a prediction.
    """
    import numpy as np

    runs = [(report["rate"], r) for report in reports for r in report["results"]]
    eval_x, eval_y, pre_x, pre_y, work_x, work_y, idle_x, idle_y = [], [], [], [], [], [], [], []
    web_x, web_y, fixed_driver, fixed_web, eval_run, pre_run = [], [], [], [], [], []
    for i, (_, r) in enumerate(runs):
        ops, wall, idle_s = r["summary"]["ops_sent"], r["wall_seconds"], r["idle_seconds"]

        def busy(name: str) -> float:
            return r["cpu_seconds"][name] - r["idle_cpu_seconds"][name] * wall / idle_s

        apps = r["processes"]
        for name, p in apps.items():
            fixed_driver.append(r["idle_cpu_seconds"][name] / idle_s)
            if p["role"] == "preprocessor":
                pre_x.append([p["batches"], ops])
                pre_y.append(busy(name))
                pre_run.append(i)
            else:
                derived = p["source"] == "derived"
                eval_x.append([p["batches"], ops * (not derived), ops * derived])
                eval_y.append(busy(name))
                eval_run.append(i)
        cluster = [n for n in r["cpu_seconds"] if n.startswith("cluster ")]
        raw = [p for p in apps.values() if p["source"] == "raw"]
        work_x.append([sum(p["batches"] for p in raw), sum(p["batches"] for p in apps.values() if p not in raw),
                       ops * len(raw)])
        work_y.append(sum(busy(n) for n in cluster))
        idle_x.append([1.0, len(apps)])
        idle_y.append(sum(r["idle_cpu_seconds"][n] for n in cluster) / idle_s)
        web_x.append([ops])
        web_y.append(busy("web (daphne)"))
        fixed_web.append(r["idle_cpu_seconds"]["web (daphne)"] / idle_s)

    modelled = np.zeros(len(runs))  # each run's busy CPU as the fitted model has it

    def lstsq(x: list, y: list, run: Sequence[int] | None = None) -> list[float]:
        """The least-squares coefficients; with ``run`` (each row's run), the fitted busy CPU is added to
        ``modelled``."""
        matrix = np.array(x, dtype=float)
        coefficients = np.linalg.lstsq(matrix, np.array(y), rcond=None)[0]
        if run is not None:
            np.add.at(modelled, list(run), matrix @ coefficients)
        return [float(v) for v in coefficients]

    every_run = range(len(runs))
    beta_eval, b_raw, b_derived = lstsq(eval_x, eval_y, eval_run)
    beta_pre, b_pre = lstsq(pre_x, pre_y, pre_run) if pre_x else (0.0, 0.0)
    beta_exec_raw, beta_exec_derived, e_raw = lstsq(work_x, work_y, every_run)
    (w,) = lstsq(web_x, web_y, every_run)
    w0, w_app = lstsq(idle_x, idle_y)
    model = {
        "fixed_cpu_per_second": {"driver (per application)": float(np.mean(fixed_driver)),
                                 "cluster daemons": w0, "executors (per application)": w_app,
                                 "web": float(np.mean(fixed_web))},
        "cpu_ms_per_batch": {"beta_eval": beta_eval * 1e3, "beta_pre": beta_pre * 1e3,
                             "beta_exec_raw": beta_exec_raw * 1e3, "beta_exec_derived": beta_exec_derived * 1e3},
        "cpu_us_per_op": {"b_raw": b_raw * 1e6, "b_derived": b_derived * 1e6, "b_pre": b_pre * 1e6,
                          "e_raw": e_raw * 1e6, "w": w * 1e6},
    }
    fixed = model["fixed_cpu_per_second"]
    check = []
    for (rate, r), busy_seconds in zip(runs, modelled):
        apps = len(r["processes"])
        seconds = busy_seconds + r["wall_seconds"] * (
            apps * (fixed["driver (per application)"] + w_app) + w0 + fixed["web"])
        check.append({"rate": rate, "strategy": r["strategy"], "measured_cpu_seconds": r["cpu_seconds_total"],
                      "model_cpu_seconds": round(float(seconds), 1)})
    model["check"] = check
    return model


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["strategy"] for r in results]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    axes[0].bar(names, [r["cpu_seconds_total"] for r in results])
    axes[0].set_ylabel("CPU seconds (all processes but the load generator)")
    axes[1].bar([x - 0.2 for x in range(len(names))], [r["bytes"]["consumers_bytes_per_op"] or 0 for r in results],
                width=0.4, label="consumers")
    axes[1].bar([x + 0.2 for x in range(len(names))], [all_readers_bytes_per_op(r) for r in results], width=0.4,
                label="every reader (pre-processor's raw read too)")
    axes[1].set_xticks(range(len(names)), names)
    axes[1].set_ylabel("bytes read per op")
    if names[0] == "shipping":  # the issue's targets: CPU <= 1/2, bytes <= 1/8 of data shipping's
        axes[0].axhline(results[0]["cpu_seconds_total"] / 2, color="tab:red", linestyle="--", label="1/2 of shipping")
        axes[1].axhline(results[0]["bytes"]["consumers_bytes_per_op"] / 8, color="tab:red", linestyle="--",
                        label="1/8 of shipping")
        axes[0].legend()
    axes[1].legend()
    for i, q in enumerate(("p50", "p99")):
        axes[2].bar([x + i * 0.4 for x in range(len(names))], [r["summary"]["ws_latency_s"][q] or 0 for r in results],
                    width=0.4, label=q)
    axes[2].set_xticks([x + 0.2 for x in range(len(names))], names)
    axes[2].set_ylabel("websocket latency (s)")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=8)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--trigger-seconds", type=float, default=2.0)
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES[:3]))
    parser.add_argument("--placed-evaluators", type=int, nargs="+", default=[2],
                        help="with strategy placed: a run placed-N on N evaluators for each N given")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-cores", type=int, default=8,
                        help="cores each worker offers (more than the machine's: one application per query needs one each)")
    parser.add_argument("--worker-memory", default="6g")
    parser.add_argument("--idle-seconds", type=float, default=30.0,
                        help="CPU of every process is also measured this long with no ops, before the feed")
    parser.add_argument("--start-timeout", type=float, default=600.0)
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "scale-out")
    parser.add_argument("--redis-db", type=int, default=8)
    parser.add_argument("--fit", type=Path, nargs="+", metavar="JSON",
                        help="run nothing: print the tables of earlier runs' scale_out.json and the model fitted "
                             "to them together")
    args = parser.parse_args(argv)
    if args.fit:
        reports = [json.loads(path.read_text()) for path in args.fit]
        for report in reports:
            print(table(report))
        print(json.dumps(fit_model(reports), indent=2))
        return 0

    redis_url, lines = prepare(args.workdir, args.redis_db, int(args.rate * args.seconds) + 1)
    from streaming.spark.cluster import LocalCluster
    from streaming.workloads.queries import StreamProfile, random_queries

    schema_doc = json.loads((args.workdir / "workload" / "schema.json").read_text())
    profile = StreamProfile(schema_doc, (json.loads(line) for line in lines[:50_000]))
    queries = random_queries(profile, args.queries, seed=7, windows=(1800.0, 3600.0, 7200.0), filters=0)

    port, web, web_log = start_web(args.workdir)
    results = []
    cluster = LocalCluster(args.workdir / "cluster", workers=args.workers, cores=args.worker_cores,
                           memory=args.worker_memory)
    try:
        cluster.start()
        for strategy, placed_on in configurations(args.strategies, args.placed_evaluators):
            daemons = {f"cluster {name} (with its executors)": pid for name, pid in cluster.daemon_pids().items()}
            result = run_strategy(strategy, args, lines, queries, port, web.pid, redis_url, cluster.master_url,
                                  daemons, placed_on)
            results.append(result)
            short = {k: v for k, v in result.items() if k not in ("changes", "summary")}
            print(json.dumps(short), flush=True)
    finally:
        cluster.stop()
        web.send_signal(signal.SIGTERM)
        web.wait(30)
        web_log.close()
    reference = results[0]["changes"] if results else {}
    identical = {r["strategy"]: [list(map(list, v)) for v in r["changes"].values()] ==
                 [list(map(list, v)) for v in reference.values()] for r in results}
    for r in results:
        r["changes_total"] = sum(len(v) for v in r.pop("changes").values())
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average_1_5_15_at_end": list(os.getloadavg())},
        "queries": args.queries, "rate": args.rate, "seconds": args.seconds, "trigger_seconds": args.trigger_seconds,
        "query_definitions": queries,
        "identical_changes_to_first_strategy": identical,
        "results": results,
    }
    (args.workdir / "scale_out.json").write_text(json.dumps(report, indent=2))
    _plot(results, args.workdir / "scale_out.png")
    print(table(report))
    print(f"wrote {args.workdir / 'scale_out.json'} and scale_out.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
