"""Query feed with many clients: one Redis reader per socket, the Channels layer's fan-out, the project's relay.

Issue 19, item 7. One query, ``--clients`` websocket clients on its feed
(``/ws/queries/<id>/``, API token), served by one daphne process:

* ``readers``: every socket reads the change stream itself (its own Redis
  connection, a blocking ``XREAD``, then the batch with its trimming horizon
  in one MULTI/EXEC), as the project did before the relay;
* ``layer``: one relay task per query reads the change stream and sends each
  change once through the Channels layer (channels_redis; ``pip install -r
  benchmarks/requirements-feed-fanout.txt``) to the query's group;
* ``relay``: the project (``kwmonitor.asgi``): one relay per followed stream
  and process hands each batch to a queue per socket (``kwmonitor/dashboard/relay.py``).

The first two are in ``benchmarks/feed_fanout_asgi.py``.
Each run has a Redis server of its own (``redis-server`` on a free port,
nothing else on it), so its CPU and connections are the feed's alone. Once
every client holds its snapshot, the benchmark waits ``--idle-seconds`` with
no change (the fixed cost of idle sockets), then publishes ``--changes``
changes through ``streaming.bus.publish_changes`` at ``--rate`` a second
and waits until every client holds every change. Measured: CPU seconds of
daphne and of redis-server (idle and while the changes flow), Redis
connections (``connected_clients``, the benchmark's own excluded), and per
change the latency from its publication to the last client receiving it
(p50, p99, max), plus what any client missed or got twice. The clients run
in a process of their own (``websockets``, no keepalive pings: an
overloaded server shows as latency, not as clients that gave up).

    .venv/bin/python benchmarks/feed_fanout.py --clients 1000

writes ``benchmarks/results/feed-fanout.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VARIANTS = {"readers": "benchmarks.feed_fanout_asgi:readers_application",
            "layer": "benchmarks.feed_fanout_asgi:application", "relay": "kwmonitor.asgi:application"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the clients (a process of their own) ----------------------------------------------------------


async def _client(url: str, origin: str, expected: int, received: list[tuple[int, float]], gate: asyncio.Semaphore,
                  connected: list[int], total: int, ready: asyncio.Event) -> None:
    from websockets.asyncio.client import connect

    async with gate:  # a bounded number of handshakes at once
        ws = await connect(url, origin=origin, max_queue=None, open_timeout=120, ping_interval=None)
        snapshot = json.loads(await ws.recv())
    assert snapshot["type"] == "snapshot", snapshot
    connected[0] += 1
    if connected[0] == total:
        ready.set()
    async with ws:
        while len(received) < expected:
            message = json.loads(await ws.recv())
            received.append((message["seq"], time.time()))


async def _clients(args: argparse.Namespace) -> None:
    url = f"ws://127.0.0.1:{args.port}/ws/queries/{args.query}/?token={args.token}"
    origin = f"http://127.0.0.1:{args.port}"
    received: list[list[tuple[int, float]]] = [[] for _ in range(args.clients)]
    gate, connected, ready = asyncio.Semaphore(8), [0], asyncio.Event()
    tasks = [asyncio.create_task(_client(url, origin, args.changes, received[i], gate, connected, args.clients, ready))
             for i in range(args.clients)]
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait([waiting, *tasks], return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        raise next(t.exception() for t in tasks if t.done() and t.exception())  # type: ignore[misc]
    print("ready", flush=True)
    done, pending = await asyncio.wait(tasks, timeout=args.timeout)
    Path(args.out).write_text(json.dumps({"received": received, "unfinished": len(pending)}))
    for task in pending:
        task.cancel()


# -- one run -------------------------------------------------------------------------------------


def _setup_django(workdir: Path, redis_url: str) -> None:
    os.environ.update(
        DJANGO_SETTINGS_MODULE="kwmonitor.settings",
        DATABASE_URL=f"sqlite:///{workdir / 'db.sqlite3'}",
        REDIS_URL=redis_url,
        SECRET_KEY="feed-fanout-benchmark-not-secret",
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    import django

    django.setup()


def _fixtures() -> tuple[int, str]:
    """A user with an API token and one query of theirs on the demo schema; returns (query id, token)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from kwmonitor.accounts.models import ApiToken
    from kwmonitor.catalog.models import Schema
    from kwmonitor.queries.models import KeywordQuery
    from kwmonitor.streams.models import Stream

    call_command("migrate", verbosity=0)
    schema_doc = json.loads((ROOT / "kwmonitor" / "streams" / "demo" / "schema.json").read_text())
    schema = Schema.import_document(schema_doc, description="E-commerce demo")
    stream = Stream.objects.create(name="shop", schema=schema)
    user = get_user_model().objects.create_user("bench", "bench@example.com", "bench-password-1")
    query = KeywordQuery.objects.create(owner=user, name="dress in texas", schema=schema, stream=stream,
                                        keywords="dress texas", tmax=4)
    _, token = ApiToken.issue(user, "feed fan-out benchmark")
    return query.pk, token


def _change(query_id: int, seq: int) -> Any:
    from streaming.events import ResultAdded, ResultView, TupleView, result_key

    tuples = [["Customer", 1], ["Order", seq], ["Product", 1]]
    edges = [[["Order", seq], ["Customer", 1], "cid"], [["Order", seq], ["Product", 1], "pid"]]
    view = ResultView(key=result_key(tuples, edges), edges=edges, tuples=[
        TupleView(relation="Customer", key=1, values={"cid": 1, "name": "Ann Lee", "state": "Texas"}, hits=["texas"]),
        TupleView(relation="Order", key=seq, values={"oid": seq, "cid": 1, "pid": 1, "note": "gift"}),
        TupleView(relation="Product", key=1, values={"pid": 1, "title": "Summer dress", "price": 40.0}, hits=["dress"]),
    ])
    return ResultAdded(query=query_id, seq=seq, result=view)


def run_variant(variant: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from streaming import bus

    workdir.mkdir(parents=True)
    redis_port = _free_port()
    redis_server = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                                     "--appendonly", "no", "--maxclients", "10000"],
                                    stdout=open(workdir / "redis.log", "w"), stderr=subprocess.STDOUT)
    processes: list[subprocess.Popen] = [redis_server]
    try:
        _wait_port(redis_port, 30)
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        env = dict(os.environ, REDIS_URL=redis_url, DATABASE_URL=f"sqlite:///{workdir / 'db.sqlite3'}")
        subprocess.run([sys.executable, __file__, "fixtures", "--workdir", str(workdir), "--redis-url", redis_url],
                       check=True, env=env, cwd=ROOT)
        query_id, token = json.loads((workdir / "fixtures.json").read_text())
        client = bus.connect(redis_url)
        web_port = _free_port()
        web = subprocess.Popen([str(Path(sys.executable).with_name("daphne")), "-b", "127.0.0.1", "-p", str(web_port),
                                "--websocket_connect_timeout", "120", VARIANTS[variant]], cwd=ROOT, env=env, stdout=open(workdir / "web.log", "w"),
                               stderr=subprocess.STDOUT)
        processes.append(web)
        _wait_port(web_port, 60)
        clients = subprocess.Popen([sys.executable, __file__, "clients", "--port", str(web_port), "--query",
                                    str(query_id), "--token", token, "--clients", str(args.clients), "--changes",
                                    str(args.changes), "--timeout", str(args.timeout), "--out",
                                    str(workdir / "received.json")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        processes.append(clients)
        started = time.monotonic()
        assert clients.stdout is not None
        if clients.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{variant}: the clients did not all get their snapshot")
        connect_seconds = time.monotonic() - started
        own = int(client.info("clients")["connected_clients"])  # this benchmark's connection among them
        connections = own - 1
        names: dict[str, int] = {}
        for entry in client.client_list():
            names[entry["name"] or "-"] = names.get(entry["name"] or "-", 0) + 1
        cpu0 = {"daphne": _cpu_seconds(web.pid), "redis": _cpu_seconds(redis_server.pid)}
        time.sleep(args.idle_seconds)
        cpu1 = {"daphne": _cpu_seconds(web.pid), "redis": _cpu_seconds(redis_server.pid)}
        sent: dict[int, float] = {}
        flow_started = time.monotonic()
        for seq in range(1, args.changes + 1):
            due = flow_started + (seq - 1) / args.rate
            time.sleep(max(0.0, due - time.monotonic()))
            change = _change(query_id, seq)
            sent[seq] = time.time()
            bus.publish_changes(client, query_id, [change])
        clients.wait(timeout=args.timeout + 60)
        flow_seconds = time.monotonic() - flow_started
        cpu2 = {"daphne": _cpu_seconds(web.pid), "redis": _cpu_seconds(redis_server.pid)}
        got = json.loads((workdir / "received.json").read_text())
        last: dict[int, float] = {}
        missing = duplicated = out_of_order = 0
        for received in got["received"]:
            seqs = [s for s, _ in received]
            missing += len(set(range(1, args.changes + 1)) - set(seqs))
            duplicated += len(seqs) - len(set(seqs))
            out_of_order += sum(1 for a, b in zip(seqs, seqs[1:]) if b <= a)
            for seq, at in received:
                last[seq] = max(last.get(seq, 0.0), at)
        latency = [last[seq] - sent[seq] for seq in sent if seq in last] or [float("nan")]
        return {
            "variant": variant,
            "application": VARIANTS[variant],
            "clients": args.clients,
            "connect_seconds": round(connect_seconds, 2),
            "redis_connections": connections,
            "redis_connections_by_name": names,
            "idle_seconds": args.idle_seconds,
            "idle_cpu_seconds": {k: round(cpu1[k] - cpu0[k], 3) for k in cpu0},
            "changes": args.changes,
            "rate": args.rate,
            "flow_seconds": round(flow_seconds, 2),
            "flow_cpu_seconds": {k: round(cpu2[k] - cpu1[k], 3) for k in cpu0},
            "flow_cpu_ms_per_change": {k: round(1000 * (cpu2[k] - cpu1[k]) / args.changes, 3) for k in cpu0},
            "latency_all_clients_s": {"p50": round(_percentile(latency, 0.5), 4),
                                      "p99": round(_percentile(latency, 0.99), 4), "max": round(max(latency), 4)},
            "unfinished_clients": got["unfinished"],
            "missing": missing,
            "duplicated": duplicated,
            "out_of_order": out_of_order,
        }
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    fixtures = sub.add_parser("fixtures", help="(internal) make the user, query and token of one run")
    fixtures.add_argument("--workdir", type=Path, required=True)
    fixtures.add_argument("--redis-url", required=True)
    clients = sub.add_parser("clients", help="(internal) the websocket clients of one run")
    for name in ("port", "query", "clients", "changes"):
        clients.add_argument(f"--{name}", type=int, required=True)
    clients.add_argument("--token", required=True)
    clients.add_argument("--timeout", type=float, required=True)
    clients.add_argument("--out", required=True)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--rate", type=float, default=10.0, help="changes published a second")
    parser.add_argument("--idle-seconds", type=float, default=15.0)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds the clients wait for every change")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=["readers", "layer", "relay"])
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "feed_fanout")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "feed-fanout.json")
    args = parser.parse_args(argv)
    if args.command == "fixtures":
        _setup_django(args.workdir, args.redis_url)
        (args.workdir / "fixtures.json").write_text(json.dumps(_fixtures()))
        return 0
    if args.command == "clients":
        asyncio.run(_clients(args))
        return 0
    shutil.rmtree(args.workdir, ignore_errors=True)
    load_before = os.getloadavg()
    runs: list[dict[str, Any]] = []
    report = {
        "benchmark": "feed_fanout",
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_before": [round(x, 2) for x in load_before], "load_average_after": None},
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for variant in args.variants:  # the report is rewritten after each run, so a failed run keeps the others
        runs.append(run_variant(variant, args, args.workdir / variant))
        report["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
