"""A stream's subscriptions fed one item at a time give what ``wxquery run`` gives on the same items."""

from __future__ import annotations

import pytest
from lxml import etree

from streaming.wxquery.live import StreamSubscriptions, compile_for_stream
from streaming.wxquery.parser import WXQueryError
from streaming.wxquery.run import run_subscriptions
from streaming.wxquery.translate import compile_text
from streaming.xmlstream.dtd import StreamDTD
from streaming.xmlstream.items import parse_items
from streaming.workloads.photons import PAPER_QUERIES, PHOTONS_DTD, photons_document

DTD = StreamDTD.from_text(PHOTONS_DTD)


def _reference(texts: dict[int, str], document: str, mode: str) -> dict[int, list[str]]:
    subs = [(str(sid), compile_text(text, lambda _s: DTD)) for sid, text in sorted(texts.items())]
    items = [("photons", item.element) for item in parse_items(document, DTD).items]
    return {int(k): v for k, v in run_subscriptions(subs, items, mode, lambda _s: DTD).results.items()}


@pytest.mark.parametrize("mode", ["none", "widen"])
def test_item_by_item_equals_the_run(mode):
    texts = {i + 1: text for i, text in enumerate(PAPER_QUERIES.values())}
    document = photons_document(600, seed=3)
    live = StreamSubscriptions("photons", PHOTONS_DTD, sorted(texts.items()), mode)
    got: dict[int, list[str]] = {sid: [] for sid in texts}
    for index, item in enumerate(parse_items(document, DTD).items):
        out = live.push(index, etree.tostring(item.element, encoding="unicode", with_tail=False))
        assert out.reason is None
        for sid, rows in out.results.items():
            got[sid] += rows
    assert got == _reference(texts, document, "none")
    assert all(got[sid] for sid in texts)
    if mode == "widen":
        assert live.stats()["subscriptions_sharing"] > 0


def test_a_subscription_of_another_stream_is_refused_and_the_others_run():
    texts = [(1, PAPER_QUERIES["q3"]), (2, PAPER_QUERIES["q4"].replace('stream("photons")', 'stream("other")')),
             (3, "for $p in stream(\"photons\")/photons/photon where $p/en >= x return $p")]
    live = StreamSubscriptions("photons", PHOTONS_DTD, texts)
    assert live.ids == [1]
    assert live.errors[2] == "line 2, column 20: unknown stream 'other'"
    assert live.errors[3].startswith("line 1, column ")
    with pytest.raises(WXQueryError):
        compile_for_stream(texts[1][1], "photons", DTD)


def test_a_number_that_is_not_one_refuses_the_item_only():
    live = StreamSubscriptions("photons", PHOTONS_DTD, [(1, PAPER_QUERIES["q3"])])
    bad = "<photon><coord><cel><ra>1</ra><dec>1</dec></cel><det><dx>1</dx><dy>1</dy></det></coord>" \
          "<phc>1</phc><en>lots</en><det_time>1</det_time></photon>"
    out = live.push(7, bad)
    assert out.results == {} and "en is not a number" in out.reason
    assert live.push(8, "<photon><en>&x;</en></photon>").reason.startswith("the stored item is not well-formed")
