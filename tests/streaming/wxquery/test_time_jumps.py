"""A jump of a time window's reference value costs what the data costs: empty instances are not evaluated
one by one, alone or shared (an item at 1e15 used to loop once per window step and hang the evaluator)."""

from __future__ import annotations

import time

import pytest
from lxml import etree

from streaming.workloads.photons import photon_items
from streaming.wxquery.run import run_subscriptions
from streaming.wxquery.translate import compile_text

from .strategies import dtds

COUNT = '<p>{ for $w in stream("photons")/photons/photon |det_time diff 2 step 1| let $a := count($w) return <n>{ $a }</n> }</p>'
SUBSCRIPTIONS = [
    COUNT,
    '<p>{ for $w in stream("photons")/photons/photon |det_time diff 10 step 5| let $a := avg($w/en[. >= 1.0]) '
    'let $b := max($w/phc) return <a>{ $a }{ $b }</a> }</p>',
    '<p>{ for $w in stream("photons")/photons/photon |det_time diff 20 step 10| let $a := sum($w/en) '
    'where $a >= 0 return <s>{ $a }</s> }</p>',
    '<p>{ for $w in stream("photons")/photons/photon[en >= 0.5] |det_time diff 4 step 2| '
    'return <w>{ $w/det_time }</w> }</p>',
]
JOINS = [
    '<p>{ for $x in stream("photon1")/photons/photon |det_time diff 30 step 15| '
    'for $y in stream("photon2")/photons/photon |det_time diff 30 step 15| where $x/en >= $y/en - 9 '
    'return <j>{ $x/det_time }{ $y/det_time }</j> }</p>',
    '<p>{ for $x in stream("photon1")/photons/photon |det_time diff 10 step 5| '
    'for $y in stream("photon2")/photons/photon |det_time diff 10 step 5| where $x/en >= $y/en - 9 '
    'return <j>{ $x/det_time }{ $y/det_time }</j> }</p>',
]


def photons(stream: str, times: list[float], seed: int = 1) -> list[tuple[str, etree._Element]]:
    items = [etree.fromstring(text) for text in photon_items(len(times), seed=seed)]
    for item, t in zip(items, times):
        item.find("det_time").text = repr(t)
    return [(stream, item) for item in items]


def run_all_modes(texts: list[str], items) -> dict[str, dict[str, list[str]]]:
    subs = [(f"s{i}", compile_text(text, dtds)) for i, text in enumerate(texts)]
    out = {}
    for mode in ("none", "match", "widen"):
        started = time.perf_counter()
        run = run_subscriptions(subs, items, mode, dtds)
        assert time.perf_counter() - started < 2.0, f"{mode}: a jump of time took its length in work"
        assert not run.dead_letters, run.dead_letters
        out[mode] = run.results
    return out


@pytest.mark.parametrize("far", [1e9, 1e15, 1.7e308])
def test_a_jump_of_the_reference_value_returns_promptly_with_the_first_and_last_empty_instances(far):
    items = photons("photons", [0.5, 1.2, 3.4, far, far + 7, far + 7])  # (1.7e308 + 7 is 1.7e308)
    results = run_all_modes(SUBSCRIPTIONS, items)
    assert results["none"] == results["match"] == results["widen"]
    # count over [E-2, E): ends 1..5 hold items, 6 is the first empty one, the last one ends at the jump
    counts = results["none"]["s0"]
    assert counts[:7] == ["<n>1</n>", "<n>2</n>", "<n>1</n>", "<n>1</n>", "<n>1</n>", "<n>0</n>", "<n>0</n>"]
    assert all(results["none"][name] for name in ("s1", "s2", "s3"))


@pytest.mark.parametrize("far", [1e9, 1e15])
def test_joins_jump_over_instances_with_no_new_item(far):
    times_x, times_y = [0.5, 4.0, 12.0, far, far + 3, far + 40], [1.0, 6.5, 13.0, far + 1, far + 20, far + 41]
    items = sorted(photons("photon1", times_x) + photons("photon2", times_y, seed=2),
                   key=lambda pair: float(pair[1].findtext("det_time")))
    results = run_all_modes(JOINS, items)
    assert results["none"] == results["match"] == results["widen"]
    late_pairs = [r for r in results["none"]["s0"] if f"<det_time>{far!r}" in r]
    assert late_pairs, "items after the jump still join"


@pytest.mark.parametrize("value", ["INF", "NaN", "1e999", "-inf"])
def test_a_reference_value_that_is_no_finite_number_is_a_dead_letter(value):
    items = photons("photons", [0.5, 1.5, 2.5])
    items[1][1].find("det_time").text = value
    subs = [("s0", compile_text(COUNT, dtds))]
    for mode in ("none", "widen"):
        run = run_subscriptions(subs, items, mode, dtds)
        assert [(d.index, d.reason) for d in run.dead_letters] == [
            (1, "/photons/photon/det_time is not a finite number and subscriptions read it as one")]
        assert run.results["s0"] == ["<n>1</n>", "<n>1</n>"]
