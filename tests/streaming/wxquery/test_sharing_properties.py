"""Every subscription's results under sharing (match) and widening equal its results evaluated alone."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from streaming.wxquery.apt import APF
from streaming.wxquery.backtranslate import to_wxquery
from streaming.wxquery.matching import same_abstraction
from streaming.wxquery.run import run_subscriptions
from streaming.wxquery.translate import compile_text

from .strategies import (dtds, join_subscriptions, photon_streams, subscriptions, two_streams, window_subscriptions,
                         with_jumps)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _compile(texts: list[str]):
    return [(f"s{i}", compile_text(t, dtds)) for i, t in enumerate(texts)]


def _assert_sharing_equals_alone(texts: list[str], items) -> None:
    subs = _compile(texts)
    alone = run_subscriptions(subs, items, "none", dtds).results
    for mode in ("match", "widen"):
        shared = run_subscriptions(subs, items, mode, dtds)
        assert shared.results == alone, (mode, shared.stats["groups"])


@SETTINGS
@given(st.lists(subscriptions, min_size=1, max_size=6), photon_streams())
def test_single_stream_sharing_equals_alone(texts, items):
    _assert_sharing_equals_alone(texts, items)


@SETTINGS
@given(st.sampled_from(["time", "count"]).flatmap(lambda k: st.lists(join_subscriptions(k), min_size=1, max_size=4)),
       two_streams())
def test_join_sharing_equals_alone(texts, items):
    _assert_sharing_equals_alone(texts, items)


@SETTINGS
@given(st.lists(window_subscriptions(), min_size=1, max_size=6), photon_streams().flatmap(with_jumps))
def test_single_stream_sharing_equals_alone_across_jumps_of_time(texts, items):
    """Of the instances one item completes, empty ones come as the first and the last, alone and shared."""
    _assert_sharing_equals_alone(texts, items)


@SETTINGS
@given(st.lists(join_subscriptions("time"), min_size=1, max_size=4), two_streams().flatmap(with_jumps))
def test_join_sharing_equals_alone_across_jumps_of_time(texts, items):
    """Instances with no new item join nothing: jumped over, with the current instance kept right."""
    _assert_sharing_equals_alone(texts, items)


@settings(max_examples=80, deadline=None)
@given(st.one_of(subscriptions, join_subscriptions("time")))
@example(text='<photons>{ for $p in stream("photons")/photons/photon return if (($p/coord/det/dx < 0 or '
              '$p/coord/det/dx >= 0) or $p/en < 1.0) then <a>{ $p/coord }</a> else <b>{ $p/coord/cel/ra }</b> }'
              '</photons>')  # a condition that reads dx but cannot depend on it
def test_back_translation_round_trips(text):
    abstraction = compile_text(text, dtds).abstraction
    trees = abstraction.trees if isinstance(abstraction, APF) else (abstraction,)
    assume(all(t.outputs() or t.aggregates for t in trees))  # an unsatisfiable query describes no stream
    text = to_wxquery(abstraction)
    assume("false()" not in text)  # nor does one whose window admits no item
    assert same_abstraction(compile_text(text, dtds).abstraction, abstraction)


def test_a_subscription_alone_is_the_same_in_any_company():
    """Evaluating alone does not depend on the other subscriptions of the run."""
    texts = [
        '<p>{ for $p in stream("photons")/photons/photon where $p/en > 1 return <r>{ $p/en }</r> }</p>',
        '<p>{ for $w in stream("photons")/photons/photon |count 3 step 2| let $a := max($w/phc) return <m>{ $a }</m> }</p>',
    ]
    from lxml import etree
    from streaming.workloads.photons import photon_items
    items = [("photons", etree.fromstring(x)) for x in photon_items(50, seed=4)]
    together = run_subscriptions(_compile(texts), items, "none", dtds).results
    for i, text in enumerate(texts):
        assert run_subscriptions([(f"s{i}", compile_text(text, dtds))], items, "none", dtds).results[f"s{i}"] == together[f"s{i}"]
    assert together["s0"] and together["s1"]


@pytest.mark.parametrize("mode", ["match", "widen"])
def test_sharing_actually_groups(mode):
    from lxml import etree
    from streaming.workloads.photons import PAPER_QUERIES, photon_items
    subs = [(n, compile_text(q, dtds)) for n, q in PAPER_QUERIES.items()]
    items = [("photons", etree.fromstring(x)) for x in photon_items(400, seed=2)]
    result = run_subscriptions(subs, items, mode, dtds)
    assert result.stats["subscriptions_sharing"] == (0 if mode == "match" else 3)
