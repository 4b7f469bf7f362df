"""The rearrangement rule of Eq. 5 over periods of λ tuples."""

from __future__ import annotations

import json
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.asc import AscIndex, DroppingMonitor, rearrangement_delta

INDEX = AscIndex.build({"q0": [{"attribute": "a", "op": "<", "value": 5}],
                        "q1": [{"attribute": "b", "op": ">", "value": 7}]})


def test_delta_edge_cases():
    assert rearrangement_delta(None, Fraction(1, 2)) == float("inf")
    assert rearrangement_delta(Fraction(0), Fraction(0)) == 0
    assert rearrangement_delta(Fraction(0), Fraction(1, 9)) == float("inf")
    assert rearrangement_delta(Fraction(1, 2), Fraction(3, 5)) == Fraction(1, 5)


@settings(max_examples=150, deadline=None)
@given(batches=st.lists(st.integers(1, 12).flatmap(lambda t: st.tuples(st.just(t), st.integers(0, t))),
                        min_size=1, max_size=40),
       period=st.integers(1, 25), mu=st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.5, 1.0, 3.0]),
       kind=st.sampled_from(["macro", "hybrid"]))
def test_rearrangement_fires_exactly_by_the_threshold_rule(batches, period, mu, kind):
    monitor = DroppingMonitor(INDEX, kind, period=period, mu=mu, sample_size=5)
    d_init, acc_t, acc_d, seen, expected = None, 0, 0, 0, []
    for t, d in batches:
        acc_t, acc_d, seen = acc_t + t, acc_d + d, seen + t
        stats = {"tuples": t, "dropped": d, "evaluated": t, "sample": [[0, 0]] * min(t, 2),
                 "monitor_evaluated": 2 * min(t, 2)}
        new = monitor.observe(stats)
        fire = False
        if acc_t >= period:
            d_cur = Fraction(acc_d, acc_t)
            if d_init is None or (d_init == 0 and (d_cur != 0 or mu == 0)) or (
                    d_init != 0 and abs(d_cur - d_init) >= Fraction(mu) * d_init):
                fire, d_init = True, d_cur
                expected.append(seen)
            acc_t = acc_d = 0
        assert (new is not None) == fire
        if fire:
            assert monitor.sequence is new
    events = [e for e in monitor.events if e["type"] == "rearrangement"]
    assert [e["tuple"] for e in events] == expected
    assert monitor.rearrangements == len(expected)
    for e in events:
        assert e["mu"] == mu and sorted(e["new"]) == ["a", "b"]
    json.dumps(monitor.events, allow_nan=False)


def test_period_events_report_the_dropping_ratio():
    monitor = DroppingMonitor(INDEX, "macro", period=10, mu=0.5)
    assert monitor.observe({"tuples": 6, "dropped": 3, "evaluated": 9}) is None
    assert monitor.observe({"tuples": 4, "dropped": 1, "evaluated": 5}) is not None
    assert monitor.observe({"tuples": 10, "dropped": 5, "evaluated": 12}) is None  # Δd = 0.25 < 0.5
    assert monitor.observe({"tuples": 10, "dropped": 9, "evaluated": 12}) is not None  # Δd = 1.25
    periods = [e for e in monitor.events if e["type"] == "period"]
    assert [p["d"] for p in periods] == [0.4, 0.5, 0.9]
    last = monitor.events[-1]
    assert (last["d_init"], last["d_cur"], last["delta"]) == (0.4, 0.9, 1.25)



def test_drain_events_hands_each_event_out_once():
    monitor = DroppingMonitor(INDEX, "hybrid", period=2, mu=0.0)
    monitor.observe({"tuples": 2, "dropped": 1, "evaluated": 3})
    first = monitor.drain_events()
    assert [e["type"] for e in first] == ["period", "rearrangement"]
    assert monitor.drain_events() == []
    monitor.observe({"tuples": 2, "dropped": 2, "evaluated": 3})
    assert [e["period"] for e in monitor.drain_events()] == [1, 1]
