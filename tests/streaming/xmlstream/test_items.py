"""Safe parsing of item requests: attacks and bad items are refused one by one, the other items kept."""

from __future__ import annotations

import pytest

from streaming.workloads.photons import PHOTONS_DTD, photon_items
from streaming.xmlstream.dtd import DTDError, StreamDTD
from streaming.xmlstream.items import BodyRejected, XmlLimits, parse_items

DTD = StreamDTD.from_text(PHOTONS_DTD)
GOOD = list(photon_items(4, seed=1))
LOL = ('<!DOCTYPE photons [<!ENTITY lol "lol">'
       + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
       + '<!ENTITY xxe SYSTEM "file:///etc/passwd"><!ENTITY web SYSTEM "http://127.0.0.1:9/x">]>')


def body(*items: str, prolog: str = "") -> str:
    return prolog + "<photons>" + "".join(items) + "</photons>"


def test_good_items_are_accepted_in_order():
    parsed = parse_items(body(*GOOD), DTD)
    assert [i.index for i in parsed.items] == [0, 1, 2, 3] and not parsed.dead_letters
    assert parsed.items[0].element.findtext("en") == GOOD[0].split("<en>")[1].split("</en>")[0]


@pytest.mark.parametrize("bad,reason", [
    (GOOD[1].replace("<en>", "<en>&lol9;"), "entity reference &lol9;"),
    (GOOD[1].replace("<photon>", '<photon x="&lol9;">'), "entity reference in attribute 'x'"),
    (GOOD[1].replace("<en>", "<en>&xxe;"), "entity reference &xxe;"),
    (GOOD[1].replace("<en>", "<en>&web;"), "entity reference &web;"),
    (GOOD[1].replace("<phc>", "<phc>" + "<a>" * 40 + "</a>" * 40), "nested deeper than 32 levels"),
    (GOOD[1].replace("<photon>", '<photon big="' + "x" * 70_000 + '">'), "attribute 'big' is longer"),
    (GOOD[1].replace("<dx>", "<dz>").replace("</dx>", "</dz>"), "does not follow the DTD"),
    ("<proton/>", "expected an item element <photon>"),
])
def test_a_bad_item_is_a_dead_letter_and_the_others_are_kept(bad, reason):
    parsed = parse_items(body(GOOD[0], bad, GOOD[2], prolog=LOL), DTD)
    assert [i.index for i in parsed.items] == [0, 2]
    (dead,) = parsed.dead_letters
    assert dead.index == 1 and reason in dead.reason, dead


def test_nothing_is_expanded_or_fetched():
    parsed = parse_items(body(GOOD[0].replace("<en>", "<en>&lol9;&xxe;"), prolog=LOL), DTD)
    assert not parsed.items and len(parsed.dead_letters) == 1


def test_excessive_nesting_stops_reading_but_keeps_what_came_before():
    parsed = parse_items(body(GOOD[0], "<photon>" + "<a>" * 300 + "</a>" * 300 + "</photon>", GOOD[1]), DTD)
    assert [i.index for i in parsed.items] == [0]
    (dead,) = parsed.dead_letters
    assert dead.index is None and "the items from there on were not read" in dead.reason


def test_malformed_xml_keeps_the_items_before():
    parsed = parse_items(body(GOOD[0], GOOD[1]).replace("</photons>", "<photon>"), DTD)
    assert [i.index for i in parsed.items] == [0, 1]
    assert "not well-formed XML at line" in parsed.dead_letters[0].reason


def test_limits():
    with pytest.raises(BodyRejected):
        parse_items(body(*GOOD), DTD, XmlLimits(max_bytes=100))
    parsed = parse_items(body(*GOOD), DTD, XmlLimits(max_items=2))
    assert len(parsed.items) == 2 and "more than 2 items" in parsed.dead_letters[0].reason
    parsed = parse_items(body(GOOD[0].replace("<en>", "<en>" + "1" * 200)), DTD, XmlLimits(max_text=100))
    assert "longer than 100 characters" in parsed.dead_letters[0].reason


def test_wrong_root_and_interleaved_streams():
    assert "root element is <other>" in parse_items("<other/>", DTD).dead_letters[0].reason
    text = ('<interleaved><item stream="a">' + GOOD[0] + '</item><item stream="b">' + GOOD[1]
            + '</item><item stream="zzz">' + GOOD[2] + "</item></interleaved>")
    parsed = parse_items(text, {"a": DTD, "b": DTD})
    assert [(i.index, i.stream) for i in parsed.items] == [(0, "a"), (1, "b")]
    assert "unknown stream 'zzz'" in parsed.dead_letters[0].reason


@pytest.mark.parametrize("dtd,words", [
    ('<!ENTITY a "b"><!ELEMENT r (i*)><!ELEMENT i (#PCDATA)>', "entity, notation"),
    ('<!ELEMENT r (i*)><!ELEMENT i (#PCDATA>', "not a DTD"),
    ("<!ELEMENT r (i)><!ELEMENT i (#PCDATA)>", "repetition of one item element"),
    ("<!ELEMENT r (i*)><!ELEMENT i (a)>", "never declared"),
    ("<!ELEMENT r (i*)><!ELEMENT i (i2)><!ELEMENT i2 (i)>", "contains itself"),
])
def test_bad_dtds(dtd, words):
    with pytest.raises(DTDError) as info:
        StreamDTD.from_text(dtd)
    assert words in str(info.value)
