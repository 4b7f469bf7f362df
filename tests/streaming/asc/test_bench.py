"""The benchmark's helpers: exact enumeration of fixed sequences, workloads, the adaptive run."""

from __future__ import annotations

import itertools

import numpy as np

from streaming.asc import AscIndex, BatchEvaluator
from streaming.bench.asc import (all_fixed_costs, fixed_cost, hill_climb, query_set, region_matrix, run_adaptive,
                                 run_ticket, skewed_data, uniform_data)

NAMES = [f"a{i}" for i in range(4)]


def small_case(seed: int = 3):
    rng = np.random.default_rng(seed)
    data = uniform_data(600, 4, rng)
    queries = query_set(data, NAMES, 12, rng, match=0.05)
    ev = BatchEvaluator(AscIndex.build(queries))
    return ev, data


def test_prefix_sharing_enumeration_equals_running_each_sequence():
    ev, data = small_case()
    regions = region_matrix(ev, data, NAMES)
    costs = all_fixed_costs(ev, regions)
    assert sorted(costs) == sorted(itertools.permutations(range(ev.n)))
    for order, cost in costs.items():
        assert cost == fixed_cost(ev, regions, order)


def test_hill_climb_never_worsens():
    ev, data = small_case(5)
    regions = region_matrix(ev, data, NAMES)
    start = tuple(range(ev.n))
    assert fixed_cost(ev, regions, hill_climb(ev, regions, start, 1)) <= fixed_cost(ev, regions, start)
    assert fixed_cost(ev, regions, hill_climb(ev, regions, start, -1)) >= fixed_cost(ev, regions, start)


def test_workloads_have_the_stated_shape():
    rng = np.random.default_rng(1)
    d1, d2 = uniform_data(1000, 20, rng), skewed_data(1000, 20, rng)
    assert d1.shape == d2.shape == (1000, 20)
    assert d1.min() >= 0 and d1.max() <= 99 and d2.min() >= 0 and d2.max() <= 99
    assert np.abs(np.median(d2, axis=0) - 49.5).mean() > np.abs(np.median(d1, axis=0) - 49.5).mean() + 20


def test_adaptive_run_counts_every_tuple_and_agrees_with_ticket_on_drops():
    ev, data = small_case(7)
    run = run_adaptive(ev, data, NAMES, "hybrid", period=100, mu=0.0, sample_size=50, seed=1)
    ticket = run_ticket(ev, data, NAMES, seed=1)
    assert len(run["per_period"]) == 6 and run["rearrangements"] == 6
    assert run["dropped"] == ticket["dropped"]
    assert abs(sum(p * 100 for p in run["per_period"]) - run["cost"]) < 1e-6
