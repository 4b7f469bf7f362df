"""Macro order (minimal-cover phase, then dropping ratio) and micro-arrows, on designed samples."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.asc import AscIndex, BatchEvaluator, PredicateError, Sequence
from streaming.asc.sequence_search import hybrid_sequence, macro_order, sequence_cost


def sample_of(ev: BatchEvaluator, rows: list[dict]) -> np.ndarray:
    cols = {a.attribute: np.array([r[a.attribute] for r in rows], dtype=float) for a in ev.index.ascs}
    return ev.region_matrix(ev.canonical_columns(cols), np.arange(len(rows)))


def names(ev: BatchEvaluator, order) -> list[str]:
    return [ev.index.ascs[i].attribute for i in order]


def test_cover_phase_takes_lowest_conditional_selectivity_then_dropping_ratio():
    index = AscIndex.build({"q0": [{"attribute": "a", "op": "<", "value": 5}, {"attribute": "c", "op": "<", "value": 5}],
                            "q1": [{"attribute": "b", "op": "<", "value": 5}, {"attribute": "c", "op": "<", "value": 5}]})
    ev = BatchEvaluator(index)
    # c covers both queries but passes every tuple (s = 1); a fails q0 always (s = 1/2).
    rows = [{"a": 9, "b": 1, "c": 1}] * 6 + [{"a": 9, "b": 9, "c": 1}] * 4
    order = macro_order(ev, sample_of(ev, rows))
    # then q1 is uncovered: b keeps it in 6 of 10 tuples, c in all 10 -> b; c last.
    assert names(ev, order) == ["a", "b", "c"]


def test_second_phase_prefers_the_highest_dropping_ratio():
    index = AscIndex.build({"q0": [{"attribute": "a", "op": ">", "value": 5}, {"attribute": "b", "op": ">", "value": 5},
                                   {"attribute": "c", "op": ">", "value": 5}]})
    ev = BatchEvaluator(index)
    rows = [{"a": 9, "b": 1, "c": 9}] * 3 + [{"a": 1, "b": 1, "c": 9}] * 2 + [{"a": 9, "b": 9, "c": 1}]
    # cover phase: every ASC covers q0 alone; b fails 5/6, a fails 2/6, c fails 1/6
    assert names(ev, macro_order(ev, sample_of(ev, rows))) == ["b", "c", "a"]


def test_empty_sample_orders_by_coverage():
    index = AscIndex.build({"q0": [{"attribute": "a", "op": "=", "value": 1}],
                            "q1": [{"attribute": "b", "op": "=", "value": 1}],
                            "q2": [{"attribute": "b", "op": "=", "value": 2}]})
    ev = BatchEvaluator(index)
    assert names(ev, macro_order(ev, np.zeros((0, 2), dtype=np.int64))) == ["b", "a"]


def test_micro_arrow_goes_where_the_region_is_failed():
    index = AscIndex.build({
        "q0": [{"attribute": "a", "op": "=", "value": 1}, {"attribute": "b", "op": "<", "value": 5},
               {"attribute": "c", "op": "<", "value": 5}],
        "q1": [{"attribute": "a", "op": "=", "value": 2}, {"attribute": "b", "op": "<", "value": 5},
               {"attribute": "c", "op": "<", "value": 5}]})
    ev = BatchEvaluator(index)
    # a = 1: b fails; a = 2: c fails. With macro a -> b -> c, the a = 2 tuples pay for b.
    rows = [{"a": 1, "b": 9, "c": 1}] * 20 + [{"a": 2, "b": 1, "c": 9}] * 20
    sample = sample_of(ev, rows)
    a, b, c = (index.position[x] for x in "abc")
    macro = Sequence("macro", (a, b, c))
    hybrid = hybrid_sequence(ev, sample, order=macro.order)
    assert hybrid.micro == {(a, index.ascs[a].region(2.0)): c}
    assert sequence_cost(ev, sample, hybrid) == 80 < sequence_cost(ev, sample, macro) == 100
    assert Sequence.from_json(hybrid.to_json(index), index) == hybrid


def test_fixed_sequences_must_name_every_p_attribute():
    index = AscIndex.build({"q": [{"attribute": "A1", "op": "=", "value": 1}, {"attribute": "A2", "op": "=", "value": 1}]})
    assert Sequence.fixed(index, ["a2", "A1"]).order == (1, 0)
    with pytest.raises(PredicateError, match="missing"):
        Sequence.fixed(index, ["A1"])
    with pytest.raises(PredicateError, match="twice"):
        Sequence.fixed(index, ["A1", "A1", "A2"])
    with pytest.raises(PredicateError, match="not a p-attribute"):
        Sequence.fixed(index, ["A1", "A9"])
