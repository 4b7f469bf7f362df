"""Soak with faults (issue 20, item 6): a stream fed for minutes while Redis, PostgreSQL, a Spark worker and the
web server are killed on a schedule; every client's changes and the history held to the reference.

Everything the run breaks is its own (the fault tests' parts, ``tests.faults``):
a redis-server with the persistence of ``make run`` (none), a throwaway
PostgreSQL cluster, a Spark standalone cluster of two workers (what ``make
cluster`` runs), daphne under ``scripts/keep_up.sh`` (``make run``'s
supervision), the evaluator launched on the cluster by the supervisor, beat's
supervision and history rounds in a process of their own (as Celery's worker
runs them). ``--queries`` saved keyword
queries (keyword sets drawn from ``--keyword-sets`` sets of the stream's words
by ``streaming.workloads.queries``; one Tmax and window for all, the reference
engine's query), ``--clients`` websocket clients speaking the browser's
protocol (a snapshot, then changes; on a drop they reconnect with ``?after=``
the last id they hold). The E-commerce lines (seed 11) are ingested in this
process at ``--rate`` ops/s in bodies of a tenth of a second, as the ingest view
does (the stream goes on while the web server is down; a body refused with
nothing stored is ingested again). The faults, evenly spread over the run:

* ``redis-kill``: SIGKILL, started again in its directory (with no
  persistence it comes back empty);
* ``redis-empty``: SIGKILL, an empty instance in a new directory takes its
  place (every live set, change stream, plan and cursor gone);
* ``postgres-crash``: ``pg_ctl stop -m immediate``, started again (crash
  recovery replays the WAL);
* ``spark-worker-kill``: SIGKILL of a worker daemon (its executor dies; the
  application goes on with the other worker; the worker is not restarted);
* ``web-kill``: SIGKILL of daphne; ``keep_up.sh`` starts it again.

A fault's recovery is the time from its injection until the evaluator has
applied every op ingested before it and every client holds its query's newest
change as of then. Afterwards each query's reference (the reference engine
over the lines in the order sent, never what the product stored) is computed
in ``--reference-processes`` processes, and each client's output is compared
change by change (``tests.faults.reference.feed_differences``: lost,
duplicated, wrong snapshot results), and so is each query's history.

    .venv/bin/python benchmarks/soak_faults.py --minutes 30 --rate 5000 --queries 100 --clients 100

writes ``<workdir>/soak_faults.json`` and ``soak_faults.png`` (p50/p99 per 10 s of ingest with the faults marked).
"""

from __future__ import annotations

import argparse
import bisect
import gc
import json
import os
import platform
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.pipeline import _percentile  # noqa: E402

FAULTS = ("redis-kill", "redis-empty", "postgres-crash", "spark-worker-kill", "web-kill")
DOWN_FOR = 0.5  # seconds a killed service stays down before it is started again
BACKOFF_MAX = 15.0  # LiveFeed's cap on a client's reconnection backoff


class Sent:
    """The ingested bodies: when each was sent (``time.monotonic``) and its seqs, for the latency of a seq."""

    def __init__(self) -> None:
        self.at: list[float] = []
        self.first: list[int] = []
        self.last: list[int] = []

    def add(self, at: float, first: int, last: int) -> None:
        self.at.append(at)
        self.first.append(first)
        self.last.append(last)

    def when(self, seq: int) -> float | None:
        i = bisect.bisect_right(self.first, seq) - 1
        return self.at[i] if i >= 0 and seq <= self.last[i] else None

    @property
    def last_seq(self) -> int:
        return self.last[-1] if self.last else -1


def freeze_after_full_collections() -> None:
    """From now on, freeze (``gc.freeze``) what survives each full collection, so the next one walks only
    what came since. For a long run's own process: it keeps every message its clients receive (about 18
    tracked containers each), and a full collection, walking all of them, paused it for 7 s at a million
    messages (measured), which the clients' receipt times, hence the measured latency, carried. Frozen
    objects are still freed when their last reference goes; only a cycle among them stays."""

    def frozen(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2:
            gc.freeze()

    gc.callbacks.append(frozen)


def configure(workdir: Path, redis_url: str, database_url: str, master: str) -> None:
    """Point Django (this process and the children) at the run's own services and directories."""
    os.environ.update(
        DJANGO_SETTINGS_MODULE="kwmonitor.settings", DATABASE_URL=database_url, REDIS_URL=redis_url,
        LANDING_DIR=str(workdir / "landing"), CHECKPOINT_DIR=str(workdir / "checkpoints"),
        SPARK_MASTER=master, SECRET_KEY="soak-benchmark-not-secret", DEBUG="0", HTTPS="off",
        ALLOWED_HOSTS="127.0.0.1,localhost", SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)


def keyword_sets(queries: int, pool: int, seed: int) -> list[str]:
    """The queries' keyword sets, drawn from ``pool`` sets of the E-commerce stream's words."""
    from streaming.ops import op_to_dict
    from streaming.workloads import ecommerce
    from streaming.workloads.queries import StreamProfile, random_queries

    profile = StreamProfile(ecommerce.SCHEMA_DOC, (op_to_dict(op) for op in ecommerce.build(50_000, seed=11).ops()))
    return [" ".join(q["keywords"]) for q in random_queries(profile, queries, seed=seed, pool=pool, filters=0)]


def crash_postgres(own_pg) -> float:
    """Crash PostgreSQL (immediate shutdown) and start it again; this thread's connection, which the crash
    broke, is closed so that its next query opens a new one. Returns how long it did not answer."""
    from django.db import connection

    down = own_pg.crash("immediate", DOWN_FOR)
    connection.close()
    return down


def recovered(client, evaluator_id: int, sent: Sent, clients, timeout: float) -> tuple[float | None, dict]:
    """Seconds until the evaluator applied every op ingested so far and every client holds its query's newest
    change as of then (None: not within ``timeout``), and what was still missing at the timeout: the evaluator's
    applied seq, or the clients that did not hold their query's newest change (with the id they held)."""
    from streaming import bus
    from tests.faults.pipeline import applied_seq

    began, seq = time.monotonic(), sent.last_seq
    deadline = began + timeout

    def waited(condition: Callable[[], bool]) -> bool:
        while not condition():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def applied_now() -> int | None:
        try:
            return applied_seq(client, evaluator_id)
        except OSError:
            return None

    def applied() -> bool:
        return (applied_now() or -1) >= seq

    if not waited(applied):
        return None, {"applied_seq": applied_now(), "wanted_seq": seq}
    newest = {}
    for qid in {qid for qid, _ in clients.messages}:
        last = client.xrevrange(bus.Keys.changes(qid), count=1)
        if last:
            newest[qid] = last[0][0].decode() if isinstance(last[0][0], bytes) else last[0][0]
    if waited(lambda: clients.holding(newest)):
        return time.monotonic() - began, {}
    lagging = clients.lagging(newest)
    return None, {"clients_lagging": {key: {"held": at, "newest": newest[int(key.partition("/")[0])]}
                                      for key, at in lagging.items()}}


def first_receipts(sent: Sent, clients) -> Iterator[tuple[float, float]]:
    """(ingested, received) of each change each client received, the first time only: a client that takes a new
    snapshot while the evaluator rebuilds after a Redis loss receives the republished changes after it again,
    which are not a lag of the stream."""
    for got in clients.messages.values():
        seen: set[tuple[int, str, str]] = set()
        for at, message in got:
            if message["type"] not in ("result.add", "result.remove"):
                continue
            change = (message["seq"], message["type"], message["result"]["key"])
            if change not in seen and (ingested := sent.when(message["seq"])):
                seen.add(change)
                yield ingested, at


def timeline(sent: Sent, clients, began: float, seconds: float) -> list[dict[str, Any]]:
    """Per 10 s of ingest: p50/p99 from an op's ingest to its change first reaching a client, over every client."""
    buckets: dict[int, list[float]] = {}
    for ingested, at in first_receipts(sent, clients):
        buckets.setdefault(int((ingested - began) // 10), []).append(at - ingested)
    return [{"t": 10 * b, "changes": len(buckets.get(b, [])), "p50": _percentile(buckets.get(b, []), 0.5),
             "p99": _percentile(buckets.get(b, []), 0.99)} for b in range(int(seconds // 10) + 1)]


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [p for p in report["timeline"] if p["p50"] is not None]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    for name, style in (("p50", "o-"), ("p99", "s-")):
        ax.plot([p["t"] for p in points], [p[name] for p in points], style, markersize=3, label=f"websocket {name}")
    for fault in report["faults"]:
        ax.axvline(fault["at_s"], color="tab:red", linestyle="--", linewidth=1)
        recovery = f"{fault['recovery_s']:.0f} s" if fault["recovery_s"] is not None else "not recovered"
        ax.annotate(f"{fault['name']} ({recovery})", (fault["at_s"], 1), xycoords=("data", "axes fraction"),
                    rotation=90, va="top", ha="right", fontsize=8, color="tab:red")
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the first op ingested (ops of each 10 s)")
    ax.set_ylabel("ingest to websocket (s)")
    ax.set_title(f"{report['rate']} ops/s for {report['seconds']:.0f} s, {report['queries']} queries, "
                 f"{report['clients']} clients")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from streaming.spark.cluster import LocalCluster
    from tests.faults.services import MAKE_RUN_PERSISTENCE, OwnPostgres, OwnRedis

    workdir = args.workdir
    own_redis = OwnRedis(workdir / "redis", MAKE_RUN_PERSISTENCE)
    own_pg = OwnPostgres()
    cluster = LocalCluster(workdir / "spark", workers=2, cores=1, memory="1g")
    try:
        own_redis.start()
        own_pg.start()
        import psycopg

        with psycopg.connect(own_pg.url("postgres"), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "kw"')
        cluster.start()
        configure(workdir, own_redis.url, own_pg.url("kw"), cluster.master_url)
        import django

        django.setup()
        return soak(args, own_redis, own_pg, cluster)
    finally:
        cluster.stop()
        own_redis.stop()
        own_pg.close()


def soak(args: argparse.Namespace, own_redis, own_pg, cluster) -> dict[str, Any]:
    """Feed the stream, inject the faults, then compare every client and history with the reference."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from kwmonitor.catalog.models import Schema
    from kwmonitor.streams.history import HistoryPersister
    from streaming import bus
    from streaming.workloads import ecommerce
    from tests.browser.server import ROOT as SERVED, asgi_server
    from tests.faults.pipeline import (FeedClients, check_landing, compute_references, evaluated, fault_stream,
                                       feed_in_process, history_of)
    from tests.faults.reference import by_seq, differences, feed_differences
    from tests.faults.services import daphne_pid

    workdir = args.workdir
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("soak", "soak@example.com", "soak-password-1")
    schema = Schema.import_document(ecommerce.SCHEMA_DOC, description="E-commerce demo")
    ops = int(args.rate * args.minutes * 60)
    faulty = fault_stream(settings, workdir, user, schema, keyword_sets(args.queries, args.keyword_sets, args.seed),
                          args.tmax, ops, args.window_seconds, references=False)
    client = bus.connect(own_redis.url, retry_seconds=60)
    query_ids = [q.pk for q in faulty.queries]
    followed = query_ids[:args.clients]
    per_query = max(1, args.clients // len(query_ids))
    tally: Counter = Counter()
    sent = Sent()
    seconds = args.minutes * 60
    faults = [{"name": name, "planned_s": round(seconds * (i + 1) / (len(args.faults) + 1), 1)}
              for i, name in enumerate(args.faults)]
    redis_dirs = iter(workdir / f"redis-empty-{i}" for i in range(len(faults)))
    with asgi_server(own_redis.url, extra_env=faulty.env, under=[str(SERVED / "scripts/keep_up.sh")],
                     timeout=60) as base, evaluated(client, faulty.stream, own_redis.url) as evaluator, \
            FeedClients(base, faulty.token, followed, per_query, BACKOFF_MAX) as clients:
        port = int(base.rpartition(":")[2])
        wait = time.monotonic() + 120
        while not all(clients.messages.values()) and time.monotonic() < wait:
            time.sleep(0.2)
        workers = [pid for name, pid in cluster.daemon_pids().items() if name != "master"]
        inject: dict[str, Callable[[], float | None]] = {
            "redis-kill": lambda: own_redis.crash(DOWN_FOR),
            "redis-empty": lambda: own_redis.crash(DOWN_FOR, next(redis_dirs)),
            "postgres-crash": lambda: crash_postgres(own_pg),
            "spark-worker-kill": lambda: os.kill(workers[0], signal.SIGKILL),
            "web-kill": lambda: os.kill(daphne_pid(port), signal.SIGKILL),
        }
        began = time.monotonic()
        feeder = threading.Thread(target=feed_in_process, daemon=True, kwargs=dict(
            stream=faulty.stream, lines=faulty.lines, tally=tally, body=max(1, args.rate // 10),
            per_second=args.rate, sent=sent.add))
        feeder.start()
        for fault in faults:
            time.sleep(max(0.0, began + fault["planned_s"] - time.monotonic()))
            fault["at_s"] = round(time.monotonic() - began, 1)
            fault["seq_at"] = sent.last_seq
            down = inject[fault["name"]]()
            fault["down_s"] = round(down, 2) if down is not None else None
            after, missing = recovered(client, evaluator.evaluator_id, sent, clients, args.recovery_timeout)
            fault["recovery_s"] = round(after + (down or 0.0), 1) if after is not None else None
            if missing:
                fault["missing_at_timeout"] = missing
            print(json.dumps(fault), flush=True)
        feeder.join()
        fed_s = time.monotonic() - began
        drained, drain_missing = recovered(client, evaluator.evaluator_id, sent, clients, args.drain_timeout)
        time.sleep(2)
    HistoryPersister(client).run()
    reference_began = time.monotonic()
    compute_references(faulty, args.reference_processes)
    reference_s = time.monotonic() - reference_began
    per_client = []
    for (qid, n), got in clients.messages.items():
        found = feed_differences(faulty.references[qid], [m for _, m in got])
        per_client.append({"query": qid, "client": n, "messages": len(got), **found})
    history = {}
    for query in faulty.queries:
        rows = history_of(query)
        try:
            by_seq(rows)  # fails on a seq that goes back
            ordered = True
        except AssertionError:
            ordered = False
        history[str(query.pk)] = {"rows": len(rows), "reference": len(faulty.references[query.pk]),
                                  "in_seq_order": ordered, **differences(faulty.references[query.pk], rows)}
    try:
        check_landing(settings.LANDING_DIR, faulty, tally)
        landing_equal = True
    except AssertionError:
        landing_equal = False
    points = timeline(sent, clients, began, fed_s)
    latencies = [at - ingested for ingested, at in first_receipts(sent, clients)]
    return {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_average_1_5_15_at_end": list(os.getloadavg())},
        "rate": args.rate, "seconds": seconds, "ops": ops, "queries": len(query_ids), "clients": len(per_client),
        "keyword_sets": len({q.keywords for q in faulty.queries}), "tmax": args.tmax,
        "window_seconds": args.window_seconds,
        "fed_seconds": round(fed_s, 1), "ingest": dict(tally), "evaluator_up_s": round(evaluator.up_after, 1),
        "drained_after_feed_s": round(drained, 1) if drained is not None else None,
        "missing_at_drain_timeout": drain_missing,
        "beat_rounds_failed": dict(evaluator.beat_errors), "client_errors": [repr(e) for e in clients.errors],
        "reference_seconds": round(reference_s, 1),
        "faults": faults,
        "ws_latency_s": {"changes": len(latencies), "p50": _percentile(latencies, 0.5),
                         "p99": _percentile(latencies, 0.99), "max": max(latencies, default=None)},
        "totals": {key: sum(c[key] for c in per_client) for key in ("lost", "duplicated", "snapshot_wrong")}
                  | {"history_lost": sum(h["lost"] for h in history.values()),
                     "history_duplicated": sum(h["duplicated"] for h in history.values()),
                     "reference_changes_followed": sum(len(faulty.references[c["query"]]) for c in per_client),
                     "landing_equal_to_lines_sent": landing_equal},
        "timeline": points,
        "clients_detail": per_client,
        "history": history,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--keyword-sets", type=int, default=10,
                        help="the queries' keyword sets are drawn from this many (each distinct query's reference "
                             "is computed once, over every line sent)")
    parser.add_argument("--tmax", type=int, default=4)
    parser.add_argument("--window-seconds", type=float, default=7200.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS),
                        help="injected in this order, evenly spread over the run")
    parser.add_argument("--recovery-timeout", type=float, default=300.0)
    parser.add_argument("--drain-timeout", type=float, default=600.0)
    parser.add_argument("--reference-processes", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "soak-faults")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the run's own services on the way out
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    freeze_after_full_collections()  # the clients' record grows to millions of messages: no pauses walking it
    report = run(args)
    (args.workdir / "soak_faults.json").write_text(json.dumps(report, indent=2))
    plot(report, args.workdir / "soak_faults.png")
    print(json.dumps({k: v for k, v in report.items() if k not in ("timeline", "clients_detail", "history")},
                     indent=2))
    print(f"wrote {args.workdir / 'soak_faults.json'} and soak_faults.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
