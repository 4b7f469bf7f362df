"""Several evaluators per stream: the placement rule, and a unit moving mid-stream with no change lost or doubled."""

from __future__ import annotations

from collections import defaultdict

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from streaming import bus
from streaming.evaluator import EvaluatorRunner, GroupEvaluator, group_keywords
from streaming.parsed import parse_stored_line
from streaming.ops import op_to_dict
from streaming.placement import (Move, Placement, Unit, evaluator_plans, handoff_complete, place, unit_costs,
                                 units_of)
from streaming.redis_ports import RedisPlanSource, RedisStateStore
from streaming.schema import Schema
from streaming.session import StateWrite
from streaming.sharing.properties import EvaluatorPlan, QueryEntry
from streaming.sources import stamp
from streaming.workloads import ecommerce
from streaming.workloads.queries import StreamProfile, random_queries

WORKLOAD = ecommerce.build(ops=700, seed=3)
SCHEMA = WORKLOAD.schema_doc
OPS = [op_to_dict(op) for op in WORKLOAD.ops()]
LINES = [stamp(i, orjson.dumps(op).decode()) for i, op in enumerate(OPS)]
#: the fixed example's (and test_session's): three changes in all (query 2 at 462, query 10 at 142 and 169)
QUERIES = random_queries(StreamProfile(SCHEMA, OPS), 10, seed=5, windows=(120.0, 300.0, None))
#: the hypothesis test's: words the stream holds often (order notes, product titles), in eight units of tens of
#: changes each (a hundred or more for ``gift``), so a unit moved anywhere has changes on both sides of the seq
#: its target joins at
DENSE_QUERIES = [
    {"id": 1, "keywords": ["gift"], "tmax": 1, "window_seconds": 120.0},
    {"id": 2, "keywords": ["gift"], "tmax": 2, "window_seconds": 300.0},
    {"id": 3, "keywords": ["wedding"], "tmax": 1, "window_seconds": 200.0},
    {"id": 4, "keywords": ["deliver"], "tmax": 2, "window_seconds": 150.0},
    {"id": 5, "keywords": ["birthday"], "tmax": 1, "window_seconds": None},
    {"id": 6, "keywords": ["return"], "tmax": 2, "window_seconds": 240.0},
    {"id": 7, "keywords": ["rush"], "tmax": 1, "window_seconds": 300.0},
    {"id": 8, "keywords": ["cousin"], "tmax": 1, "window_seconds": 100.0},
    {"id": 9, "keywords": ["gift", "scarf"], "tmax": 3, "window_seconds": 600.0},
]


def unit(words: str, *queries: int) -> Unit:
    return Unit((tuple(words.split()), "results"), queries)


# ------------------------------------------------------------------------------------------- the rule


def test_new_units_go_largest_first_to_the_least_loaded_evaluator():
    units = [unit("a", 1), unit("b", 2, 3), unit("c", 4), unit("d", 5)]
    costs = {units[0].key: 1.0, units[1].key: 5.0, units[2].key: 3.0, units[3].key: 2.0}
    placed = place(units, costs, [10, 20], Placement())
    assert placed.assignment == {2: 10, 3: 10, 4: 20, 5: 20, 1: 10}  # 5 against 5: the lower id
    assert placed.move is None


def test_an_overloaded_evaluator_moves_its_smallest_unit_that_lowers_the_maximum():
    units = [unit("a", 1), unit("b", 2), unit("c", 3)]
    costs = {units[0].key: 4.0, units[1].key: 1.0, units[2].key: 1.0}
    current = Placement({1: 10, 2: 10, 3: 10})
    placed = place(units, costs, [10, 20], current)
    assert placed.move == Move((2,), 10, 20)
    assert placed.assignment == {1: 10, 2: 10, 3: 10}  # the move has not happened yet
    # while it runs, nothing else moves
    assert place(units, costs, [10, 20], placed).move == Move((2,), 10, 20)


def test_pinned_units_stay_and_balanced_loads_stay():
    units = [unit("a", 1), unit("b", 2)]
    costs = {units[0].key: 1.0, units[1].key: 1.0}
    assert place(units, costs, [10, 20], Placement({1: 10, 2: 10}), pinned=[2]).move == Move((1,), 10, 20)
    assert place(units, costs, [10, 20], Placement({1: 10, 2: 10}), pinned=[1, 2]).move is None
    assert place(units, costs, [10, 20], Placement({1: 10, 2: 20})).move is None


def test_units_of_a_retired_evaluator_are_placed_again_at_once():
    units = [unit("a", 1), unit("b", 2)]
    costs = {u.key: 1.0 for u in units}
    placed = place(units, costs, [10], Placement({1: 10, 2: 20}))
    assert placed.assignment == {1: 10, 2: 10}


def test_a_move_to_or_from_a_retired_evaluator_is_dropped():
    units = [unit("a", 1), unit("b", 2)]
    costs = {u.key: 1.0 for u in units}
    to_retired = Placement({1: 10, 2: 10}, Move((2,), 10, 30))
    # the rule starts again from the assignment: here a move to the live evaluator
    assert place(units, costs, [10, 20], to_retired) == Placement({1: 10, 2: 10}, Move((1,), 10, 20))
    from_retired = Placement({1: 10, 2: 30}, Move((2,), 30, 10))
    assert place(units, costs, [10], from_retired) == Placement({1: 10, 2: 10})


def test_costs_come_from_the_measured_work_per_op():
    units = [unit("a", 1, 2), unit("b", 3), unit("c", 4)]
    reports = [{"totals": {"ops": 100}, "classes": [{"members": [1, 2], "busy_seconds": 0.02},
                                                     {"members": [3], "busy_seconds": 0.04}]}]
    costs = unit_costs(units, reports)
    assert costs[units[0].key] == pytest.approx(0.0002)
    assert costs[units[1].key] == pytest.approx(0.0004)
    assert costs[units[2].key] == pytest.approx(0.0002)  # not measured: the mean per query


def test_units_group_queries_by_keyword_set():
    schema = Schema.from_dict(SCHEMA)
    entries = [QueryEntry.model_validate(q) for q in [
        {"id": 1, "keywords": ["Dress", "texas"]}, {"id": 2, "keywords": ["dress"]},
        {"id": 3, "keywords": ["texas", "dress"], "tmax": 3}, {"id": 4, "keywords": ["nosuchword"]}]]
    assert [(u.label, u.queries) for u in units_of(entries, schema)] == [
        ("dress texas", (1, 3)), ("dress", (2,)), ("nosuchword", (4,))]


# ------------------------------------------------------------------------------ moving a unit mid-stream


def full_plan(evaluator: int = 1, queries: list[dict] = QUERIES) -> EvaluatorPlan:
    return EvaluatorPlan.model_validate({
        "version": 1, "evaluator": evaluator,
        "stream": {"id": 2, "name": "shop", "schema": SCHEMA, "source": {"kind": "redis", "key": "unused"}},
        "queries": queries})


def changes(redis_client, qid: int) -> list[tuple[int, str, str]]:
    """The query's change stream as (seq, type, result key), each seq's changes sorted."""
    by_seq = defaultdict(list)
    for _, change in bus.read_changes(redis_client, qid, "0-0", count=1_000_000):
        by_seq[change.seq].append((change.type, change.result.key))
    return [(seq, *c) for seq in sorted(by_seq) for c in sorted(by_seq[seq])]


def parse(plan: EvaluatorPlan, lines: list[str]):
    schema = Schema.from_dict(SCHEMA)
    keywords = group_keywords(plan)
    return [parse_stored_line(line, schema, keywords) for line in lines]


class Runner:
    """Two evaluators of one stream fed with their own batch boundaries, plans written as the web tier does.

    On Redis; a subclass puts plans, evaluators and their state elsewhere (``test_session``: in memory)."""

    def __init__(self, redis_client=None, queries: list[dict] = QUERIES):
        self.client = redis_client
        self.ids = [1, 2]
        self.versions = {1: 0, 2: 0}
        self.full = full_plan(queries=queries)
        schema = Schema.from_dict(SCHEMA)
        self.units = units_of([QueryEntry.model_validate(q) for q in queries], schema)
        self.placement = place(self.units, {u.key: 1.0 for u in self.units}, self.ids, Placement())
        self.write()
        self.evaluators = {e: self.evaluator(e) for e in self.ids}
        for evaluator in self.evaluators.values():
            evaluator.start()
        self.fed = {e: 0 for e in self.ids}

    def evaluator(self, e: int) -> EvaluatorRunner:
        return GroupEvaluator(self.client, e)

    def write_plan(self, e: int, plan: EvaluatorPlan) -> None:
        bus.write_plan(self.client, e, plan)

    def plan_of(self, e: int) -> EvaluatorPlan | None:
        return bus.read_plan(self.client, e)

    def joined(self, e: int) -> dict[int, int]:
        """The seq each query handed over to evaluator ``e`` joined at, as its state says."""
        state = self.client.hgetall(bus.Keys.evaluator_state(e))
        return {int(q): s for q, s in orjson.loads(state.get("joined", "{}")).items()}

    def write(self) -> None:
        for e in self.ids:
            self.versions[e] += 1
        for e, plan in evaluator_plans(self.full, self.ids, self.placement, self.versions).items():
            self.write_plan(e, plan)

    def feed(self, e: int, upto: int) -> None:
        evaluator = self.evaluators[e]
        if upto > self.fed[e]:
            evaluator.apply_batch(0, parse(self.plan_of(e), LINES[self.fed[e]:upto]))
            self.fed[e] = upto

    def start_move(self, unit_index: int) -> Move:
        moving = self.units[unit_index % len(self.units)]
        source = self.placement.assignment[moving.queries[0]]
        move = Move(moving.queries, source, 3 - source)
        self.target_lead = self.fed[move.target] - self.fed[move.source]
        self.placement = Placement(dict(self.placement.assignment), move)
        self.write()
        return move

    def try_finish(self) -> bool:
        move = self.placement.move
        assert move is not None
        source_published = self.evaluators[move.target].ports.plans.published_seq(move.source)
        if not handoff_complete(move, self.joined(move.target), source_published):
            return False
        assignment = dict(self.placement.assignment) | {q: move.target for q in move.queries}
        self.placement = Placement(assignment, Move(move.queries, move.source, move.target, done=True))
        self.write()
        return True


def move_mid_stream(run: Runner, sizes: dict[int, int], offset: dict[int, int], move_at: int, unit_index: int) -> None:
    """Feed both evaluators the whole stream, each ``sizes[e]`` ops a batch and ``offset[e]`` ops behind;
    move a unit once one of them reached ``move_at`` and finish the move once the hand-off completes."""
    step, moved, finished = 0, False, False
    while min(run.fed.values()) < len(LINES):
        step += 1
        for e in run.ids:
            run.feed(e, min(len(LINES), max(0, step * sizes[e] - offset[e])))
        if not moved and max(run.fed.values()) >= move_at:
            run.start_move(unit_index)
            moved = True
        elif moved and not finished:
            finished = run.try_finish()
    for e in run.ids:  # an idle round: plans apply between batches
        run.evaluators[e].apply_batch(0, [])
    if moved and not finished:
        assert run.try_finish()
    move = run.placement.move
    assert move is not None and move.done
    assert all(q not in run.evaluators[move.source].session.queries for q in move.queries)
    assert all(q in run.evaluators[move.target].session.queries for q in move.queries)


@pytest.mark.redis
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch_a=st.integers(20, 90), batch_b=st.integers(20, 90), move_at=st.integers(50, 400),
       lag=st.integers(-120, 120), unit_index=st.integers(0, 20))
def test_a_unit_moved_mid_stream_publishes_what_one_evaluator_publishes(redis_client, batch_a, batch_b,
                                                                         move_at, lag, unit_index):
    """Both evaluators read the stream with their own batch sizes, one ``lag`` ops behind the other;
    a unit moves at ``move_at``; every query's change stream equals one evaluator's over the whole plan.

    The queries change often (``DENSE_QUERIES``), so a target ahead of its source that published a joining
    query's changes before the source had published through the join seq would lose the source's."""
    redis_client.flushdb()
    bus.write_plan(redis_client, 9, full_plan(evaluator=9, queries=DENSE_QUERIES))
    alone = GroupEvaluator(redis_client, 9)
    alone.start()
    for start in range(0, len(LINES), 50):
        alone.apply_batch(0, parse(bus.read_plan(redis_client, 9), LINES[start:start + 50]))
    expected = {q["id"]: changes(redis_client, q["id"]) for q in DENSE_QUERIES}
    assert min(len(c) for c in expected.values()) >= 15

    redis_client.flushdb()
    run = Runner(redis_client, DENSE_QUERIES)
    move_mid_stream(run, {1: batch_a, 2: batch_b}, {1: max(0, lag), 2: max(0, -lag)}, move_at, unit_index)
    event(f"target ahead: {run.target_lead > 0}")
    assert {q["id"]: changes(redis_client, q["id"]) for q in DENSE_QUERIES} == expected


@pytest.mark.redis
def test_a_unit_moved_to_an_evaluator_ahead_of_its_source_loses_no_change(redis_client):
    bus.write_plan(redis_client, 9, full_plan(evaluator=9))
    alone = GroupEvaluator(redis_client, 9)
    alone.start()
    for start in range(0, len(LINES), 50):
        alone.apply_batch(0, parse(bus.read_plan(redis_client, 9), LINES[start:start + 50]))
    expected = changes(redis_client, 10)
    assert [(seq, kind) for seq, kind, _ in expected] == [(142, "result.add"), (169, "result.remove")]
    redis_client.flushdb()
    run = Runner(redis_client)
    move_mid_stream(run, {1: 20, 2: 72}, {1: 0, 2: 1}, 72, 4)  # moves query 10 to evaluator 2, 103 ops ahead
    assert run.target_lead == 103
    assert changes(redis_client, 10) == expected


@pytest.mark.redis
def test_the_redis_state_keeps_the_held_changes_and_the_other_evaluators_read_the_published_seq(redis_client):
    store = RedisStateStore(redis_client, 2)
    store.load()
    held = {10: [("add", "k", '{"seq":142}', 142), ("remove", "k", '{"seq":169}', 169)]}
    store.save(StateWrite(tuples={}, seq=169, outbox=[], aggregates=None, clock=None, held=held))
    store.save(StateWrite(tuples={}, seq=170, outbox=[], aggregates=None, clock=None, held=None))  # unchanged
    store.save_published(170)
    assert store.load().held == held
    assert RedisPlanSource(redis_client, 1).published_seq(2) == 170
    assert RedisPlanSource(redis_client, 1).published_seq(3) == -1
