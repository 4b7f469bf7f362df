"""The ingest endpoint and ``manage.py replay``: token, size limit, per-line errors, seqs in the source."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from streaming import sources
from streaming.bus import Keys, read_stream_events

pytestmark = [pytest.mark.django_db, pytest.mark.redis]

GOOD = [
    {"op": "insert", "relation": "Customer", "tuple": {"cid": 1, "name": "Ann", "state": "Texas"}, "ts": 0},
    {"op": "insert", "relation": "Product", "tuple": {"pid": 1, "title": "Summer dress", "price": 40.0}, "ts": 1},
    {"op": "delete", "relation": "Customer", "key": 1, "ts": 2},
]


@pytest.fixture
def stream(ecommerce_schema, redis_client, landing):
    from kwmonitor.streams.models import Stream

    return Stream.objects.create(name="shop", schema=ecommerce_schema)


def post(client, stream, body, token=None, **headers):
    return client.post(
        reverse("ingest:ingest", args=[stream.pk]), data=body, content_type="application/x-ndjson",
        HTTP_AUTHORIZATION=f"Bearer {token or stream.ingest_token}", headers=headers,
    )


def ndjson(*objs):
    return "".join(json.dumps(o) + "\n" for o in objs)


def stored(stream, landing):
    return [sources.split_seq(line) for line in sources.read_landing(landing / str(stream.pk))]


def test_good_lines_get_consecutive_seqs_in_the_landing_directory(client, stream, landing):
    response = post(client, stream, ndjson(*GOOD))
    assert response.status_code == 200
    assert response.json() == {"accepted": 3, "rejected": 0, "first_seq": 0, "last_seq": 2, "errors": []}
    response = post(client, stream, ndjson(GOOD[0]))
    assert response.json()["first_seq"] == 3
    assert stored(stream, landing) == [(i, op) for i, op in enumerate(GOOD + GOOD[:1])]


def test_each_bad_line_is_reported_kept_as_a_dead_letter_and_the_good_ones_are_kept(client, stream, landing,
                                                                                     redis_client):
    body = "\n".join([
        json.dumps(GOOD[0]),
        '{"op": "insert", "relation": "Customer", "tuple": {"cid": 2,',
        json.dumps({"op": "insert", "relation": "Shipment", "tuple": {"id": 1}, "ts": 1}),
        json.dumps({"op": "insert", "relation": "Product", "tuple": {"pid": "x", "title": "t"}, "ts": 1}),
        "",
        json.dumps(GOOD[1]),
        "[1, 2]",
    ]).encode() + b"\n\xff\xfe\n"
    response = post(client, stream, body)
    assert response.status_code == 200
    data = response.json()
    assert (data["accepted"], data["rejected"]) == (2, 5)
    reasons = {e["line"]: e["reason"] for e in data["errors"]}
    assert sorted(reasons) == [2, 3, 4, 7, 8]
    assert reasons[2].startswith("malformed JSON")
    assert reasons[3] == "unknown relation 'Shipment'"
    assert "expected int" in reasons[4]
    assert reasons[7] == "an op must be a JSON object"
    assert reasons[8] == "not UTF-8 text"
    assert stored(stream, landing) == [(0, GOOD[0]), (1, GOOD[1])]
    lines = body.split(b"\n")
    expected = [(None, lines[n - 1].decode("utf-8", "replace"), reasons[n]) for n in sorted(reasons)]
    assert dead_letters(redis_client, stream) == expected


def dead_letters(redis_client, stream) -> list[tuple]:
    """(seq, line, reason) of the dead letters on the stream's events, oldest first."""
    return [(e.seq, e.line, e.reason) for _, e in read_stream_events(redis_client, stream.pk, count=100_000)
            if e.type == "deadletter"]


@pytest.mark.parametrize("source_kind", ["landing", "redis"])
def test_a_body_sent_again_with_its_idempotency_key_is_stored_once(client, stream, landing, redis_client, source_kind):
    stream.source_kind = source_kind
    stream.save()
    body = ndjson(GOOD[0], {"op": "insert"}, GOOD[1])
    first = post(client, stream, body, **{"Idempotency-Key": "batch-7"})
    assert first.status_code == 200 and first.json()["accepted"] == 2
    letters = len(dead_letters(redis_client, stream))
    again = post(client, stream, body, **{"Idempotency-Key": "batch-7"})
    assert again.status_code == 200
    assert again.json() == {**first.json(), "replayed": True}
    assert len(dead_letters(redis_client, stream)) == letters  # nothing published again
    assert post(client, stream, body, **{"Idempotency-Key": "batch-8"}).json()["first_seq"] == 2  # a new batch
    reused = post(client, stream, ndjson(GOOD[2]), **{"Idempotency-Key": "batch-7"})
    assert reused.status_code == 422 and "another body" in reused.json()["error"]
    if source_kind == "landing":
        assert [seq for seq, _ in stored(stream, landing)] == [0, 1, 2, 3]
    else:
        assert redis_client.xlen(Keys.stream_ops(stream.pk)) == 4


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "caf\u00e9"])
def test_a_malformed_idempotency_key_is_a_400_and_stores_nothing(client, stream, landing, key):
    response = post(client, stream, ndjson(GOOD[0]), **{"Idempotency-Key": key})
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["error"]
    assert stored(stream, landing) == []


def test_ingest_dead_letters_reach_the_history(client, stream, redis_client):
    from kwmonitor.streams.history import HistoryPersister
    from kwmonitor.streams.models import DeadLetterRecord

    post(client, stream, "nope\n" + ndjson(GOOD[0]) + '{"op": "insert"}\n')
    HistoryPersister(redis_client).run()
    rows = DeadLetterRecord.objects.filter(stream=stream).order_by("id")
    assert [(r.seq, r.line, r.reason) for r in rows] == dead_letters(redis_client, stream)
    assert [r.line for r in rows] == ["nope", '{"op": "insert"}']


def test_a_body_of_only_bad_lines_is_a_400(client, stream):
    response = post(client, stream, "nope\n")
    assert response.status_code == 400 and response.json()["accepted"] == 0


def test_oversized_body_is_refused_whole(client, stream, landing, settings):
    settings.INGEST_MAX_BYTES = 100
    response = post(client, stream, ndjson(*GOOD))
    assert response.status_code == 413 and "larger than the limit of 100 bytes" in response.json()["error"]
    assert stored(stream, landing) == []


def test_a_stream_locked_by_a_live_writer_past_the_wait_is_a_503_and_stores_nothing(client, stream, landing,
                                                                                     redis_client, monkeypatch):
    monkeypatch.setattr(sources.writer, "LANDING_LOCK_SECONDS", 0.2)
    holder = redis_client.lock(Keys.stream_lock(stream.pk), timeout=30)
    assert holder.acquire(blocking=False)
    response = post(client, stream, ndjson(*GOOD))
    assert response.status_code == 503 and response["Retry-After"] == "2"
    assert "nothing was stored" in response.json()["error"]
    assert stored(stream, landing) == []
    holder.release()
    assert post(client, stream, ndjson(*GOOD)).json()["first_seq"] == 0  # no seq was taken by the refused body


@pytest.mark.parametrize("token", ["wrong", ""])
def test_a_wrong_or_missing_token_is_a_401(client, stream, token):
    response = client.post(reverse("ingest:ingest", args=[stream.pk]), data=ndjson(GOOD[0]),
                           content_type="application/x-ndjson", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")


def test_unknown_stream_and_get_are_refused(client, stream):
    assert client.post(reverse("ingest:ingest", args=[stream.pk + 100]), data="",
                       content_type="application/x-ndjson", HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}").status_code == 401
    assert client.get(reverse("ingest:ingest", args=[stream.pk])).status_code == 405


def test_redis_source_streams_get_seqs_in_their_redis_stream(client, stream, redis_client):
    stream.source_kind = "redis"
    stream.save()
    assert post(client, stream, ndjson(*GOOD)).json()["last_seq"] == 2
    lines = [line for _, line in sources.read_redis_stream(redis_client, Keys.stream_ops(stream.pk), "0-0")]
    assert [sources.split_seq(line) for line in lines] == list(enumerate(GOOD))


def test_replay_command_writes_the_file_and_reports_rejects(stream, landing, tmp_path):
    path = tmp_path / "ops.ndjson"
    path.write_text(ndjson(*GOOD) + "garbage\n" + ndjson(GOOD[0]))
    out, err = io.StringIO(), io.StringIO()
    call_command("replay", str(path), stream=stream.pk, batch_size=2, stdout=out, stderr=err)
    assert out.getvalue().startswith("4 ops accepted (seq 0..3), 1 rejected")
    assert err.getvalue().strip().startswith(f"{path}:4: malformed JSON")
    assert [seq for seq, _ in stored(stream, landing)] == [0, 1, 2, 3]


def test_replay_paces_to_the_rate(stream):
    from kwmonitor.ingest.management.commands.replay import Replayer

    now = [0.0]
    slept: list[float] = []

    def sleep(seconds):
        slept.append(round(seconds, 6))
        now[0] += seconds

    replayer = Replayer(stream, rate=10, batch_size=5, sleep=sleep, clock=lambda: now[0])
    result = replayer.run(io.StringIO(ndjson(*(GOOD[:2] * 10))))
    assert result.accepted == 20
    assert slept == [0.5, 0.5, 0.5]  # batches start at 0, 0.5, 1.0, 1.5 s: 10 ops/s
