"""The stream's clock guard at ingest: absurd timestamps are dead letters (no seq), the rest of the body is kept.

The ingest clock (the largest ts stored) lives in Redis and moves under the
landing lock with each stored body, for NDJSON and XML bodies and
``manage.py replay`` alike; concurrent writers never store a jump the guard
refuses, and ``reset_stream`` starts the clock over.
"""

from __future__ import annotations

import io
import json
import re
import threading

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from kwmonitor.ingest.service import Ingestor, judge_times
from streaming import sources
from streaming.bus import Keys, read_stream_events
from streaming.clock import ClockGuard
from streaming.events import DeadLetter
from streaming.workloads.photons import photon_items

pytestmark = [pytest.mark.django_db, pytest.mark.redis]


def product(pid: int, ts: float) -> dict:
    return {"op": "insert", "relation": "Product", "tuple": {"pid": pid, "title": "dress", "price": 9.5}, "ts": ts}


def ndjson(*objs: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def post(client, stream, body: str, content_type: str = "application/x-ndjson"):
    return client.post(reverse("ingest:ingest", args=[stream.pk]), data=body, content_type=content_type,
                       HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}")


@pytest.fixture
def stream(ecommerce_schema, redis_client, landing):
    from kwmonitor.streams.models import Stream

    return Stream.objects.create(name="shop", schema=ecommerce_schema, max_clock_jump=3600.0)


def stored(stream, landing) -> list[tuple[int, dict]]:
    return [sources.split_seq(line) for line in sources.read_landing(landing / str(stream.pk))]


def dead_letters(redis_client, stream) -> list[DeadLetter]:
    return [e for _, e in read_stream_events(redis_client, stream.pk, count=1000) if isinstance(e, DeadLetter)]


def test_judge_times_moves_the_clock_with_each_ts_it_takes():
    guard = ClockGuard(max_jump=10)
    reasons, clock = judge_times(guard, [5.0, 30.0, 14.0, 3.0, 24.0, 1e15], None)
    assert [r is None for r in reasons] == [True, False, True, True, True, False]
    assert "jumps 25 s past the stream clock 5" in reasons[1]  # judged against 5, not the later 14
    assert "outside the stream's range" in reasons[5]
    assert clock == 24.0  # the largest ts taken; a late 3.0 is the evaluator's to refuse
    assert judge_times(guard, [], 7.0) == ([], 7.0)


def test_a_line_the_guard_refuses_is_a_dead_letter_without_seq_and_the_rest_is_stored(client, stream, landing,
                                                                                      redis_client):
    body = ndjson(product(1, 1e15), product(2, 100.0), product(3, 1e9), product(4, 50.0), product(5, 3700.0),
                  product(6, -1.7e308), product(7, 3800.0))
    response = post(client, stream, body)
    assert response.status_code == 200
    answer = response.json()
    assert (answer["accepted"], answer["first_seq"], answer["last_seq"]) == (4, 0, 3)
    assert [(e["line"], e["reason"]) for e in answer["errors"]] == [
        (1, "ts 1e+15 is outside the stream's range [-62135596800, 253402300799] (its ts_min and ts_max settings)"),
        (3, "ts 1e+09 jumps 999999900 s past the stream clock 100 (at most 3600 s: its max_clock_jump setting)"),
        (6, "ts -1.7e+308 is outside the stream's range [-62135596800, 253402300799] (its ts_min and ts_max "
            "settings)"),
    ]
    # the first line had no clock to jump from; 50 is late (the evaluator's to judge) and moves nothing
    assert [op["tuple"]["pid"] for _, op in stored(stream, landing)] == [2, 4, 5, 7]
    assert sources.ingest_clock(redis_client, stream.pk) == 3800.0
    letters = dead_letters(redis_client, stream)
    assert [(d.seq, d.reason) for d in letters] == [(None, e["reason"]) for e in answer["errors"]]
    assert json.loads(letters[1].line) == product(3, 1e9)
    # the next body is judged against the clock the last one left
    answer = post(client, stream, ndjson(product(8, 7500.0), product(9, 7300.0))).json()
    assert [e["line"] for e in answer["errors"]] == [1] and answer["accepted"] == 1
    assert post(client, stream, ndjson(product(10, 1e9))).status_code == 400  # every line refused


def test_an_edited_guard_reaches_the_next_request_and_a_reset_starts_the_clock_over(client, stream, landing,
                                                                                    redis_client):
    assert post(client, stream, ndjson(product(1, 10.0))).status_code == 200
    assert post(client, stream, ndjson(product(2, 1e6))).status_code == 400
    stream.max_clock_jump = None  # no limit
    stream.save()
    assert post(client, stream, ndjson(product(2, 1e6))).json()["accepted"] == 1
    stream.ts_max = 2e6
    stream.save()
    assert post(client, stream, ndjson(product(3, 3e6))).status_code == 400
    call_command("reset_stream", str(stream.pk), no_input=True, stdout=io.StringIO())
    assert redis_client.get(Keys.stream_clock(stream.pk)) is None
    stream.refresh_from_db()
    stream.max_clock_jump = 60.0
    stream.save()
    assert post(client, stream, ndjson(product(4, 1e6), product(5, 1e6 + 61))).json()["first_seq"] == 0
    assert sources.ingest_clock(redis_client, stream.pk) == 1e6


def test_a_redis_source_stream_is_guarded_alike(client, stream, redis_client):
    stream.source_kind = "redis"
    stream.save()
    answer = post(client, stream, ndjson(product(1, 10.0), product(2, 1e9), product(3, 11.0))).json()
    assert (answer["accepted"], [e["line"] for e in answer["errors"]]) == (2, [2])
    lines = [line for _, line in sources.read_redis_stream(redis_client, Keys.stream_ops(stream.pk), "0-0")]
    assert [sources.split_seq(line)[1]["ts"] for line in lines] == [10.0, 11.0]
    assert sources.ingest_clock(redis_client, stream.pk) == 11.0


def test_replay_goes_through_the_guard(stream, landing, tmp_path):
    path = tmp_path / "ops.ndjson"
    path.write_text(ndjson(product(1, 10.0), product(2, 1e15), product(3, 20.0)))
    out, err = io.StringIO(), io.StringIO()
    call_command("replay", str(path), stream=stream.pk, batch_size=1, stdout=out, stderr=err)
    assert out.getvalue().startswith("2 ops accepted (seq 0..1), 1 rejected")
    assert err.getvalue().strip() == (f"{path}:2: ts 1e+15 is outside the stream's range [-62135596800, "
                                      "253402300799] (its ts_min and ts_max settings)")


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_are_judged_as_if_one_after_the_other(stream, landing, redis_client):
    """Eight writers send bodies whose ts climb at different paces (5, 10, 20 s a body), which the guard
    (10 s) allows only in some orders. Each body
    starts with a late op (ingest stores it whatever the clock), whose seq says where the body's turn
    came: judged again one after the other in that order, every body gets exactly the answer it got, so
    no writer judged against a clock another writer had moved on (and nothing stored jumps too far)."""
    stream.max_clock_jump = 10.0
    stream.save()
    answers: list[tuple[list[float], object]] = []
    failures: list[BaseException] = []

    def send(worker: int) -> None:
        try:
            ingestor = Ingestor(stream)
            for k in range(15):
                key, ts = 1000 * worker + k, float(k * (5, 10, 20)[worker % 3] + worker)
                times = [-1.0, ts, ts + 9]
                lines = [json.dumps(product(10**6 * i + key, t)) for i, t in enumerate(times)]
                answers.append((times, ingestor.ingest(lines)))
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    clock = None
    for times, result in sorted(answers, key=lambda a: a[1].seqs[0]):
        reasons, after = judge_times(stream.clock_guard(), times, clock)
        assert [e.reason for e in result.errors] == [r for r in reasons if r is not None]
        assert len(result.seqs) == reasons.count(None)
        clock = after
    stored_times = [op["ts"] for _, op in stored(stream, landing)]
    assert judge_times(stream.clock_guard(), stored_times, None)[0] == [None] * len(stored_times)
    assert clock == max(stored_times) == sources.ingest_clock(redis_client, stream.pk)
    assert any(result.errors for _, result in answers), "the workload should make the guard refuse some ops"


def test_an_xml_item_the_guard_refuses_is_a_dead_letter_and_the_other_items_are_kept(photons_stream, redis_client,
                                                                                   landing):
    photons_stream.max_clock_jump = 100.0
    photons_stream.save()
    first, second = photon_items(2, seed=5)
    far = re.sub(r"<det_time>[^<]*</det_time>", "<det_time>1000000000</det_time>", first)
    body = f"<photons>{first}\n{far}\n{second}</photons>"
    response = Client().post(reverse("ingest:ingest", args=[photons_stream.pk]), data=body,
                             content_type="application/xml", HTTP_AUTHORIZATION=f"Bearer {photons_stream.ingest_token}")
    answer = response.json()
    assert (answer["accepted"], answer["ops"], answer["first_seq"], answer["last_seq"]) == (2, 4, 0, 3)
    assert [(e["index"], e["line"]) for e in answer["errors"]] == [(1, 2)]
    assert answer["errors"][0]["reason"].startswith("ts 1e+09 jumps ")
    ops = [op for _, op in stored(photons_stream, landing)]
    assert [op["op"] for op in ops] == ["item", "insert", "item", "insert"]
    assert [op["xml"] for op in ops if op["op"] == "item"] == [first, second]
    letters = dead_letters(redis_client, photons_stream)
    assert [(d.seq, d.line) for d in letters] == [(None, far)]
    assert letters[0].reason.startswith("item 1 (line 2): ts 1e+09 jumps ")
    assert sources.ingest_clock(redis_client, photons_stream.pk) == ops[-1]["ts"]
