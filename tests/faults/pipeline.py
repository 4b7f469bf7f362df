"""The pipeline a fault test drives and checks: ops posted over HTTP, beat's rounds, the feed and history compared.

A fault test makes a stream with saved queries (:func:`fault_stream`: its
lines and each query's reference), runs its evaluator under the supervisor
with beat's supervision and history rounds in a thread (:func:`evaluated`),
follows a query with the example feed client (:func:`followed`), and feeds
the lines: posted in bodies in order, a body sent again while the server
answers 503 or does not answer (:func:`feed`), or ingested in the test's
process (:func:`feed_in_process`). What the feed client printed and what
history holds are held to the reference (``tests.faults.reference``) change
by change.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from django.db import DatabaseError, connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError
from redis.exceptions import TimeoutError as RedisTimeoutError

from kwmonitor.accounts.models import ApiToken
from kwmonitor.dashboard.feeds import entry_id_order
from kwmonitor.feed_client import follow
from kwmonitor.ingest.service import Ingestor
from kwmonitor.queries.models import KeywordQuery
from kwmonitor.streams.history import HistoryPersister
from kwmonitor.streams.models import ResultEvent, Stream
from kwmonitor.streams.supervisor import Supervisor
from streaming import bus
from streaming.ops import op_to_dict
from streaming.schema import Schema
from streaming.sources import read_landing, split_seq
from streaming.workloads import ecommerce
from tests.browser.server import ROOT
from tests.faults.reference import Change, by_seq, change_of, live_after, reference_changes

__all__ = ["BODY", "PAUSE", "FaultStream", "fault_stream", "compute_references", "Evaluated", "evaluated",
           "followed", "FeedClients", "feed", "NOTHING_STORED", "feed_in_process", "beat", "check_stretch",
           "check_feed", "history_of", "wait_until", "applied_seq",
           "wait_running", "wait_published", "wait_followed", "check_landing"]

BODY, PAUSE = 60, 0.05  # bodies of 60 lines, one after the other


@dataclass
class FaultStream:
    """A stream of the demo schema with saved queries, the lines to send it and each query's reference."""

    stream: Stream
    queries: list[KeywordQuery]
    token: str  # an API token of the queries' owner, for the feeds
    lines: list[str]
    references: dict[int, list[Change]]  # by query id
    env: dict[str, str]  # what daphne needs to write where the test's evaluator reads


def fault_stream(settings, tmp_path: Path, user, schema, keywords: Sequence[str], tmax: int, ops: int,
                 window_seconds: float | None = None, references: bool = True) -> FaultStream:
    """A stream with a query per keyword set (``window_seconds`` each), its landing, checkpoints and logs under
    ``tmp_path``, and ``ops`` E-commerce lines (seed 11); each query's reference unless ``references`` is false
    (then :func:`compute_references` later)."""
    settings.LANDING_DIR = tmp_path / "landing"
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    settings.EVALUATOR_LOG_DIR = tmp_path / "log"
    stream = Stream.objects.create(name="shop", schema=schema)
    queries = [KeywordQuery.objects.create(owner=user, name=words, schema=schema, stream=stream, keywords=words,
                                           tmax=tmax, window_seconds=window_seconds) for words in keywords]
    _, token = ApiToken.issue(user, "faults")
    lines = [json.dumps(op_to_dict(op)) for op in ecommerce.build(ops, seed=11).ops()]
    env = {"LANDING_DIR": str(settings.LANDING_DIR), "CHECKPOINT_DIR": str(settings.CHECKPOINT_DIR)}
    faulty = FaultStream(stream, queries, token, lines, {}, env)
    if references:
        compute_references(faulty)
    return faulty


_lines_sent: list[str] = []  # the lines a reference process computes over (inherited by fork)


def _reference_of(query: tuple[str, int, float | None]) -> list[Change]:
    keywords, tmax, window_seconds = query
    return reference_changes(Schema.from_dict(ecommerce.SCHEMA_DOC), keywords, tmax, _lines_sent, window_seconds)


def compute_references(faulty: FaultStream, processes: int = 1) -> None:
    """Fill ``faulty.references``: each distinct query (keywords, Tmax, window) computed once, in ``processes``
    forked processes when more than one."""
    global _lines_sent
    of = {q.pk: (q.keywords, q.tmax, q.window_seconds) for q in faulty.queries}
    distinct = sorted(set(of.values()), key=str)
    _lines_sent = faulty.lines
    try:
        if processes > 1:
            import multiprocessing

            with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
                computed = dict(zip(distinct, pool.map(_reference_of, distinct)))
        else:
            computed = {query: _reference_of(query) for query in distinct}
    finally:
        _lines_sent = []
    faulty.references = {pk: computed[query] for pk, query in of.items()}


@dataclass
class Evaluated:
    """The stream's running evaluator: its id, how long it took to run, the beat rounds that failed."""

    evaluator_id: int
    up_after: float = 0.0
    beat_errors: Counter = field(default_factory=Counter)


@contextlib.contextmanager
def evaluated(client, stream: Stream, beat_redis_url: str | None = None) -> Iterator[Evaluated]:
    """Start the stream's evaluator under the supervisor, wait for it to run, then run beat's rounds in a thread
    (with ``beat_redis_url``: in a forked process on its own client of that Redis, as Celery's worker runs them,
    so that they do not take this process's GIL from a feeder and clients measured in it); on the way out stop
    the rounds, then the evaluator."""
    supervisor = Supervisor()
    run = Evaluated(supervisor.start(stream.evaluator.pk).pk)
    if beat_redis_url is not None:
        context = multiprocessing.get_context("fork")
        stop, errors = context.Event(), context.SimpleQueue()
        beating = context.Process(target=_beat_in_process, args=(beat_redis_url, stop, errors), daemon=True)
    else:
        stop, errors = threading.Event(), None
        beating = threading.Thread(target=beat, args=(client, stop, run.beat_errors), daemon=True)
    try:
        run.up_after = wait_running(client, run.evaluator_id)
        connection.close()  # a forked process must not share this one's database connection
        beating.start()
        yield run
    finally:
        stop.set()
        if beating.is_alive():
            beating.join(timeout=30)
        if errors is not None and not errors.empty():
            run.beat_errors.update(errors.get())
        supervisor.stop(run.evaluator_id)


def _beat_in_process(redis_url: str, stop, errors) -> None:
    """:func:`beat` in a process of its own, on a Redis client of its own; its failed rounds go to ``errors``."""
    failed: Counter = Counter()
    try:
        beat(bus.connect(redis_url, retry_seconds=60), stop, failed)
    finally:
        errors.put(failed)


@contextlib.contextmanager
def followed(base: str, query: KeywordQuery, token: str, directory: Path) -> Iterator[Path]:
    """``python -m kwmonitor.feed_client`` following the query's feed; yields the file of its output (NDJSON),
    its complaints going to ``feed.err`` beside it."""
    out = directory / "feed.ndjson"
    follower = subprocess.Popen(
        [sys.executable, "-m", "kwmonitor.feed_client", "--url", f"{base.replace('http', 'ws')}/ws/queries/{query.pk}/"],
        cwd=ROOT, env=dict(os.environ, KWMONITOR_TOKEN=token), stdout=out.open("w"),
        stderr=(directory / "feed.err").open("w"))
    try:
        yield out
    finally:
        follower.terminate()
        follower.wait(timeout=10)


def feed(base: str, stream, lines: list[str], tally: Counter, crashes: list[tuple[int, threading.Event]],
         pause: float = PAUSE) -> None:
    """POST the lines in bodies, ``pause`` s apart, in order; a body answered 503 (or not answered) is sent again
    with the same ``Idempotency-Key``, so one stored before its answer was lost is not stored twice. Each event
    of ``crashes`` is set when the feeder reaches its line (the first of a body)."""
    for start in range(0, len(lines), BODY):
        for at, reached in crashes:
            if start == at:
                reached.set()
        body = "".join(line + "\n" for line in lines[start:start + BODY]).encode()
        key = f"feed-{stream.pk}-{start}"
        while True:
            request = urllib.request.Request(f"{base}/ingest/{stream.pk}/", data=body, method="POST", headers={
                "Authorization": f"Bearer {stream.ingest_token}", "Content-Type": "application/x-ndjson",
                "Idempotency-Key": key})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    answer = json.loads(response.read())
                    tally["accepted"] += answer.get("accepted", answer.get("ops", 0))
                    tally["replayed"] += bool(answer.get("replayed"))
                    break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503, exc.read()
                tally["503"] += 1
            except OSError:
                tally["unanswered"] += 1
            time.sleep(0.3)
        time.sleep(pause)


#: what the ingest view answers 503 for: nothing was stored, the body may be sent again
NOTHING_STORED = (RedisConnectionError, RedisTimeoutError, LockError, DatabaseError)


def feed_in_process(stream, lines: list[str], tally: Counter, pause: float = PAUSE, body: int = BODY,
                    per_second: float | None = None,
                    sent: Callable[[float, int, int], None] | None = None) -> None:
    """Ingest the lines in bodies of ``body``, ``pause`` s apart (or paced at ``per_second`` lines a second, catching
    up when behind), in order, in this process (as the ingest view does, without the web server: the stream goes
    on while it is down). A body that fails with nothing stored (Redis or PostgreSQL away) is ingested again
    (``tally["retried"]``); ``sent`` gets each stored body's start time (``time.monotonic``) and seqs."""
    ingestor = Ingestor(stream)
    began = time.monotonic()
    try:
        for start in range(0, len(lines), body):
            if per_second:
                time.sleep(max(0.0, began + start / per_second - time.monotonic()))
            while True:
                at = time.monotonic()
                try:
                    result = ingestor.ingest(lines[start:start + body])
                    break
                except NOTHING_STORED:
                    tally["retried"] += 1
                    connection.close()
                    time.sleep(0.3)
            tally["accepted"] += result.accepted
            if sent is not None and result.seqs:
                sent(at, result.seqs[0], result.seqs[-1])
            if not per_second:
                time.sleep(pause)
    finally:
        connection.close()


class FeedClients:
    """Feed clients following queries in one event loop (a thread), from entering to leaving; each message kept
    with when it came (``time.monotonic``). Each speaks the browser's protocol (``kwmonitor.feed_client.follow``:
    a snapshot, then changes; on a drop, reconnect with backoff and ``?after=`` the last id it holds)."""

    def __init__(self, base: str, token: str, query_ids: list[int], per_query: int, max_backoff: float) -> None:
        self.urls = {(qid, n): f"{base.replace('http', 'ws')}/ws/queries/{qid}/"
                     for qid in query_ids for n in range(per_query)}
        self.token = token
        self.max_backoff = max_backoff
        self.messages: dict[tuple[int, int], list[tuple[float, dict]]] = {key: [] for key in self.urls}
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=asyncio.run, args=(self._run(),), daemon=True)
        self._started = threading.Event()

    def __enter__(self) -> "FeedClients":
        self._thread.start()
        assert self._started.wait(30)
        return self

    def __exit__(self, *exc_info) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)

    async def _run(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        tasks = [asyncio.create_task(follow(url, self.token, self._emitter(key), max_backoff=self.max_backoff))
                 for key, url in self.urls.items()]
        self._started.set()
        await self._stop.wait()
        for task in tasks:
            task.cancel()
        self.errors = [r for r in await asyncio.gather(*tasks, return_exceptions=True)
                       if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)]

    def _emitter(self, key):
        return lambda message: self.messages[key].append((time.monotonic(), message))

    def holding(self, ids: dict[int, str]) -> bool:
        """Whether every client has received its query's change ``ids[query]`` (or one after it)."""
        return not self.lagging(ids)

    def lagging(self, ids: dict[int, str]) -> dict[str, str | None]:
        """The clients (``"query/n"``) that have not received their query's change ``ids[query]`` (nor one after
        it), with the id they hold (None: no message yet)."""
        held = {key: (got[-1][1].get("id") or got[-1][1]["last_id"] or "0-0") if got else None
                for key, got in self.messages.items()}
        return {f"{qid}/{n}": at for (qid, n), at in held.items()
                if qid in ids and (at is None or entry_id_order(at) < entry_id_order(ids[qid]))}


def beat(client, stop: threading.Event, errors: Counter) -> None:
    """What beat sends while the stream runs: supervision and history rounds (a round that fails is skipped, and
    its database connection closed: the next round opens a new one, as a Celery task does after a crash)."""
    persister, supervisor = HistoryPersister(client), Supervisor()
    while not stop.wait(1.0):
        for name, step in (("supervise", supervisor.supervise), ("persist", persister.run)):
            try:
                step()
            except Exception:
                errors[name] += 1
                connection.close()
    connection.close()


def check_stretch(reference: list[Change], snapshot: dict, changes: list[Change], last: bool) -> None:
    """A snapshot and the changes after it equal the reference's live set then its changes (all of them if last)."""
    at = snapshot["last_seq"] if snapshot["last_seq"] is not None else -1
    assert {change_of(0, "add", r)[2] for r in snapshot["results"]} == live_after(reference, at)
    got, want = by_seq(changes), by_seq([c for c in reference if c[0] > at])
    assert len(got) <= len(want) and (len(got) == len(want) or not last)
    for i, ((seq, group), (ref_seq, ref_group)) in enumerate(zip(got, want)):
        assert seq == ref_seq, f"a change at seq {seq} where the reference has seq {ref_seq}"
        whole = last or i < len(got) - 1  # the connection may have dropped within the last seq of a stretch
        assert group == ref_group if whole else not group - ref_group, f"seq {seq}: {group} != {ref_group}"


def check_feed(reference: list[Change], messages: list[dict]) -> int:
    """A feed client's messages (a snapshot, changes, perhaps a new snapshot and changes...) equal the reference,
    stretch by stretch, the last one to its end; returns how many snapshots it got."""
    starts = [i for i, m in enumerate(messages) if m["type"] == "snapshot"] + [len(messages)]
    assert starts[0] == 0, f"the feed did not start with a snapshot: {messages[:1]}"
    for first, end in zip(starts, starts[1:]):
        changes = [change_of(m["seq"], m["type"], m["result"]) for m in messages[first + 1:end]]
        check_stretch(reference, messages[first], changes, last=end == len(messages))
    return len(starts) - 1


def history_of(query) -> list[Change]:
    """The query's history rows as changes, in the order they were written."""
    return [change_of(seq, kind, result) for seq, kind, result in
            ResultEvent.objects.filter(query=query).order_by("id").values_list("seq", "type", "result")]


def wait_until(condition: Callable[[], object], timeout: float, what: str, every: float = 0.2) -> float:
    """Poll ``condition`` until it is true; fail naming ``what`` after ``timeout`` s; returns the seconds waited."""
    began = time.monotonic()
    while not condition():
        assert time.monotonic() < began + timeout, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(every)
    return time.monotonic() - began


def applied_seq(client, evaluator_id: int) -> int:
    """The last seq the evaluator applied (-1: none yet)."""
    return int(client.hget(bus.Keys.evaluator_state(evaluator_id), "seq") or -1)


def wait_running(client, evaluator_id: int, timeout: float = 300) -> float:
    """Wait for the evaluator's heartbeat to say it runs; returns the seconds waited."""
    return wait_until(lambda: getattr(bus.read_heartbeat(client, evaluator_id), "status", None) == "running",
                      timeout, "the evaluator to run", every=0.5)


def wait_published(client, evaluator_id: int, faulty: FaultStream, timeout: float = 300) -> float:
    """Wait for the evaluator to apply every line and publish each query's last reference change."""
    return wait_until(lambda: applied_seq(client, evaluator_id) >= len(faulty.lines) - 1 and all(
        int(client.get(bus.Keys.published_seq(query.pk)) or -1) >= faulty.references[query.pk][-1][0]
        for query in faulty.queries), timeout, "every op applied and its changes published", 0.5)


def wait_followed(client, query: KeywordQuery, out: Path, timeout: float = 60) -> float:
    """Wait for the feed client writing ``out`` to get the query's last published change."""
    last_id = client.xrevrange(bus.Keys.changes(query.pk), count=1)[0][0]
    return wait_until(lambda: last_id in out.read_text(), timeout, "the feed client to get the last change", 0.3)


def check_landing(landing_dir: Path, faulty: FaultStream, tally: Counter) -> None:
    """Every line was accepted once and stored once, line i with seq i (read one line at a time: a soak's
    millions of lines are not held twice)."""
    assert tally["accepted"] == len(faulty.lines)
    stored = (split_seq(line) for line in read_landing(landing_dir / str(faulty.stream.pk)))
    for i, (line, got) in enumerate(itertools.zip_longest(faulty.lines, stored)):
        assert line is not None and got == (i, json.loads(line)), f"seq {i}: stored {got}, sent {line}"
