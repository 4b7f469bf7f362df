"""End-to-end benchmark: HTTP ingest -> source -> Spark evaluator -> Redis -> websocket clients.

For each offered rate (ops/s) it loads the E-commerce demo (schema, the three
demo queries) on a fresh stream, starts the real evaluator process
(``python -m streaming.spark``) next to one ``daphne`` serving the project,
opens one websocket per query (``/ws/queries/<id>/?token=...``), and posts the
demo workload (``python -m streaming workload ecommerce``) to
``/ingest/<stream>/`` in requests paced every 100 ms. It records:

* sustained ops/s: ops sent / (first send -> last op applied by the evaluator);
* op latency: request sent -> the evaluator's applied seq covers the request;
* websocket latency: request sent -> a change with that seq reaches the client;
* nothing lost: applied seq reaches the last ingested seq, and every change in
  each query's Redis change stream since the client connected reached it.

Everything runs in a scratch directory with its own SQLite database and Redis
database number, so ``make run`` is not disturbed::

    .venv/bin/python benchmarks/pipeline.py --rates 1000 5000 20000 --seconds 60

writes ``<workdir>/pipeline.json`` and ``<workdir>/pipeline.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import http.client
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _configure(workdir: Path, redis_db: int) -> str:
    """Point Django (this process and the children) at the scratch directory and Redis db."""
    redis_url = f"redis://127.0.0.1:6379/{redis_db}"
    os.environ.update(
        DJANGO_SETTINGS_MODULE="kwmonitor.settings",
        DATABASE_URL=f"sqlite:///{workdir / 'db.sqlite3'}",
        REDIS_URL=redis_url,
        LANDING_DIR=str(workdir / "landing"),
        CHECKPOINT_DIR=str(workdir / "checkpoints"),
        SECRET_KEY="pipeline-benchmark-not-secret",
        DEBUG="0",
        HTTPS="off",  # served over plain http: no redirect of ingest to https
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
    )
    return redis_url


@dataclass
class Request:
    sent: float
    first_seq: int
    last_seq: int


@dataclass
class RateRun:
    rate: int
    seconds: float
    requests: list[Request] = field(default_factory=list)
    applied: list[tuple[float, int]] = field(default_factory=list)
    received: dict[int, list[tuple[float, int, str]]] = field(default_factory=dict)
    snapshot_ids: dict[int, str] = field(default_factory=dict)
    rejected_at_ingest: int = 0
    failed_requests: int = 0
    batches: list[dict[str, Any]] = field(default_factory=list)
    cpu_seconds: dict[str, float] = field(default_factory=dict)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _feed(run: RateRun, lines: list[str], port: int, stream_id: int, token: str, stop_at: float) -> None:
    """Post ``lines`` in requests every 100 ms (rate / 10 ops each), catching up when behind."""
    per_request = max(1, run.rate // 10)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    start = time.monotonic()
    for i, offset in enumerate(range(0, len(lines), per_request)):
        due = start + i * 0.1
        now = time.monotonic()
        if now < due:
            time.sleep(due - now)
        if time.monotonic() > stop_at:
            break
        body = ("\n".join(lines[offset:offset + per_request]) + "\n").encode()
        sent = time.time()
        conn.request("POST", f"/ingest/{stream_id}/", body=body, headers=headers)
        response = conn.getresponse()
        data = json.loads(response.read() or b"{}")
        if response.status != 200 or data.get("first_seq") is None:
            run.failed_requests += 1
            continue
        run.rejected_at_ingest += data["rejected"]
        run.requests.append(Request(sent, data["first_seq"], data["last_seq"]))
    conn.close()


def _poll_applied(run: RateRun, client, evaluator_id: int, done: threading.Event) -> None:
    from streaming.bus import Keys

    key = Keys.evaluator_state(evaluator_id)
    last = -2
    while not done.is_set():
        seq = int(client.hget(key, "seq") or -1)
        if seq != last:
            run.applied.append((time.time(), seq))
            last = seq
        time.sleep(0.02)


def _watch_batches(run: RateRun, client, stream_id: int, done: threading.Event) -> None:
    """Keep every batch's metrics as they are published (the events stream is capped)."""
    from streaming import bus
    from streaming.events import BatchMetrics

    last = "$"
    while not done.is_set():
        for entry_id, event in bus.read_stream_events(client, stream_id, last, count=1000, block_ms=500):
            last = entry_id
            if isinstance(event, BatchMetrics):
                run.batches.append({"ts": event.ts, "rows": event.input_rows, "ms": event.duration_ms,
                                    "breakdown_ms": event.breakdown_ms, "dead_letters": event.dead_letters})


def _process_cpu(roots: dict[str, int], fields_of_cpu: slice) -> dict[int, tuple[str, float]]:
    """Each process's CPU seconds (the ``/proc/<pid>/stat`` fields ``fields_of_cpu`` added up) and the named
    tree it belongs to (other processes by their command name)."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = tail.split()
        parent[int(entry)] = int(fields[1])
        used[int(entry)] = (head.split("(", 1)[1], sum(int(x) for x in fields[fields_of_cpu]) / ticks)
    owner = {pid: name for name, pid in roots.items()}
    out: dict[int, tuple[str, float]] = {}
    for pid, (comm, seconds) in used.items():
        node = pid
        while node > 1 and node not in owner:
            node = parent.get(node, 1)
        out[pid] = (owner.get(node, comm), seconds)
    return out


def _cpu_times(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system, reaped children included) per named process tree; other processes by name."""
    out: dict[str, float] = {}
    for name, seconds in _process_cpu(roots, slice(11, 15)).values():
        out[name] = out.get(name, 0.0) + seconds
    return out


class CpuSampler:
    """CPU seconds per named process tree, counting processes that exit between two readings.

    :func:`_cpu_times` reads the live processes only: a process that exits
    (a Spark executor's Python worker, an executor) takes its CPU with it
    unless its parent waits for it, so the CPU of a tree between two
    readings can even come out negative. A thread here reads every
    process's own user + system time every ``every`` seconds and keeps the
    last value of each process seen, in the tree it was first seen in (an
    orphan adopted by init stays in its tree); :meth:`reading` adds them up,
    so a process that exits loses at most ``every`` seconds of its CPU.
    """

    def __init__(self, roots: dict[str, int], every: float = 0.5) -> None:
        self.roots, self.every = roots, every
        self._seen: dict[int, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "CpuSampler":
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        now = _process_cpu(self.roots, slice(11, 13))
        with self._lock:
            for pid, (name, seconds) in now.items():
                self._seen[pid] = (self._seen.get(pid, (name, 0.0))[0], seconds)

    def _run(self) -> None:
        while not self._done.wait(self.every):
            self._sample()

    def reading(self) -> dict[str, float]:
        """CPU seconds per named tree so far (every process seen, alive or not)."""
        self._sample()
        out: dict[str, float] = {}
        with self._lock:
            for name, seconds in self._seen.values():
                out[name] = out.get(name, 0.0) + seconds
        return out


async def _listen(run: RateRun, port: int, query_ids: list[int], token: str, done: threading.Event,
                  connected: threading.Event) -> None:
    import websockets

    async def one(query_id: int, ready: asyncio.Event) -> None:
        got = run.received.setdefault(query_id, [])
        url = f"ws://127.0.0.1:{port}/ws/queries/{query_id}/?token={token}"
        async with websockets.connect(url, max_size=None, open_timeout=30, origin=f"http://127.0.0.1:{port}") as ws:
            while not done.is_set():
                try:
                    raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
                except asyncio.TimeoutError:
                    continue
                message = json.loads(raw)
                if message.get("type") == "snapshot":
                    run.snapshot_ids[query_id] = message["last_id"]
                    ready.set()
                elif message.get("type") in ("result.add", "result.remove"):
                    got.append((time.time(), message["seq"], message["id"]))

    readies = [asyncio.Event() for _ in query_ids]
    tasks = [asyncio.create_task(one(q, r)) for q, r in zip(query_ids, readies)]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), timeout=60)
    connected.set()
    await asyncio.gather(*tasks)


def _summarise(run: RateRun, client, query_ids: list[int], drained: bool) -> dict[str, Any]:
    from streaming import bus

    requests = run.requests
    ops = sum(r.last_seq - r.first_seq + 1 for r in requests)
    first_sent = requests[0].sent if requests else 0.0
    last_seq = requests[-1].last_seq if requests else -1
    applied_times = [t for t, seq in run.applied]
    applied_seqs = [seq for _, seq in run.applied]
    # ingest -> applied, per request (weighted by its ops)
    op_latency: list[float] = []
    for r in requests:
        i = bisect.bisect_left(applied_seqs, r.last_seq)
        if i < len(applied_seqs):
            op_latency += [applied_times[i] - r.sent] * (r.last_seq - r.first_seq + 1)
    last_applied_at = applied_times[bisect.bisect_left(applied_seqs, last_seq)] if applied_seqs and applied_seqs[-1] >= last_seq else None
    firsts = [r.first_seq for r in requests]
    ws_latency: list[float] = []
    ws_steady: list[float] = []  # changes of ops sent after the first minute (the start-up backlog is over)
    lost = {}
    for qid in query_ids:
        got = run.received.get(qid, [])
        for t, seq, _ in got:
            i = bisect.bisect_right(firsts, seq) - 1
            if i >= 0 and seq <= requests[i].last_seq:
                ws_latency.append(t - requests[i].sent)
                if requests[i].sent - first_sent >= 60:
                    ws_steady.append(t - requests[i].sent)
        ids = {entry_id for _, _, entry_id in got}
        in_redis = {entry_id for entry_id, _ in bus.read_changes(client, qid, run.snapshot_ids[qid], count=10_000_000)}
        lost[str(qid)] = len(in_redis - ids)
    batches = run.batches
    cycles = [b["ts"] - a["ts"] for a, b in zip(batches, batches[1:])]
    timeline = []  # per 10 s of sending: websocket latency of the changes of ops sent then, and the batches that ended then
    for start in range(0, int(run.seconds), 10):
        lo, hi = first_sent + start, first_sent + start + 10
        lat = [t - requests[i].sent for qid in query_ids for t, seq, _ in run.received.get(qid, [])
               if (i := bisect.bisect_right(firsts, seq) - 1) >= 0 and lo <= requests[i].sent < hi]
        ended = [b for b in batches if lo <= b["ts"] < hi]
        timeline.append({"t": start, "ws_p50": _percentile(lat, 0.5), "ws_p99": _percentile(lat, 0.99),
                         "batches": len(ended), "rows": sum(b["rows"] for b in ended),
                         "max_batch_ms": max((b["ms"] for b in ended), default=None)})
    wall = run.cpu_seconds.pop("wall", 0.0)
    cpu = {name: round(seconds / wall, 3) for name, seconds in sorted(run.cpu_seconds.items(), key=lambda kv: -kv[1])
           if wall and seconds / wall >= 0.01}
    return {
        "rate_offered": run.rate,
        "load_average_1_5_15": list(os.getloadavg()),
        "seconds": run.seconds,
        "ops_sent": ops,
        "requests": len(requests),
        "failed_requests": run.failed_requests,
        "rejected_at_ingest": run.rejected_at_ingest,
        "send_rate_achieved": ops / (requests[-1].sent - first_sent) if len(requests) > 1 else None,
        "drained": drained,
        "sustained_ops_per_s": ops / (last_applied_at - first_sent) if last_applied_at else None,
        "op_latency_s": {"p50": _percentile(op_latency, 0.5), "p99": _percentile(op_latency, 0.99),
                         "max": max(op_latency) if op_latency else None},
        "ws_changes": len(ws_latency),
        "ws_latency_s": {"p50": _percentile(ws_latency, 0.5), "p99": _percentile(ws_latency, 0.99),
                         "max": max(ws_latency) if ws_latency else None},
        "ws_latency_after_first_minute_s": {"p50": _percentile(ws_steady, 0.5), "p99": _percentile(ws_steady, 0.99),
                                            "max": max(ws_steady) if ws_steady else None},
        "ws_changes_missing": lost,
        "dead_letters": sum(b["dead_letters"] for b in batches),
        "batches": len(batches),
        "mean_batch_rows": statistics.fmean(b["rows"] for b in batches) if batches else None,
        "mean_batch_ms": statistics.fmean(b["ms"] for b in batches) if batches else None,
        "p99_batch_ms": _percentile([b["ms"] for b in batches], 0.99),
        "mean_cycle_ms": statistics.fmean(cycles) * 1000 if cycles else None,
        "p99_cycle_ms": _percentile(cycles, 0.99) * 1000 if cycles else None,
        "mean_breakdown_ms": {k: statistics.fmean(b["breakdown_ms"].get(k, 0.0) for b in batches)
                              for k in (batches[0]["breakdown_ms"] if batches else {})},
        "cpu_cores_used": cpu,
        "timeline": timeline,
    }


def _saved_queries(demo: Any, entries: list[dict[str, Any]]) -> list[int]:
    """Replace the demo's queries on its stream by ``entries`` (plan entries); their ids."""
    from kwmonitor.queries.models import KeywordQuery, Predicate

    KeywordQuery.objects.filter(stream=demo.stream).update(enabled=False)
    ids = []
    for entry in entries:
        query = KeywordQuery.objects.create(
            owner=get_user("bench"), name=f"random {entry['id']}", schema=demo.schema, stream=demo.stream,
            keywords=" ".join(entry["keywords"]), tmax=entry["tmax"], window_seconds=entry["window_seconds"])
        for p in entry["predicates"]:
            Predicate.objects.create(query=query, **p)
        ids.append(query.pk)
    return ids


def run_rate(rate: int, seconds: float, lines: list[str], port: int, web_pid: int, redis_url: str, workdir: Path,
             source: str, trigger: float, drain_timeout: float, queries: list[dict[str, Any]],
             clients: int = 0) -> dict[str, Any]:
    from kwmonitor.accounts.models import ApiToken
    from kwmonitor.streams.demo import load_demo
    from kwmonitor.streams.plans import publish_plan
    from streaming import bus

    client = bus.connect(redis_url)
    demo = load_demo("bench", "bench-password", f"bench-{rate}", source)
    stream, query_ids = demo.stream, [q.pk for q in demo.queries]
    if queries:
        query_ids = _saved_queries(demo, queries)
    if clients:  # every k-th query, so the clients follow keyword and filter queries alike
        query_ids = query_ids[::max(1, len(query_ids) // clients)][:clients]
    _, token = ApiToken.issue(get_user("bench"), f"bench {rate}")
    publish_plan(stream.pk)
    evaluator_id = stream.evaluator.pk
    log = open(workdir / f"evaluator-{rate}.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "streaming.spark", "--evaluator", str(evaluator_id), "--redis-url", redis_url,
         "--checkpoint-dir", str(workdir / "checkpoints" / str(evaluator_id)), "--trigger-seconds", str(trigger)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            beat = bus.read_heartbeat(client, evaluator_id)
            if beat is not None and beat.status == "running":
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"evaluator did not start; see {log.name}")
            time.sleep(0.5)
        run = RateRun(rate, seconds)
        done = threading.Event()
        listener = start_clients(run, port, query_ids, token, done)
        poller = threading.Thread(target=_poll_applied, args=(run, bus.connect(redis_url), evaluator_id, done))
        poller.start()
        watcher = threading.Thread(target=_watch_batches, args=(run, bus.connect(redis_url), stream.pk, done))
        watcher.start()
        roots = {"benchmark": os.getpid(), "evaluator (driver, JVM, Python workers)": process.pid, "web (daphne)": web_pid}
        cpu_before, wall_before = _cpu_times(roots), time.monotonic()
        count = int(rate * seconds)
        _feed(run, lines[:count], port, stream.pk, stream.ingest_token, stop_at=time.monotonic() + seconds * 3)
        last_seq = run.requests[-1].last_seq if run.requests else -1
        drain_deadline = time.monotonic() + drain_timeout
        drained = False
        while time.monotonic() < drain_deadline:
            if run.applied and run.applied[-1][1] >= last_seq:
                drained = True
                break
            time.sleep(0.1)
        cpu_after, wall = _cpu_times(roots), time.monotonic() - wall_before
        run.cpu_seconds = {name: cpu_after[name] - cpu_before.get(name, 0.0) for name in cpu_after}
        run.cpu_seconds["wall"] = wall
        # let the last changes reach the sockets (a slow websocket consumer shows up as latency, not
        # loss): wait while they keep coming, give up after 30 s without one
        received, stalled_at = -1, time.monotonic()
        while not all(
            (last := client.xrevrange(bus.Keys.changes(q), count=1)) == [] or
            any(entry_id == last[0][0] for _, _, entry_id in run.received.get(q, [])[-50:])
            for q in query_ids
        ):
            count = sum(len(got) for got in run.received.values())
            if count != received:
                received, stalled_at = count, time.monotonic()
            elif time.monotonic() - stalled_at > 30:
                break
            time.sleep(0.2)
        done.set()
        poller.join()
        watcher.join()
        listener.join()
        return _summarise(run, client, query_ids, drained)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def get_user(username: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username)


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = sorted(results, key=lambda r: r["rate_offered"])
    rates = [r["rate_offered"] for r in results]
    fig, (left, right, time_axis) = plt.subplots(1, 3, figsize=(15, 4))
    left.plot(rates, [r["sustained_ops_per_s"] or 0 for r in results], "o-", label="sustained")
    left.plot(rates, rates, "k--", label="offered")
    left.set_xlabel("offered ops/s")
    left.set_ylabel("ops/s")
    left.legend()
    for name, style in (("p50", "o-"), ("p99", "s-")):
        right.plot(rates, [r["ws_latency_s"][name] or 0 for r in results], style, label=f"websocket {name}")
        right.plot(rates, [r["op_latency_s"][name] or 0 for r in results], style + "-", alpha=0.5, label=f"applied {name}")
    right.set_xlabel("offered ops/s")
    right.set_ylabel("latency from ingest (s)")
    right.set_yscale("log")
    right.legend()
    for r in results:
        points = [(p["t"], p["ws_p99"]) for p in r["timeline"] if p["ws_p99"] is not None]
        time_axis.plot([t for t, _ in points], [v for _, v in points], ".-", label=f"{r['rate_offered']} ops/s")
    time_axis.set_xlabel("seconds since the first request")
    time_axis.set_ylabel("websocket p99 of the ops sent in each 10 s (s)")
    time_axis.legend()
    fig.tight_layout()
    fig.savefig(path)


def start_clients(run: RateRun, port: int, query_ids: list[int], token: str, done: threading.Event) -> threading.Thread:
    """One websocket client per query, in a thread that runs until ``done``; returns once each has its snapshot."""
    connected = threading.Event()
    listener = threading.Thread(target=lambda: asyncio.run(_listen(run, port, query_ids, token, done, connected)))
    listener.start()
    if not connected.wait(60):
        raise RuntimeError("websocket clients did not get their snapshots")
    return listener


def prepare(workdir: Path, redis_db: int, ops: int) -> tuple[str, list[str]]:
    """A fresh scratch directory, Django on it (migrated) and an empty Redis database; the demo
    workload's ``ops`` lines (seed 7). Returns the Redis URL and the lines."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    redis_url = _configure(workdir, redis_db)
    import django

    django.setup()
    from django.core.management import call_command

    from streaming import bus

    bus.connect(redis_url).flushdb()
    call_command("migrate", verbosity=0)
    subprocess.run([sys.executable, "-m", "streaming", "workload", "ecommerce", "--out-dir", str(workdir / "workload"),
                    "--ops", str(ops), "--seed", "7"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return redis_url, (workdir / "workload" / "ops.ndjson").read_text().splitlines()


def start_web(workdir: Path) -> tuple[int, subprocess.Popen, Any]:
    """daphne serving the project on a free port (its log in ``workdir``), once it listens."""
    port = _free_port()
    web_log = open(workdir / "web.log", "w")
    web = subprocess.Popen([str(Path(sys.executable).with_name("daphne")), "-b", "127.0.0.1", "-p", str(port),
                            "kwmonitor.asgi:application"], cwd=ROOT, stdout=web_log, stderr=subprocess.STDOUT)
    _wait_port(port, 60)
    return port, web, web_log


def main(argv: list[str] | None = None) -> int:
    from streaming.spark import DEFAULT_TRIGGER_SECONDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--source", choices=("landing", "redis"), default="landing")
    parser.add_argument("--trigger-seconds", type=float, default=DEFAULT_TRIGGER_SECONDS,
                        help="the evaluator's micro-batch interval (default: the product's)")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "pipeline")
    parser.add_argument("--redis-db", type=int, default=3)
    parser.add_argument("--random-queries", type=int, default=0,
                        help="replace the three demo queries by N random saved queries "
                             "(streaming.workloads.queries), one websocket client each")
    parser.add_argument("--keyword-sets", type=int, default=0,
                        help="with --random-queries: draw their keyword sets uniformly from a pool of this many "
                             "sets of the stream's words (as bench sharing's many-queries part; filter "
                             "subscriptions among them), instead of the default skewed pool of 24")
    parser.add_argument("--clients", type=int, default=0,
                        help="websocket clients on that many of the queries (default: one per query)")
    args = parser.parse_args(argv)

    redis_url, lines = prepare(args.workdir, args.redis_db, int(max(args.rates) * args.seconds) + 1)
    queries: list[dict[str, Any]] = []
    if args.random_queries:
        from streaming.workloads.queries import StreamProfile, random_queries

        schema_doc = json.loads((args.workdir / "workload" / "schema.json").read_text())
        profile = StreamProfile(schema_doc, (json.loads(line) for line in lines[:50_000]))
        if args.keyword_sets:
            queries = random_queries(profile, args.random_queries, seed=7, pool=args.keyword_sets, skew=0.0,
                                     word_skew=1.0)
        else:
            queries = random_queries(profile, args.random_queries, seed=7, windows=(1800.0, 3600.0, 7200.0),
                                     filters=0)

    port, web, web_log = start_web(args.workdir)
    results = []
    try:
        for rate in args.rates:
            result = run_rate(rate, args.seconds, lines, port, web.pid, redis_url, args.workdir, args.source,
                              args.trigger_seconds, args.drain_timeout, queries, args.clients)
            results.append(result)
            print(json.dumps(result), flush=True)
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(30)
        web_log.close()
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "source": args.source,
        "trigger_seconds": args.trigger_seconds,
        "queries": (f"{len(queries)} random saved queries (streaming.workloads.queries, seed 7, "
                    f"{len({tuple(q['keywords']) for q in queries})} keyword sets)" if queries
                    else "the three demo queries (kwmonitor.streams.demo.DEMO_QUERIES)"),
        "websocket_clients": args.clients or len(queries) or 3,
        "query_definitions": queries,
        "results": results,
    }
    (args.workdir / "pipeline.json").write_text(json.dumps(report, indent=2))
    _plot(results, args.workdir / "pipeline.png")
    print(f"wrote {args.workdir / 'pipeline.json'} and pipeline.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
