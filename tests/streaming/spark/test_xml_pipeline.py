"""The whole path of an XML stream: HTTP ingest of XML items -> landing source -> Spark (local[2]) ->
evaluator -> Redis -> websocket, against ``python -m streaming wxquery run`` on the same items.

The paper's q1-q4 are saved as WXQuery subscriptions of the ``photons``
stream beside a filter query on the mapped ``Photon`` relation; three
requests carry the items (one with an entity attack and a value the mapping
refuses: dead letters, the others kept). Every subscription's result items on
Redis and on its websocket feed must be exactly the command line's output
for the accepted items, and the filter's live set the photons it admits.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from django.urls import reverse

from streaming import bus
from streaming.events import DeadLetter
from streaming.evaluator import GroupEvaluator
from streaming.workloads.photons import PAPER_QUERIES, PHOTONS_DTD, photon_items

from tests.kwmonitor.dashboard.test_consumers import communicator, session_cookie

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ATTACK = ('<!DOCTYPE photons [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">]>'
          "<photons>{items}<photon><coord><cel><ra>1</ra><dec>2</dec></cel><det><dx>1</dx><dy>2</dy></det>"
          "</coord><phc>3</phc><en>&lol2;</en><det_time>{t}</det_time></photon>{bad}</photons>")


@pytest.fixture
def xml_stream(photons_stream, user, settings, tmp_path):
    from kwmonitor.queries.models import KeywordQuery, Predicate, WXQuerySubscription
    from kwmonitor.streams.plans import publish_plan

    settings.LANDING_DIR = tmp_path / "landing"
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    subscriptions = [WXQuerySubscription.objects.create(owner=user, name=name, stream=photons_stream, text=text)
                     for name, text in PAPER_QUERIES.items()]
    hot = KeywordQuery.objects.create(owner=user, name="hot photons", schema=photons_stream.schema,
                                      stream=photons_stream, keywords="")
    Predicate.objects.create(query=hot, relation="Photon", attribute="en", op=">=", value=2.0)
    publish_plan(photons_stream.pk)
    return photons_stream, subscriptions, hot


def post(client, stream, body):
    return client.post(reverse("ingest:ingest", args=[stream.pk]), data=body, content_type="application/xml",
                       HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}")


def cli_results(subscriptions, items: list[str], workdir) -> dict[int, list[str]]:
    """``python -m streaming wxquery run --sharing widen`` on the items: each subscription's result items."""
    (workdir / "photons.dtd").write_text(PHOTONS_DTD)
    (workdir / "subs").mkdir()
    for sub in subscriptions:  # zero-padded ids: the command line registers in name order, the evaluator in id order
        (workdir / "subs" / f"{sub.pk:06d}.xq").write_text(sub.text)
    (workdir / "items.xml").write_text("<photons>\n" + "\n".join(items) + "\n</photons>\n")
    subprocess.run([sys.executable, "-m", "streaming", "wxquery", "run", "--dtd", str(workdir / "photons.dtd"),
                    "--subscriptions", str(workdir / "subs"), "--items", str(workdir / "items.xml"),
                    "--out-dir", str(workdir / "out"), "--sharing", "widen"], check=True)
    out = {}
    for sub in subscriptions:
        lines = (workdir / "out" / f"{sub.pk:06d}.xml").read_text().split("\n")
        assert lines[-1] == ""
        out[sub.pk] = lines[1:-2]  # between the outer elements' start and end tags
    return out


def feed(subscription_id: int, cookie, count: int) -> list[dict]:
    async def run() -> list[dict]:
        ws = communicator(f"/ws/subscriptions/{subscription_id}/?replay=5000", cookie)
        assert (await ws.connect())[0]
        messages = [await ws.receive_json_from(timeout=10) for _ in range(count)]
        assert await ws.receive_nothing(timeout=0.5)
        await ws.disconnect()
        return messages
    return asyncio.run(run())


def test_xml_ingest_through_spark_equals_the_wxquery_cli(spark, client, xml_stream, user, redis_client, redis_url,
                                                         tmp_path):
    from streaming.spark.job import start_query

    stream, subscriptions, hot = xml_stream
    items = list(photon_items(900, seed=5))
    bad_value = items[0].replace("<phc>", "<phc>x")
    last_t = items[299].split("<det_time>")[1].split("<")[0]
    responses = [post(client, stream, ATTACK.format(items="".join(items[:300]), t=last_t, bad=bad_value)),
                 post(client, stream, "<photons>" + "\n".join(items[300:600]) + "</photons>"),
                 post(client, stream, "<photons>" + "".join(items[600:]) + "</photons>")]
    answers = [r.json() for r in responses]
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert [(a["accepted"], a["rejected"], a["ops"]) for a in answers] == [(300, 2, 600), (300, 0, 600), (300, 0, 600)]
    assert [e["index"] for e in answers[0]["errors"]] == [300, 301]

    evaluator = GroupEvaluator(redis_client, stream.evaluator.pk)
    evaluator.start()
    query = start_query(spark, evaluator, redis_url, tmp_path / "ck", available_now=True)
    query.awaitTermination()
    assert query.exception() is None

    expected = cli_results(subscriptions, items, tmp_path)
    cookie = session_cookie(user)
    for sub in subscriptions:
        got = [r for _, r in bus.read_subscription_results(redis_client, sub.pk, count=100_000)]
        assert [r.item for r in got] == expected[sub.pk], f"{sub.name}: the results differ from the command line's"
        assert expected[sub.pk], f"{sub.name}: the workload should give results"
        messages = feed(sub.pk, cookie, len(got))
        assert [(m["type"], m["item"], m["seq"]) for m in messages] == [
            ("subscription.result", r.item, r.seq) for r in got]
    hot_photons = sum(1 for item in items if float(item.split("<en>")[1].split("<")[0]) >= 2.0)
    assert len(bus.read_snapshot(redis_client, hot.pk)[1]) == hot_photons > 0
    dead = [e for _, e in bus.read_stream_events(redis_client, stream.pk, count=10_000) if isinstance(e, DeadLetter)]
    assert sorted(d.reason.split(":")[0] for d in dead) == ["item 300 (line 1)", "item 301 (line 1)"]
    state = evaluator.session.state()["stream"]
    assert state["applied_seq"] == 1799 and state["wxquery"]["items"] == 900
    assert state["wxquery"]["subscriptions_sharing"] >= 2  # q2 serves q1, q4 serves q3 (Sect. 4.4)
