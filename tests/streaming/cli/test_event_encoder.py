"""run-plan's event lines (each result's part encoded once) are byte for byte ``run``'s."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streaming.cli.run import EventEncoder, event_line
from streaming.evaluate.results import Result

names = st.sampled_from(["Order", "Customer", "Prod\u00fcct", 'we"ird, name'])
keys = st.one_of(st.integers(-10**12, 10**12), st.text(max_size=6), st.floats(allow_nan=False))
refs = st.tuples(names, keys)


@st.composite
def results(draw):
    """A result's tuples (distinct) and edges between them, as the joins make them."""
    tuples = sorted(set(draw(st.lists(refs, min_size=1, max_size=5))), key=repr)
    ends = st.sampled_from(tuples)
    edges = draw(st.lists(st.tuples(ends, ends, st.sampled_from(["cid", "p\u00eed", "a, b"])), max_size=4))
    return Result(tuple(tuples), tuple(edges))


@given(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["add", "remove"]), results()), max_size=12))
def test_every_line_equals_runs(events):
    encoder = EventEncoder()
    for _ in range(2):  # the second time from what the encoder kept
        for seq, kind, result in events:
            assert encoder.line(seq, kind, result) == event_line(seq, kind, result) + "\n"
