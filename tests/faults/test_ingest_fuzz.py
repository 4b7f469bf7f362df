"""100,000 fuzzed lines through the ingest endpoint: no 5xx, every good line stored, every bad one a dead letter.

A seeded generator mixes good ops (some with huge texts, unicode, NUL
characters) with bad lines of every kind a client can send: truncated JSON,
wrong types, huge numbers, non-finite numbers, lone surrogates, deep nesting,
binary garbage, objects that are not ops. They go to a real daphne in large
bodies. For each body the answer must not be a 5xx, its accepted count and
rejected line numbers must match what the generator made, and every rejected
line must appear, with the answer's reason, as a dead letter on the stream's
events. At the end the stream's source holds exactly the good ops, in order.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request

import pytest

from kwmonitor.streams.models import Stream
from streaming import bus
from streaming.events import DEAD_LETTER_LINE_CHARS
from streaming.sources import read_landing, split_seq
from tests.browser.server import asgi_server

pytestmark = [pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LINES = 100_000
BODY_LINES = 5_000
SEED = 20_261_123


class Fuzzer:
    """Seeded lines, each known good or bad; good ones are valid ops with fresh keys and growing ts."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_key = 0
        self.ts = 0.0

    def good(self) -> str:
        rng = self.rng
        self.next_key += 1
        self.ts += rng.choice((0.0, 0.5, 1.0))
        relation = rng.choice(("Customer", "Product", "Order"))
        text = rng.choice(("Summer dress", "Zoë Ünal", "東京 gift", "a\u0000b", "🧣 scarf", "x" * rng.choice((1, 50_000))))
        tuple_ = {"Customer": {"cid": self.next_key, "name": text, "state": "Texas"},
                  "Product": {"pid": self.next_key, "title": text, "price": rng.choice((0, 40, 9.99, 1e300))},
                  "Order": {"oid": self.next_key, "cid": 1, "pid": 2, "note": text}}[relation]
        return json.dumps({"op": "insert", "relation": relation, "tuple": tuple_, "ts": self.ts}, ensure_ascii=rng.random() < 0.5)

    def bad(self) -> bytes:
        rng = self.rng
        kind = rng.randrange(10)
        if kind == 0:  # truncated JSON
            line = self.good_shape()
            return line[: rng.randrange(1, len(line) - 1)].encode()
        if kind == 1:  # wrong types
            return json.dumps({"op": "insert", "relation": "Product", "ts": 1.0, "tuple": {
                "pid": rng.choice(("7", 7.5, True, None, [7])), "title": "t", "price": 1.0}}).encode()
        if kind == 2:  # huge numbers, non-finite numbers
            return rng.choice((b'{"op":"insert","relation":"Product","tuple":{"pid":1180591620717411303424,"title":"t","price":1},"ts":1}',
                               b'{"op":"insert","relation":"Product","tuple":{"pid":1,"title":"t","price":1e400},"ts":1}',
                               b'{"op":"delete","relation":"Product","key":1,"ts":-1e999}',
                               b'{"op":"delete","relation":"Product","key":1,"ts":NaN}'))
        if kind == 3:  # lone surrogate, invalid UTF-8
            return rng.choice((b'{"op":"delete","relation":"Order","key":1,"ts":"\\ud800"}', b'\xff\xfe{"op":1}',
                               "caf\u00e9".encode("latin-1")))
        if kind == 4:  # deep nesting
            depth = rng.choice((600, 2000, 5000))
            return b'{"op":"insert","relation":"Order","tuple":' + b"[" * depth + b"]" * depth + b',"ts":1}'
        if kind == 5:  # binary garbage (no newline, never blank)
            return b"\x00" + bytes(rng.choice([b for b in range(256) if b != 10]) for _ in range(rng.randrange(0, 200)))
        if kind == 6:  # JSON that is not an op
            return rng.choice((b"[1,2]", b'"op"', b"null", b"{}", b'{"op":"insert"}', b"12"))
        if kind == 7:  # unknown relation or field
            return rng.choice((b'{"op":"insert","relation":"Shipment","tuple":{"id":1},"ts":1}',
                               b'{"op":"delete","relation":"Order","key":1,"ts":1,"extra":true}'))
        if kind == 8:  # missing key, unknown attribute
            return rng.choice((b'{"op":"insert","relation":"Customer","tuple":{"name":"a","state":"b"},"ts":1}',
                               b'{"op":"insert","relation":"Customer","tuple":{"cid":1,"name":"a","state":"b","x":1},"ts":1}'))
        return ("\u2028" + "x" * rng.randrange(1, 30_000)).encode()  # a long line that is no JSON

    def good_shape(self) -> str:
        return json.dumps({"op": "insert", "relation": "Customer", "tuple": {"cid": 1, "name": "n", "state": "s"}, "ts": 1})

    def lines(self, n: int) -> list[tuple[bytes, bool]]:
        return [(self.good().encode(), True) if self.rng.random() < 0.5 else (self.bad(), False) for _ in range(n)]


def post(base: str, stream: Stream, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(f"{base}/ingest/{stream.pk}/", data=body, method="POST", headers={
        "Authorization": f"Bearer {stream.ingest_token}", "Content-Type": "application/x-ndjson"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_fuzzed_ingest_lines(ecommerce_schema, redis_client, redis_url, settings, tmp_path):
    settings.LANDING_DIR = tmp_path / "landing"
    settings.INGEST_MAX_BYTES = 64 * 1024 * 1024
    stream = Stream.objects.create(name="fuzz", schema=ecommerce_schema)
    fuzzer = Fuzzer(SEED)
    counts = {"good": 0, "bad": 0, "accepted": 0, "dead letters": 0}
    statuses: dict[int, int] = {}
    sent_good: list[dict] = []
    after = "0-0"
    started = time.monotonic()
    env = {"LANDING_DIR": str(settings.LANDING_DIR), "INGEST_MAX_BYTES": str(settings.INGEST_MAX_BYTES)}
    with asgi_server(redis_url, extra_env=env) as base:
        for _ in range(LINES // BODY_LINES):
            lines = fuzzer.lines(BODY_LINES)
            status, answer = post(base, stream, b"\n".join(line for line, _ in lines) + b"\n")
            statuses[status] = statuses.get(status, 0) + 1
            assert status < 500, answer
            bad_numbers = [n for n, (_, good) in enumerate(lines, 1) if not good]
            assert [e["line"] for e in answer["errors"]] == bad_numbers
            assert answer["accepted"] == BODY_LINES - len(bad_numbers)
            counts["good"] += answer["accepted"]
            counts["bad"] += len(bad_numbers)
            sent_good += [json.loads(line) for line, good in lines if good]
            events = bus.read_stream_events(redis_client, stream.pk, after, count=BODY_LINES * 2)
            after = events[-1][0] if events else after
            dead = [e for _, e in events if e.type == "deadletter"]
            counts["dead letters"] += len(dead)
            expected = [(lines[e["line"] - 1][0].decode("utf-8", "replace")[:DEAD_LETTER_LINE_CHARS], e["reason"])
                        for e in answer["errors"]]
            assert [(d.line, d.reason) for d in dead] == expected  # each bad line, with its reason
            assert all(d.seq is None for d in dead)
    elapsed = time.monotonic() - started
    stored = [split_seq(line) for line in read_landing(settings.LANDING_DIR / str(stream.pk))]
    print(f"{LINES} fuzzed lines in {LINES // BODY_LINES} bodies in {elapsed:.1f} s: {counts['good']} good stored, "
          f"{counts['bad']} bad, {counts['dead letters']} dead letters; statuses {statuses}")
    assert [seq for seq, _ in stored] == list(range(len(sent_good)))
    assert [op for _, op in stored] == sent_good  # every good line, once, in order, as sent
    assert counts["dead letters"] == counts["bad"] and counts["good"] + counts["bad"] == LINES
    assert set(statuses) <= {200}
