"""XML items into an XML stream: item ops and mapped inserts with consecutive seqs, per-item dead letters, 415."""

from __future__ import annotations

import random

import orjson
import pytest
from django.urls import reverse
from lxml import etree

from streaming import sources
from streaming.bus import read_stream_events
from streaming.events import DeadLetter
from streaming.workloads.photons import photon_items

pytestmark = [pytest.mark.django_db, pytest.mark.redis]

BILLION_LAUGHS = ('<!DOCTYPE photons [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;">]>'
                  "<photons>{good}<photon><coord><cel><ra>1</ra><dec>2</dec></cel><det><dx>1</dx><dy>2</dy></det>"
                  "</coord><phc>3</phc><en>&lol2;</en><det_time>9</det_time></photon>{good}</photons>")


@pytest.fixture
def stream(photons_stream, redis_client, landing):
    return photons_stream


def post(client, stream, body, content_type="application/xml"):
    return client.post(reverse("ingest:ingest", args=[stream.pk]), data=body, content_type=content_type,
                       HTTP_AUTHORIZATION=f"Bearer {stream.ingest_token}")


def stored(stream, landing):
    return [sources.split_seq(line) for line in sources.read_landing(landing / str(stream.pk))]


def test_items_become_an_item_op_and_their_inserts_with_consecutive_seqs(client, stream, landing):
    items = list(photon_items(3, seed=5))
    response = post(client, stream, "<photons>" + "\n".join(items) + "</photons>")
    assert response.status_code == 200
    assert response.json() == {"accepted": 3, "rejected": 0, "ops": 6, "first_seq": 0, "last_seq": 5, "errors": []}
    ops = stored(stream, landing)
    assert [seq for seq, _ in ops] == list(range(6))
    assert [op["op"] for _, op in ops] == ["item", "insert"] * 3
    for k, text in enumerate(items):
        item, insert = ops[2 * k][1], ops[2 * k + 1][1]
        assert item["xml"] == text
        assert insert["relation"] == "Photon" and insert["tuple"]["pid"] == k
        assert item["ts"] == insert["ts"] == float(etree.fromstring(text).findtext("det_time"))
    post(client, stream, "<photons>" + items[0] + "</photons>")
    assert stored(stream, landing)[-1][1]["tuple"]["pid"] == 3  # generated keys go on across requests


def test_an_attack_or_an_invalid_item_is_a_dead_letter_and_the_others_are_kept(client, stream, landing):
    good = next(photon_items(1))
    invalid = good.replace("<phc>", "<phc>x").replace("<det>", "<det><dz>1</dz>", 1)
    body = BILLION_LAUGHS.format(good=good).replace("</photons>", invalid + "</photons>")
    response = post(client, stream, body)
    assert response.status_code == 200
    answer = response.json()
    assert (answer["accepted"], answer["rejected"], answer["ops"]) == (2, 2, 4)
    assert [(e["index"], e["reason"].split(":")[0]) for e in answer["errors"]] == [
        (1, "entity reference &lol2;"), (3, "Element det content does not follow the DTD, expecting (dx , dy), got (dz dx dy)")]
    dead = [e for _, e in read_stream_events(stream_client(), stream.pk) if isinstance(e, DeadLetter)]
    assert [d.reason.split(":")[0] for d in dead] == ["item 1 (line 1)", "item 3 (line 1)"]
    assert all(d.seq is None for d in dead)


def stream_client():
    from kwmonitor.streams.connection import redis_client

    return redis_client()


def test_a_value_the_mapping_cannot_take_refuses_the_item(client, stream, landing):
    good = next(photon_items(1))
    response = post(client, stream, "<photons>" + good.replace("<phc>", "<phc>x") + "</photons>")
    assert response.status_code == 400
    assert response.json()["errors"][0]["reason"].startswith("Photon.phc (phc): 'x")
    assert stored(stream, landing) == []


def test_each_stream_refuses_the_other_format_with_415(client, stream, ecommerce_schema):
    from kwmonitor.streams.models import Stream

    response = post(client, stream, orjson.dumps({"op": "insert"}).decode(), "application/x-ndjson")
    assert response.status_code == 415
    assert "takes XML items (Content-Type: application/xml)" in response.json()["error"]
    shop = Stream.objects.create(name="shop", schema=ecommerce_schema)
    response = post(client, shop, "<photons/>", "text/xml")
    assert response.status_code == 415 and "takes NDJSON ops" in response.json()["error"]


def test_a_body_that_is_not_a_document_of_items(client, stream, landing):
    response = post(client, stream, "<stars><photon/></stars>")
    assert response.status_code == 400 and response.json()["accepted"] == 0
    assert "the body's root element is <stars>" in response.json()["errors"][0]["reason"]
    assert stored(stream, landing) == []


def _deep(levels: int) -> str:
    return "<photon>" + "<coord>" * levels + "</coord>" * levels + "</photon>"


@pytest.mark.parametrize("prolog, attack, reason", [
    ('<!DOCTYPE photons [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>',
     "<photon><coord><cel><ra>1</ra><dec>2</dec></cel><det><dx>1</dx><dy>2</dy></det></coord><phc>3</phc>"
     "<en>&xxe;</en><det_time>9</det_time></photon>", "entity reference &xxe;: entities are never expanded"),
    ('<!DOCTYPE photons [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>',
     '<photon x="&b;"/>', "entity reference in attribute 'x': entities are never expanded"),
    ("", _deep(40), "nested deeper than 32 levels"),
    ("", '<photon big="' + "y" * 70_000 + '"/>', "attribute 'big' is longer than 65536 characters"),
])
def test_xml_attacks_are_refused_and_nothing_else_is_lost(client, stream, landing, prolog, attack, reason):
    good = list(photon_items(2, seed=8))
    response = post(client, stream, prolog + "<photons>" + good[0] + attack + good[1] + "</photons>")
    assert response.status_code == 200
    answer = response.json()
    assert (answer["accepted"], answer["ops"]) == (2, 4)
    assert [(e["index"], e["reason"]) for e in answer["errors"]] == [(1, reason)]
    assert [op["xml"] for _, op in stored(stream, landing) if op["op"] == "item"] == good


def _bad_item(rng, good: str, entities: bool) -> str:
    """An item the ingest must refuse, of a random kind (entity, DTD violation, limits, unmappable value);
    an entity reference only if the body declares the entity (an undeclared one ends a body's well-formedness)."""
    kind = rng.randrange(0 if entities else 1, 6)
    if kind == 0:
        return good.replace("<en>", "<en>&lol;", 1)
    if kind == 1:
        return good.replace("<phc>", "<phc>1</phc><phc>", 1)
    if kind == 2:
        return _deep(rng.choice((33, 60, 200)))
    if kind == 3:
        return good.replace("<photon>", '<photon a="' + "é" * 70_000 + '">', 1)
    if kind == 4:
        return good.replace("<dx>", "<dx>1.5e", 1)
    return good.replace("<det_time>", "<det_time>late ", 1)


def test_random_bodies_keep_exactly_the_good_items_in_order(client, stream, landing):
    rng = random.Random(20_261_123)
    goods = photon_items(2_000, seed=4)
    kept: list[str] = []
    for _ in range(25):
        kinds = [rng.random() < 0.7 for _ in range(rng.randrange(1, 60))]
        prolog = '<!DOCTYPE photons [<!ENTITY lol "lol">]>' if rng.random() < 0.5 else ""
        items = [next(goods) if good else _bad_item(rng, next(goods), bool(prolog)) for good in kinds]
        response = post(client, stream, prolog + "<photons>\n" + "\n".join(items) + "\n</photons>")
        answer = response.json()
        assert response.status_code == (200 if any(kinds) else 400)
        assert answer["accepted"] == sum(kinds) and answer["ops"] == 2 * sum(kinds)
        assert [e["index"] for e in answer["errors"]] == [i for i, good in enumerate(kinds) if not good]
        kept += [item for item, good in zip(items, kinds) if good]
    ops = stored(stream, landing)
    assert [seq for seq, _ in ops] == list(range(2 * len(kept)))
    assert [op["xml"] for _, op in ops if op["op"] == "item"] == kept
    assert [op["tuple"]["pid"] for _, op in ops if op["op"] == "insert"] == list(range(len(kept)))


def test_an_item_op_cannot_be_sent_as_ndjson(client, ecommerce_schema, landing):
    from kwmonitor.streams.models import Stream

    shop = Stream.objects.create(name="shop", schema=ecommerce_schema)
    line = orjson.dumps({"op": "item", "xml": "<photon/>", "ts": 1.0}).decode()
    response = post(client, shop, line + "\n", "application/x-ndjson")
    assert response.status_code == 400
    assert response.json()["errors"] == [{"line": 1, "reason": "op must be 'insert' or 'delete', got 'item'"}]
