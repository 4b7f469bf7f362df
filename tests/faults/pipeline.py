"""The pipeline a fault test drives and checks: ops posted over HTTP, beat's rounds, the feed and history compared.

A feeder posts the lines in bodies in order, sending a body again while the
server answers 503 or does not answer (or ingests them in the test's process);
beat's supervision and history rounds
run in a thread; what a feed client printed and what history holds are held
to the reference (``tests.faults.reference``) change by change.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Callable

from django.db import connection

from kwmonitor.ingest.service import Ingestor
from kwmonitor.streams.history import HistoryPersister
from kwmonitor.streams.models import ResultEvent
from kwmonitor.streams.supervisor import Supervisor
from streaming import bus
from streaming.sources import read_landing, split_seq
from tests.faults.reference import Change, by_seq, change_of, live_after

__all__ = ["BODY", "PAUSE", "feed", "feed_in_process", "beat", "check_stretch", "check_feed", "history_of", "wait_until", "applied_seq",
           "wait_running", "wait_published", "check_landing"]

BODY, PAUSE = 60, 0.05  # bodies of 60 lines, one after the other


def feed(base: str, stream, lines: list[str], tally: Counter, crashes: list[tuple[int, threading.Event]],
         pause: float = PAUSE) -> None:
    """POST the lines in bodies, ``pause`` s apart, in order; a body answered 503 (or not answered) is sent again.
    Each event of ``crashes`` is set when the feeder reaches its line (the first of a body)."""
    for start in range(0, len(lines), BODY):
        for at, reached in crashes:
            if start == at:
                reached.set()
        body = "".join(line + "\n" for line in lines[start:start + BODY]).encode()
        while True:
            request = urllib.request.Request(f"{base}/ingest/{stream.pk}/", data=body, method="POST", headers={
                "Authorization": f"Bearer {stream.ingest_token}", "Content-Type": "application/x-ndjson"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    tally["accepted"] += json.loads(response.read())["accepted"]
                    break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503, exc.read()
                tally["503"] += 1
            except OSError:
                tally["unanswered"] += 1
            time.sleep(0.3)
        time.sleep(pause)


def feed_in_process(stream, lines: list[str], tally: Counter, pause: float = PAUSE) -> None:
    """Ingest the lines in bodies, ``pause`` s apart, in order, in this process (as the ingest view does, without
    the web server: the stream goes on while it is down)."""
    ingestor = Ingestor(stream)
    try:
        for start in range(0, len(lines), BODY):
            tally["accepted"] += ingestor.ingest(lines[start:start + BODY]).accepted
            time.sleep(pause)
    finally:
        connection.close()


def beat(client, stop: threading.Event, errors: Counter) -> None:
    """What beat sends while the stream runs: supervision and history rounds (a round that fails is skipped)."""
    persister, supervisor = HistoryPersister(client), Supervisor()
    while not stop.wait(1.0):
        for name, step in (("supervise", supervisor.supervise), ("persist", persister.run)):
            try:
                step()
            except Exception:
                errors[name] += 1
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


def wait_published(client, evaluator_id: int, ops: int, queries_and_references: list[tuple[object, list[Change]]],
                   timeout: float = 300) -> float:
    """Wait for the evaluator to apply all ``ops`` and publish each query's last reference change."""
    return wait_until(lambda: applied_seq(client, evaluator_id) >= ops - 1 and all(
        int(client.get(bus.Keys.published_seq(query.pk)) or -1) >= reference[-1][0]
        for query, reference in queries_and_references), timeout, "every op applied and its changes published", 0.5)


def check_landing(landing_dir: Path, stream, lines: list[str], tally: Counter) -> None:
    """Every line was accepted once and stored once, line i with seq i."""
    stored = [split_seq(line) for line in read_landing(landing_dir / str(stream.pk))]
    assert tally["accepted"] == len(lines) and stored == [(i, json.loads(line)) for i, line in enumerate(lines)]
