"""RelaxWindow (paper 002, Alg. 1) and shared window aggregates against a per-window recomputation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.sharing.windows import (
    Partial,
    SharedWindowAggregator,
    WindowSubscriber,
    having_holds,
    relax_window,
    serves,
)


def test_example_4_1_relaxes_45_30_and_30_20_to_15_5():
    assert relax_window([(45, 30), (30, 20)]) == (15, 5)


def test_the_relaxed_window_divides_every_window_and_its_size_is_a_multiple_of_its_step():
    windows = [(600, 60), (300, 120), (900, 30)]
    size, step = relax_window(windows)
    assert size % step == 0
    assert all(s % size == 0 and m % step == 0 for s, m in windows)
    assert (size, step) == (300, 30)


def test_one_window_whose_size_is_a_multiple_of_its_step_is_its_own_relaxation():
    assert relax_window([(600, 60)]) == (600, 60)
    assert relax_window([(45, 30)]) == (45, 15)


def test_serves_follows_the_three_divisibility_conditions_of_section_4_2():
    assert serves((20, 10), (60, 40))        # q2's window serves q1's
    assert not serves((60, 40), (20, 10))
    assert not serves((45, 30), (30, 20))    # Example 4.1: all three conditions fail


@pytest.mark.parametrize("bad", [(0, 1), (10, 0), (1.5, 1), (True, 1)])
def test_windows_must_be_positive_integers(bad):
    with pytest.raises(ValueError, match="positive integer"):
        relax_window([bad])


@given(st.lists(st.tuples(st.integers(1, 120), st.integers(1, 60)), min_size=1, max_size=5))
def test_relax_window_is_optimal_among_all_candidates(windows):
    size, step = relax_window(windows)
    candidates = [
        (d, m)
        for m in range(1, min(w[1] for w in windows) + 1)
        for d in range(1, min(w[0] for w in windows) + 1)
        if all(w[1] % m == 0 and w[0] % d == 0 for w in windows) and d % m == 0
    ]
    assert (size, step) in candidates
    assert (step, size) == max((m, d) for d, m in candidates)


def _expected(kind, subscribers, items, end_time=None):
    """Every subscriber window recomputed from the items (the reference)."""
    out = []
    if kind == "time":
        # the clock moves to each item's time, then to end_time; of the windows one move closes, a
        # subscriber's empty ones only come as the first and the last
        moves = [t for t, _ in items] + [end_time]
        for s in subscribers:
            for prev, now in zip(moves, moves[1:]):
                closed = []
                for end in range(math.floor(prev / s.step) * s.step + s.step, math.floor(now / s.step) * s.step + 1,
                                 s.step):
                    p = Partial()
                    for t, v in items:
                        if end - s.size <= t < end:
                            p.add(v)
                    closed.append((end, p))
                empty = [i for i, (_, p) in enumerate(closed) if not p.count]
                for i, (end, p) in enumerate(closed):
                    if p.count or i in (empty[0], empty[-1]):
                        value = p.value(s.aggregate)
                        if having_holds(s.having, value):
                            out.append((s.key, end, value))
    else:
        for s in subscribers:
            for end in range(s.step, len(items) + 1, s.step):
                if end < s.size:
                    continue
                p = Partial()
                for _, v in items[end - s.size:end]:
                    p.add(v)
                value = p.value(s.aggregate)
                if having_holds(s.having, value):
                    out.append((s.key, end, value))
    return sorted(out, key=repr)


subscriber_st = st.builds(
    lambda key, size_mult, step, aggregate, having: WindowSubscriber(key, step * size_mult, step, aggregate, having),
    st.integers(0, 1000),
    st.integers(1, 4),
    st.sampled_from([1, 2, 3, 4, 5, 6, 10]),
    st.sampled_from(["count", "sum", "avg", "min", "max"]),
    st.one_of(st.none(), st.tuples(st.sampled_from([">=", "<", "!="]), st.integers(-5, 20))),
)


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["time", "count"]),
    subscribers=st.lists(subscriber_st, min_size=1, max_size=4, unique_by=lambda s: s.key),
    gaps=st.lists(st.sampled_from([0, 0.5, 1, 2, 3.5, 40]), min_size=1, max_size=60),
    values=st.lists(st.one_of(st.integers(-10, 10), st.floats(-10, 10, allow_nan=False)), min_size=60, max_size=60),
    tail=st.sampled_from([0, 7, 100]),
)
def test_shared_windows_equal_each_window_recomputed(kind, subscribers, gaps, values, tail):
    agg = SharedWindowAggregator(kind, subscribers)
    items, t, got = [], 3.0, []
    for gap, value in zip(gaps, values):
        t += gap
        items.append((t, value))
        got += agg.add(t, value)
    got += agg.advance(t + tail)
    expected = _expected(kind, subscribers, items, t + tail)
    assert sorted(((e.key, e.window_end, e.value) for e in got), key=repr) == expected


def test_a_subscriber_alone_and_sharing_a_relaxed_window_give_identical_floats():
    values = [0.1 * i + 1e-9 * (i % 7) for i in range(400)]
    alone = SharedWindowAggregator("count", [WindowSubscriber("q", 45, 30, "sum")])
    shared = SharedWindowAggregator("count", [WindowSubscriber("q", 45, 30, "sum"),
                                              WindowSubscriber("r", 30, 20, "avg")])
    a = [e for v in values for e in alone.add(None, v)]
    b = [e for v in values for e in shared.add(None, v) if e.key == "q"]
    assert shared.relaxed == (15, 5) and alone.relaxed == (45, 15)
    assert a == b and len(a) == 12


def test_a_long_quiet_gap_emits_the_first_and_last_empty_window_without_walking_every_pane():
    agg = SharedWindowAggregator("time", [WindowSubscriber("c", 10, 5, "count"), WindowSubscriber("m", 10, 10, "max")])
    agg.add(1.0, 4)
    out = agg.add(100_001.0, 2)
    assert agg.relaxed_instances < 10
    counts = [(e.window_end, e.value) for e in out if e.key == "c"]
    maxima = [(e.window_end, e.value) for e in out if e.key == "m"]
    assert counts == [(5, 1), (10, 1), (15, 0), (100_000, 0)]
    assert maxima == [(10, 4), (20, None), (100_000, None)]


def test_a_clock_jump_to_the_end_of_time_costs_no_more_than_a_small_one():
    agg = SharedWindowAggregator("time", [WindowSubscriber("c", 60, 1, "count")])
    agg.add(0.0, 1)
    out = agg.add(1.7e308, 1)
    assert [(e.window_end, e.value) for e in out][:2] == [(1, 1), (2, 1)]
    assert out[-1].value == 0 and len(out) == 62 and agg.relaxed_instances <= 62


def test_subscriber_and_relaxed_window_are_checked():
    with pytest.raises(ValueError, match="aggregate"):
        WindowSubscriber("x", 10, 5, "median")
    with pytest.raises(ValueError, match="does not divide"):
        SharedWindowAggregator("time", [WindowSubscriber("x", 10, 5, "count")], relaxed=(4, 2))


def test_sums_never_overflow_and_every_state_goes_through_json():
    """Well-formed values at the ends of their types: a window's partials and values stay exact, its state
    goes through orjson (as the evaluator persists it) and comes back the same."""
    import orjson

    def run(values, functions):
        agg = SharedWindowAggregator("time", [WindowSubscriber(f, 60, 60, f) for f in functions])
        out = [e for t, value in values[:-1] for e in agg.add(t, value)]
        restored = SharedWindowAggregator("time", agg.subscribers)
        restored.restore(orjson.loads(orjson.dumps(agg.state())))
        t, value = values[-1]
        rest = agg.add(t, value) + agg.advance(1e9)
        assert rest == restored.add(t, value) + restored.advance(1e9)
        return {(e.key, e.window_end): e.value for e in out + rest}

    floats = run([(0.0, 1.7e308), (1.0, 1.7e308), (61.0, -1.7e308), (62.0, 5e-324), (121.0, 1.0), (122.0, 2.5)],
                 ("sum", "avg", "min", "max"))
    assert [floats[(f, 60)] for f in ("sum", "avg", "min", "max")] == [None, 1.7e308, 1.7e308, 1.7e308]
    assert [floats[(f, 120)] for f in ("sum", "avg")] == [-1.7e308, -8.5e307]
    assert floats[("sum", 180)] == 3.5
    ints = run([(0.0, 2**63 - 1), (1.0, 2**63 - 1), (61.0, -(2**63)), (121.0, 1), (122.0, 2**63 - 1)], ("sum", "avg"))
    assert ints[("sum", 60)] == float(2**64 - 2) and ints[("avg", 60)] == float(2**63 - 1)
    assert ints[("sum", 120)] == -(2**63) and ints[("sum", 180)] == float(2**63)  # ints while they fit in 64 bits


def test_the_open_window_of_a_clock_at_the_end_of_time_goes_through_json():
    import orjson

    agg = SharedWindowAggregator("time", [WindowSubscriber("c", 60, 60, "count")])
    agg.add(1.7976931348623157e308, 1)
    restored = SharedWindowAggregator("time", agg.subscribers)
    restored.restore(orjson.loads(orjson.dumps(agg.state())))
    assert restored.next_close == agg.next_close > 1.7976931348623157e308


def test_a_partial_saved_with_float_partials_is_taken_back():
    """States persisted before sums were kept in units hold Shewchuk's float partials."""
    assert Partial.from_json([3, 2, [0.1, 1e-17], 0.1, 2]).value("sum") == math.fsum([2, 0.1, 1e-17])
    ints = Partial.from_json([2, 7, [], 3, 4]).value("sum")
    assert ints == 7 and isinstance(ints, int)  # a sum of ints stays an int
