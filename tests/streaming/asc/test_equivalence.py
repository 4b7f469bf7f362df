"""Every strategy, scalar and vectorised, finds exactly the naively satisfied queries,
and reports exactly the ASC evaluations it performed (counted by a spy on region lookups)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.asc import AscIndex, AscStream, BatchEvaluator, ScalarEvaluator, Sequence, TicketRouter
from streaming.asc.construct import Asc
from streaming.asc.predicates import query_holds
from streaming.asc.sequence_search import hybrid_sequence, macro_sequence
from streaming.asc.vectorised import words_to_int

from .strategies import ATTRS, query_sets, tuples

SETTINGS = settings(max_examples=60, deadline=None)


def naive(index: AscIndex, values: dict) -> int:
    canon = dict(zip((a.attribute for a in index.ascs), index.canonical(values)))
    return sum(1 << j for j, q in enumerate(index.query_ids) if query_holds(index.predicates[q], canon))


@st.composite
def sequences(draw, index: AscIndex):
    """A random order plus random micro-arrows (any arrow must keep results exact)."""
    order = tuple(draw(st.permutations(range(len(index.ascs)))))
    micro = {}
    if len(index.ascs) > 1:
        for a in index.ascs:
            for r in range(a.regions):
                j = draw(st.integers(-1, len(index.ascs) - 1))
                if j >= 0 and j != a.position:
                    micro[(a.position, r)] = j
    return Sequence(draw(st.sampled_from(["fixed", "hybrid"])), order, micro)


class RegionSpy:
    """Counts region lookups, one per evaluated ASC, by wrapping the real methods."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.count = 0
        real_scalar, real_batch = Asc.region, BatchEvaluator.regions

        def scalar(asc, value):
            self.count += 1
            return real_scalar(asc, value)

        def batch(ev, i, values, null):
            self.count += len(values)
            return real_batch(ev, i, values, null)

        monkeypatch.setattr(Asc, "region", scalar)
        monkeypatch.setattr(BatchEvaluator, "regions", batch)


def columns(index: AscIndex, rows: list[dict]) -> dict[str, np.ndarray]:
    return {a: np.array([r.get(a) for r in rows], dtype=object) for a in ATTRS}


@SETTINGS
@given(data=st.data(), queries=query_sets(), rows=st.lists(tuples(), min_size=1, max_size=30))
def test_scalar_and_vectorised_sequences_match_naive(data, queries, rows):
    index = AscIndex.build(queries)
    expected = [naive(index, r) for r in rows]
    seq = data.draw(sequences(index))
    with pytest.MonkeyPatch.context() as mp:
        spy = RegionSpy(mp)
        scalar = ScalarEvaluator(index)
        got = [scalar.evaluate(seq, index.canonical(r)) for r in rows]
        assert [g for g, _ in got] == expected
        assert sum(e for _, e in got) == spy.count
        spy.count = 0
        ev = BatchEvaluator(index)
        bitmaps, evaluated = ev.evaluate_batch(columns(index, rows), seq)
        assert [words_to_int(b) for b in bitmaps] == expected
        assert evaluated.tolist() == [e for _, e in got]
        assert int(evaluated.sum()) == spy.count


@SETTINGS
@given(queries=query_sets(), rows=st.lists(tuples(), min_size=1, max_size=40), seed=st.integers(0, 9))
def test_ticket_routing_matches_naive(queries, rows, seed):
    index = AscIndex.build(queries)
    router = TicketRouter(index, seed)
    with pytest.MonkeyPatch.context() as mp:
        spy = RegionSpy(mp)
        got = [router.evaluate(index.canonical(r)) for r in rows]
    assert [g for g, _ in got] == [naive(index, r) for r in rows]
    assert sum(e for _, e in got) == spy.count


@SETTINGS
@given(queries=query_sets(), rows=st.lists(tuples(), min_size=2, max_size=60),
       strategy=st.sampled_from(["macro", "hybrid"]), period=st.integers(1, 15))
def test_adaptive_streams_match_naive(queries, rows, strategy, period):
    index = AscIndex.build(queries)
    stream = AscStream(index, strategy, period=period, mu=0.0, sample_size=period)
    with pytest.MonkeyPatch.context() as mp:
        spy = RegionSpy(mp)
        results = [stream.process(r) for r in rows]
        lookups_outside_sampling = spy.count - stream.summary()["monitor_evaluated"]
    assert [g for g, _ in results] == [naive(index, r) for r in rows]
    assert stream.cost == sum(e for _, e in results) == lookups_outside_sampling
    assert stream.dropped == sum(1 for g, _ in results if not g)
    assert stream.summary()["rearrangements"] == len(rows) // period


@SETTINGS
@given(queries=query_sets(), rows=st.lists(tuples(), min_size=5, max_size=40))
def test_sequences_found_from_samples_match_naive(queries, rows):
    index = AscIndex.build(queries)
    ev = BatchEvaluator(index)
    cols = columns(index, rows)
    sample = ev.region_matrix(ev.canonical_columns(cols), np.arange(len(rows)))
    expected = [naive(index, r) for r in rows]
    for seq in (macro_sequence(ev, sample), hybrid_sequence(ev, sample, min_support=1, min_gain=0.0)):
        assert sorted(seq.order) == list(range(len(index.ascs)))
        bitmaps, evaluated = ev.evaluate_batch(cols, seq)
        assert [words_to_int(b) for b in bitmaps] == expected
        again = Sequence.from_json(seq.to_json(index), index)
        assert again == seq


def test_text_and_timestamp_columns_with_nulls():
    types = {"name": "text", "at": "timestamp", "price": "float"}
    index = AscIndex.build({
        "q1": [{"attribute": "name", "op": ">=", "value": "m"}, {"attribute": "at", "op": "<", "value": "2024-01-01T00:00:00"}],
        "q2": [{"attribute": "name", "op": "=", "value": "dress"}],
        "q3": [{"attribute": "price", "op": "between", "value": [1, 2]}],
        "q4": []}, types=types, relation="Product")
    rows = [{"name": "texas", "at": "2023-05-01T00:00:00+00:00", "price": 1.5},
            {"name": "dress", "at": None, "price": 3.0},
            {"name": None, "at": 1.0, "price": None},
            {"name": "zebra", "at": 2e9, "price": 2.0}]
    expected = [naive(index, r) for r in rows]
    assert [index.query_names(b) for b in expected] == [["q1", "q3", "q4"], ["q2", "q4"], ["q4"], ["q3", "q4"]]
    cols = {"name": np.array([r["name"] for r in rows], dtype=object),
            "at": np.array([None if r["at"] is None else index.canonical(r)[index.position["at"]] for r in rows],
                           dtype=object),
            "price": np.array([np.nan if r["price"] is None else r["price"] for r in rows])}
    ev = BatchEvaluator(index)
    scalar = ScalarEvaluator(index)
    for seq in (Sequence.fixed(index, ["price", "at", "name"]), Sequence.fixed(index, ["name", "at", "price"])):
        bitmaps, evaluated = ev.evaluate_batch(cols, seq)
        assert [words_to_int(b) for b in bitmaps] == expected
        assert evaluated.tolist() == [scalar.evaluate(seq, index.canonical(r))[1] for r in rows]
