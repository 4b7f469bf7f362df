"""WXQuery subscriptions of an XML stream in the group evaluator: item ops in, result items out on Redis.

The reference is ``run_subscriptions`` on the same items, the machinery of
``python -m streaming wxquery run``; a filter query on the mapped relation
runs beside them on the same op stream.
"""

from __future__ import annotations

import orjson
import pytest
from lxml import etree

from streaming import bus
from streaming.evaluator import GroupEvaluator, group_keywords
from streaming.parsed import parse_stored_line
from streaming.events import DeadLetter, SubscriptionResult
from streaming.ops import item_op
from streaming.schema import Schema
from streaming.sharing.properties import EvaluatorPlan
from streaming.sources import stamp
from streaming.wxquery.run import run_subscriptions
from streaming.wxquery.translate import compile_text
from streaming.workloads.photons import PAPER_QUERIES, PHOTONS_DTD, PHOTONS_MAPPING, photons_document
from streaming.xmlstream.dtd import StreamDTD
from streaming.xmlstream.items import parse_items
from streaming.xmlstream.mapping import ItemMapper, ItemMapping

pytestmark = pytest.mark.redis

DTD = StreamDTD.from_text(PHOTONS_DTD)
MAPPING = ItemMapping.model_validate(PHOTONS_MAPPING)
SCHEMA = MAPPING.schema("photons")
TEXTS = {10 + i: text for i, text in enumerate(PAPER_QUERIES.values())}


def _plan(version: int, subscriptions: dict[int, str], queries=()) -> EvaluatorPlan:
    return EvaluatorPlan.model_validate({
        "version": version, "evaluator": 1,
        "stream": {"id": 4, "name": "photons", "schema": SCHEMA, "dtd": PHOTONS_DTD,
                   "source": {"kind": "redis", "key": "kw:stream:4:ops"}},
        "queries": list(queries),
        "subscriptions": [{"id": sid, "text": text} for sid, text in subscriptions.items()]})


def _lines(document: str) -> list[str]:
    """What the XML ingest stores: per item its item op, then its mapped inserts."""
    mapper = ItemMapper(MAPPING, DTD)
    ops = []
    for item in parse_items(document, DTD).items:
        element = item.element
        inserts = mapper.ops(element, 0.0)
        ops.append(item_op(etree.tostring(element, encoding="unicode", with_tail=False), inserts[0]["ts"]))
        ops += inserts
    return [stamp(seq, orjson.dumps(op).decode()) for seq, op in enumerate(ops)]


def _reference(document: str) -> dict[int, list[str]]:
    subs = [(str(sid), compile_text(text, lambda _s: DTD)) for sid, text in sorted(TEXTS.items())]
    items = [("photons", item.element) for item in parse_items(document, DTD).items]
    return {int(k): v for k, v in run_subscriptions(subs, items, "widen", lambda _s: DTD).results.items()}


def _feed(client, evaluator: GroupEvaluator, lines: list[str], size: int = 97) -> None:
    schema = Schema.from_dict(SCHEMA)
    keywords = group_keywords(bus.read_plan(client, 1))
    for batch, start in enumerate(range(0, len(lines), size)):
        evaluator.apply_batch(batch, [parse_stored_line(line, schema, keywords) for line in lines[start:start + size]])


def _published(client, sid: int) -> list[SubscriptionResult]:
    return [r for _, r in bus.read_subscription_results(client, sid, count=100_000)]


def test_results_equal_the_command_lines_and_filters_run_beside(redis_client):
    document = photons_document(500, seed=11)
    filter_query = {"id": 1, "keywords": [], "predicates": [
        {"relation": "Photon", "attribute": "en", "op": ">=", "value": 2.0}]}
    bus.write_plan(redis_client, 1, _plan(1, TEXTS, [filter_query]))
    evaluator = GroupEvaluator(redis_client, 1)
    evaluator.start()
    lines = _lines(document)
    _feed(redis_client, evaluator, lines)
    expected = _reference(document)
    for sid in TEXTS:
        got = _published(redis_client, sid)
        assert [r.item for r in got] == expected[sid]
        assert all(r.stream == 4 and r.subscription == sid for r in got)
        assert [r.seq for r in got] == sorted(r.seq for r in got)
    assert all(expected.values())
    hot = sum(1 for item in parse_items(document, DTD).items if float(item.element.findtext("en")) >= 2.0)
    assert len(bus.read_snapshot(redis_client, 1)[1]) == hot > 0
    assert evaluator.session.state()["stream"]["wxquery"]["subscriptions_sharing"] > 0


def test_a_replayed_batch_is_not_evaluated_twice_and_a_bad_item_is_a_dead_letter(redis_client):
    document = photons_document(40, seed=2).replace("<en>", "<en>x", 1)
    bus.write_plan(redis_client, 1, _plan(1, {10: PAPER_QUERIES["q3"], 11: PAPER_QUERIES["q4"]}))
    evaluator = GroupEvaluator(redis_client, 1)
    evaluator.start()
    items = parse_items(document, DTD).items
    lines = [stamp(seq, orjson.dumps(item_op(etree.tostring(item.element, encoding="unicode", with_tail=False),
                                             float(seq))).decode()) for seq, item in enumerate(items)]
    _feed(redis_client, evaluator, lines[:30])
    _feed(redis_client, evaluator, lines)
    assert len(_published(redis_client, 11)) == len(set((r.seq, r.item) for r in _published(redis_client, 11)))
    dead = [e for _, e in bus.read_stream_events(redis_client, 4, count=1000) if isinstance(e, DeadLetter)]
    assert [(d.seq, d.reason) for d in dead] == [(0, "/photons/photon/en is not a number and subscriptions read it as one")]


def test_an_item_op_without_subscriptions_changes_nothing(redis_client):
    bus.write_plan(redis_client, 1, _plan(1, {}))
    evaluator = GroupEvaluator(redis_client, 1)
    evaluator.start()
    _feed(redis_client, evaluator, _lines(photons_document(5)))
    assert evaluator.session.subscriptions is None
    assert evaluator.session.state()["stream"]["stored_tuples"] == 5


def test_a_batch_published_before_a_crash_is_not_published_twice(redis_client, monkeypatch):
    """The evaluator dies after publishing a batch's result items, before saving its state; the next
    evaluator applies the batch again and each subscription's stream still holds each item once."""
    document = photons_document(200, seed=5)
    bus.write_plan(redis_client, 1, _plan(1, TEXTS))
    lines = _lines(document)
    first = GroupEvaluator(redis_client, 1)
    first.start()
    _feed(redis_client, first, lines[:200])
    saved = {sid: len(_published(redis_client, sid)) for sid in TEXTS}

    def crash(*_outbox) -> None:
        raise SystemExit("killed after publishing")

    monkeypatch.setattr(first, "_persist", crash)
    with pytest.raises(SystemExit):
        _feed(redis_client, first, lines[200:])
    assert len(_published(redis_client, 13)) > saved[13]  # the lost batch had published items
    monkeypatch.undo()
    second = GroupEvaluator(redis_client, 1)
    second.start()
    assert second.session.applied_seq == 199
    _feed(redis_client, second, lines[200:])
    expected = _reference(document)
    for sid in (12, 13):  # q3 and q4 have no window: the restart loses no state they need
        assert [r.item for r in _published(redis_client, sid)] == expected[sid]


def test_a_late_item_or_one_the_guard_refuses_reaches_no_subscription_and_nor_do_its_inserts(redis_client):
    """The XML ingest stores an item op, then its inserts, at the item's ts: the evaluator judges the item
    against the stream clock as it will judge its inserts, so all are dead letters together and the
    subscriptions' results are those of the items without it."""
    document = photons_document(80, seed=7)
    kept = [item.element for item in parse_items(document, DTD).items]
    late, absurd = (etree.fromstring(etree.tostring(kept[k])) for k in (20, 40))
    late.find("det_time").text = "0.001"
    absurd.find("det_time").text = "1e15"
    hostile = "<photons>" + "".join(etree.tostring(e, encoding="unicode") for e in
                                    kept[:30] + [late] + kept[30:50] + [absurd] + kept[50:]) + "</photons>"
    bus.write_plan(redis_client, 1, _plan(1, TEXTS, [{"id": 1, "keywords": [], "predicates": [
        {"relation": "Photon", "attribute": "en", "op": ">=", "value": 0.0}]}]))
    evaluator = GroupEvaluator(redis_client, 1)
    evaluator.start()
    _feed(redis_client, evaluator, _lines(hostile))
    expected = _reference("<photons>" + "".join(etree.tostring(e, encoding="unicode") for e in kept) + "</photons>")
    for sid in TEXTS:
        assert [r.item for r in _published(redis_client, sid)] == expected[sid]
    dead = [e for _, e in bus.read_stream_events(redis_client, 4, count=1000) if isinstance(e, DeadLetter)]
    clock_at_late = float(kept[29].findtext("det_time"))
    assert [(d.seq, d.reason) for d in dead] == [
        (60, f"item: late time: 0.001 is before the stream clock {clock_at_late:g}"),
        (61, f"late op: ts 0.001 is before the stream clock {clock_at_late:g}"),
        (102, "item: ts 1e+15 is outside the stream's range [-62135596800, 253402300799] (its ts_min and ts_max "
              "settings)"),
        (103, "ts 1e+15 is outside the stream's range [-62135596800, 253402300799] (its ts_min and ts_max settings)"),
    ]
    assert len(bus.read_snapshot(redis_client, 1)[1]) == len(kept)  # every other item's Photon is stored
