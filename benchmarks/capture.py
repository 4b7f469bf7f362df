"""The PostgreSQL capture: how its changes are read (replication protocol or SQL slot functions), and its throughput.

Runs a throwaway PostgreSQL with ``wal_level=logical`` (``streaming.capture.cluster``)
under ``--workdir`` and measures, on this machine::

    .venv/bin/python benchmarks/capture.py transport    # docs/sources.md, "Why the replication protocol"
    .venv/bin/python benchmarks/capture.py throughput   # docs/sources.md, "Throughput"
    .venv/bin/python benchmarks/capture.py live         # the same, pgbench inserting meanwhile

``transport`` reads the same pgoutput messages two ways, decoding them with
the capture's decoder and nothing else: the replication protocol
(``START_REPLICATION``, what the capture uses) and the SQL functions
(``pg_logical_slot_peek_binary_changes`` then ``pg_replication_slot_advance``,
polled). It times (1) a backlog of ``--rows`` changes, (2) the delay from
commit to arrival of single-row transactions committed every 10 ms, with each
reader's CPU, and (3) the backlog again while another session keeps a
transaction open, which holds the slot's restart point back.

``throughput`` runs ``python -m streaming cdc`` itself (snapshot, ops file,
state, fsyncs): the changes per second it drains from a backlog of
single-row INSERT transactions and of 100-row ones. ``live`` runs the
capture while ``pgbench`` commits single-row INSERTs as fast as it can:
the rate it keeps up with and how far behind it is (seconds from a commit
to its ops being stored, bytes of WAL).

Prints a line per measure and merges the numbers into ``--out``
(``benchmarks/results/capture.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from streaming.capture.cluster import LogicalCluster  # noqa: E402
from streaming.capture.pgoutput import Begin, Commit, decode  # noqa: E402
from streaming.capture.replication import Keepalive, ReplicationStream  # noqa: E402

TABLE = "CREATE TABLE t (id bigint PRIMARY KEY, v int, note text); CREATE PUBLICATION p FOR TABLE t"


def fresh_database(cluster: LogicalCluster, name: str) -> str:
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        for (slot,) in conn.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s", (name,)):
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = cluster.dsn(name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(TABLE)
    return dsn


def write_backlog(dsn: str, rows: int, per_transaction: int, start: int = 0) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for first in range(start, start + rows, per_transaction):
            conn.execute("INSERT INTO t SELECT g, g %% 1000, 'row ' || g FROM generate_series(%s::bigint, %s::bigint) g",
                         (first, min(first + per_transaction, start + rows) - 1))


def cpu() -> float:
    return time.thread_time()


# ---------------------------------------------------------------- the two readers


class StreamingReader:
    """The replication protocol, as the capture reads it."""

    name = "replication protocol"

    def __init__(self, dsn: str, slot: str):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        self.stream = ReplicationStream(dsn, slot, "p")
        self.stream.start(0)

    def read(self, on_message: Callable[[Any, float], None]) -> None:
        received, _ = self.stream.read(timeout=0.05)
        now = time.time()
        last_end = 0
        for item in received:
            if isinstance(item, Keepalive):
                continue
            message = decode(item.payload)
            on_message(message, now)
            if isinstance(message, Commit):
                last_end = message.end_lsn
        if last_end:
            self.stream.confirm(last_end)

    def close(self) -> None:
        self.stream.close()


class SqlFunctionReader:
    """``pg_logical_slot_peek_binary_changes`` + ``pg_replication_slot_advance``, polled every ``poll`` seconds."""

    name = "SQL slot functions"

    def __init__(self, dsn: str, slot: str, poll: float = 0.1, most: int = 10_000):
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        self.slot, self.poll, self.most = slot, poll, most
        self.calls: list[float] = []
        self._next = 0.0

    def read(self, on_message: Callable[[Any, float], None]) -> None:
        wait = self._next - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._next = time.monotonic() + self.poll
        began = time.perf_counter()
        rows = self.conn.execute(
            "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, NULL, %s, 'proto_version', '1', "
            "'publication_names', 'p')", (self.slot, self.most)).fetchall()
        self.calls.append(time.perf_counter() - began)
        now = time.time()
        last_end = None
        for (data,) in rows:
            message = decode(bytes(data))
            on_message(message, now)
            if isinstance(message, Commit):
                last_end = message.end_lsn
        if last_end is not None:
            self.conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)",
                              (self.slot, f"{last_end >> 32:X}/{last_end & 0xFFFFFFFF:X}"))
        if len(rows) >= self.most:
            self._next = 0.0  # more is waiting: read on at once

    def close(self) -> None:
        self.conn.close()


def drain(reader, rows: int, limit: float = 600.0) -> dict[str, float]:
    """Read until ``rows`` inserts came; seconds and reader CPU per change."""
    seen = [0]

    def count(message, _now):
        if type(message).__name__ == "Insert":
            seen[0] += 1

    began, cpu0 = time.perf_counter(), cpu()
    while seen[0] < rows and time.perf_counter() - began < limit:
        reader.read(count)
    seconds, used = time.perf_counter() - began, cpu() - cpu0
    return {"changes": seen[0], "seconds": round(seconds, 3), "changes_per_second": round(seen[0] / seconds),
            "reader_cpu_us_per_change": round(used / max(1, seen[0]) * 1e6, 2)}


def delays(dsn: str, reader, seconds: float, every: float = 0.01) -> dict[str, float]:
    """Single-row transactions committed every ``every`` seconds; commit -> arrival delays."""
    stop = threading.Event()
    found: list[float] = []

    def write() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            n = 10_000_000
            while not stop.is_set():
                conn.execute("INSERT INTO t VALUES (%s, 0, 'latency')", (n,))
                n += 1
                time.sleep(every)

    def note(message, now):
        if isinstance(message, Begin):
            found.append(now - message.commit_ts)

    writer = threading.Thread(target=write)
    writer.start()
    began, cpu0 = time.perf_counter(), cpu()
    while time.perf_counter() - began < seconds:
        reader.read(note)
    used = cpu() - cpu0
    stop.set()
    writer.join()
    found.sort()
    return {"transactions": len(found), "p50_ms": round(statistics.median(found) * 1000, 1),
            "p99_ms": round(found[int(len(found) * 0.99)] * 1000, 1),
            "reader_cpu_share": round(used / seconds, 3)}


def empty_peek_ms(reader: "SqlFunctionReader") -> float:
    """What a poll that finds nothing new costs (the median of five): it decodes again from the restart point."""
    reader.poll, reader.calls = 0.0, []
    for _ in range(5):
        reader.read(lambda *_: None)
    return round(statistics.median(reader.calls) * 1000, 1)


def transport(cluster: LogicalCluster, rows: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in (StreamingReader, SqlFunctionReader):
        key = "streaming" if kind is StreamingReader else "sql_functions"
        result: dict[str, Any] = {}
        dsn = fresh_database(cluster, "bench_transport")
        reader = kind(dsn, "bench")
        write_backlog(dsn, rows, 10)
        result["backlog"] = drain(reader, rows)
        result["delays"] = delays(dsn, reader, 8.0)
        if isinstance(reader, SqlFunctionReader):
            result["backlog"]["empty_peek_ms"] = empty_peek_ms(reader)
        reader.close()
        dsn = fresh_database(cluster, "bench_transport")
        reader = kind(dsn, "bench")
        with psycopg.connect(dsn) as holder:  # a transaction left open: the slot's restart point stays before it
            holder.execute("INSERT INTO t VALUES (-1, 0, 'held open')")
            write_backlog(dsn, rows, 10)
            result["backlog_with_an_open_transaction"] = drain(reader, rows)
            holder.rollback()
            if isinstance(reader, SqlFunctionReader):
                result["backlog_with_an_open_transaction"]["empty_peek_ms"] = empty_peek_ms(reader)
        reader.close()
        print(f"{kind.name}: {json.dumps(result)}", flush=True)
        out[key] = result
    return out


# ---------------------------------------------------------------- the capture itself


def run_capture(dsn: str, workdir: Path, idle_exit: float | None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "streaming", "cdc", "--dsn", dsn, "--publication", "p", "--slot", "capture",
            "--schema-out", str(workdir / "schema.json"), "--out", str(workdir / "ops.ndjson")]
    if idle_exit is not None:
        argv += ["--idle-exit", str(idle_exit)]
    return subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)


def lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def throughput(cluster: LogicalCluster, rows: int, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for per_transaction in (1, 100):
        dsn = fresh_database(cluster, "bench_capture")
        for name in ("ops.ndjson", "ops.ndjson.state", "ops.ndjson.state-wal", "ops.ndjson.state-shm"):
            (workdir / name).unlink(missing_ok=True)
        first = run_capture(dsn, workdir, idle_exit=0.5)  # the slot, an empty snapshot
        first.communicate()
        write_backlog(dsn, rows, per_transaction)
        began, cpu0 = time.perf_counter(), child_cpu()
        proc = run_capture(dsn, workdir, idle_exit=0.5)
        _, errors = proc.communicate()
        seconds = time.perf_counter() - began - 0.5  # less the idle wait at the end
        stored = lines(workdir / "ops.ndjson")
        result = {"rows_per_transaction": per_transaction, "changes": stored, "seconds": round(seconds, 2),
                  "changes_per_second": round(stored / seconds), "capture_cpu_seconds": round(child_cpu() - cpu0, 2)}
        print(f"capture, backlog of {rows} changes in transactions of {per_transaction}: {json.dumps(result)}",
              flush=True)
        out[f"backlog_{per_transaction}_per_transaction"] = result
    return out


def live(cluster: LogicalCluster, seconds: float, clients: int, workdir: Path) -> dict[str, Any]:
    """pgbench inserting single-row transactions as fast as it can while the capture follows: the rate it
    keeps up with, and how far behind it is."""
    from streaming.capture.capture import Capture, CaptureConfig
    from streaming.capture.sinks import FileSink
    from streaming.capture.state import CaptureState

    dsn = fresh_database(cluster, "bench_live")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE ids START 1")
    for name in ("live.ndjson", "live.state", "live.state-wal", "live.state-shm"):
        (workdir / name).unlink(missing_ok=True)
    script = workdir / "insert.sql"
    script.write_text("INSERT INTO t VALUES (nextval('ids'), 1, 'pgbench row');\n")
    samples: list[tuple[float, int]] = []
    state = CaptureState(workdir / "live.state")
    capture = Capture(CaptureConfig(dsn=dsn, publication="p", slot="live", report_seconds=0.5),
                      FileSink(workdir / "live.ndjson", state),
                      on_progress=lambda p: samples.append((p.seconds_behind or 0.0, p.bytes_behind))
                      if p.phase == "streaming" and p.lsn else None)
    runner = threading.Thread(target=capture.run)
    runner.start()
    while not samples or capture.progress.phase != "streaming":
        time.sleep(0.1)
    began, cpu0 = time.perf_counter(), time.process_time()
    bench = subprocess.run([str(cluster.bindir / "pgbench"), "-n", "-c", str(clients), "-j", str(clients),
                            "-T", str(int(seconds)), "-f", str(script), dsn], capture_output=True, text=True)
    while capture.progress.bytes_behind > 0 or capture.progress.ops < lines(workdir / "live.ndjson"):
        time.sleep(0.1)
    drained = time.perf_counter() - began
    capture.stop()
    runner.join()
    state.close()
    stored = lines(workdir / "live.ndjson")
    tps = next((float(line.split("=")[1].split()[0]) for line in bench.stdout.splitlines() if line.startswith("tps")), 0)
    behind = sorted(s for s, _ in samples[len(samples) // 10:])  # past the first reports
    return {"pgbench_clients": clients, "pgbench_seconds": seconds, "pgbench_tps": round(tps), "changes": stored,
            "drained_seconds": round(drained, 2), "changes_per_second": round(stored / drained),
            "seconds_behind_p50": round(behind[len(behind) // 2], 3), "seconds_behind_p99": round(
                behind[int(len(behind) * 0.99)], 3), "bytes_behind_max": max(b for _, b in samples),
            "capture_cpu_share": round((time.process_time() - cpu0) / drained, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=("transport", "throughput", "live"))
    parser.add_argument("--seconds", type=float, default=20.0, help="live: how long pgbench inserts")
    parser.add_argument("--clients", type=int, default=2, help="live: pgbench clients")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "capture")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "capture.json")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    cluster = LogicalCluster(args.workdir / "postgres")
    cluster.start()
    try:
        if args.part == "transport":
            numbers = transport(cluster, args.rows)
        elif args.part == "throughput":
            numbers = throughput(cluster, args.rows, args.workdir)
        else:
            numbers = live(cluster, args.seconds, args.clients, args.workdir)
            print(f"capture behind pgbench: {json.dumps(numbers)}", flush=True)
    finally:
        cluster.stop()
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results[args.part] = {"machine": f"{os.cpu_count()} cores, {os.uname().sysname} {os.uname().release}",
                          "rows": args.rows, **numbers}
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
