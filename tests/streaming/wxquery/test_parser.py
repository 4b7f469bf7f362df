"""WXQuery parsing and the subset's checks: clear errors with positions."""

from __future__ import annotations

import pytest

from streaming.wxquery.parser import WXQueryError, WXQuerySyntaxError, parse_wxquery
from streaming.wxquery.syntax import FLWR, CountWindow, Element, TimeWindow
from streaming.wxquery.translate import compile_text
from streaming.workloads.photons import JOIN_QUERIES, PAPER_QUERIES

from .strategies import DTD, dtds

FOR = 'for $p in stream("photons")/photons/photon'


@pytest.mark.parametrize("name", sorted({**PAPER_QUERIES, **JOIN_QUERIES}))
def test_paper_queries_parse(name):
    tree = parse_wxquery({**PAPER_QUERIES, **JOIN_QUERIES}[name])
    assert isinstance(tree, Element) and isinstance(tree.content[0], FLWR)


def test_windows():
    q1 = parse_wxquery(PAPER_QUERIES["q1"]).content[0]
    w = q1.clauses[0].window
    assert isinstance(w, TimeWindow) and (w.size, w.step) == (60, 40)
    count = parse_wxquery(f"{FOR} |count 20| return $p").clauses[0].window
    assert isinstance(count, CountWindow) and (count.size, count.step) == (20, 20)


@pytest.mark.parametrize("text,line,column,words", [
    ("<a>{ for $p in stream(\"s\")/r/i return $p }</b>", 1, 45, "does not match"),
    (f"{FOR} return", 1, 50, "ends too early"),
    (f"{FOR} |count x| return $p", 1, 51, "expected an integer"),
    (f"{FOR}\n  where $p/en >> 3 return $p", 2, 16, "unexpected >"),
    (f"{FOR} return $p ;", 1, 54, "unexpected character"),
])
def test_syntax_errors_have_positions(text, line, column, words):
    with pytest.raises(WXQuerySyntaxError) as info:
        parse_wxquery(text)
    assert (info.value.pos.line, info.value.pos.column) == (line, column)
    assert words in str(info.value) and str(info.value).startswith(f"line {line}, column {column}")


@pytest.mark.parametrize("text,words", [
    ('for $p in stream("nope")/photons/photon return $p', "unknown stream 'nope'"),
    ('for $p in stream("photons")/photons return $p', "must iterate over them"),
    (f"{FOR} where $p/coord > 3 return $p", "must hold text and occur exactly once"),
    (f"{FOR} where $p/en > 3 and $p/en = \"x\" return $p", "compared as a string here and as a number"),
    (f"{FOR} let $a := avg($p/en) return $a", "aggregates need a windowed for"),
    (f"{FOR} |count 3| let $a := avg($p/coord) return <a>{{ $a }}</a>", "needs an element holding text"),
    (f"{FOR} |count 3| let $a := avg($p/en[. > 1]) return <a>{{ $a }}</a>", "not supported with a count window"),
    (f"{FOR} |count 3| let $a := avg($p/en) where $a > 1 or $p/en > 2 return <a>{{ $a }}</a>", "mixes aggregate"),
    (f"{FOR} return <empty/>", "without any element of the stream"),
    (f"{FOR} return <x>{{ if ($p/en > 1) then $p/en else () }}</x>", "without any element of the stream"),
    (f"{FOR} return $p/coord[cel/ra > 1]", "predicates in returned paths"),
    (f"{FOR} return $q/en", "unknown variable $q"),
    (f"{FOR} where 1 < 2 return $p", "two constants"),
    ('for $x in stream("photon1")/photons/photon for $y in stream("photon2")/photons/photon return $x',
     "a join needs a window"),
    ('<r>{ $x/a }</r>', "a subscription is a FLWR expression"),
    ('<r><a/><b/></r>', "exactly one FLWR"),
])
def test_subset_errors_name_the_place(text, words):
    with pytest.raises(WXQueryError) as info:
        compile_text(text, {"photons": DTD, "photon1": DTD, "photon2": DTD})
    assert words in str(info.value)
    assert info.value.pos is not None and info.value.pos.line >= 1


def test_if_else_builds_complementary_selections():
    sub = compile_text(f"<r>{{ {FOR} return if ($p/en >= 1.3) then <hi>{{ $p/en }}</hi> "
                       "else <lo>{ $p/phc }</lo> }</r>", dtds)
    outputs = {p.rsplit("/", 1)[1]: str(c) for p, c in sub.abstraction.outputs().items()}
    assert outputs == {"phc": "/photons/photon/en < 1.3", "en": "true()"}
