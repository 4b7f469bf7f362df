"""Whole streams with no Redis and no Spark: the stream session alone, and evaluator runners on the in-memory
ports of ``streaming.testing`` (plan changes, a class moving between evaluators, restarts, a lost store),
each against the single-query ``KeywordEngine`` reference."""

from __future__ import annotations

from collections import defaultdict

import pytest

from streaming import evaluator as evaluator_module
from streaming.evaluator import EvaluatorRunner
from streaming.events import BatchMetrics, DeadLetter
from streaming.parsed import parse_stored_line
from streaming.placement import Move, Placement, evaluator_plans, handoff_complete
from streaming.schema import Schema
from streaming.session import StreamSession, group_keywords
from streaming.sharing.properties import EvaluatorPlan
from streaming.testing import MemoryBus, memory_ports
from tests.streaming import test_placement as placement_case
from tests.streaming.test_evaluator import LINES, OPS, SCHEMA, landing_plan, plan, query, reference, write_landing


def rows_of(lines, evaluator_plan):
    schema = Schema.from_dict(SCHEMA)
    keywords = group_keywords(evaluator_plan)
    return [parse_stored_line(line, schema, keywords) for line in lines]


def published(memory: MemoryBus, qid: int):
    """seq -> sorted (type, result key), and the live set, checking each change against the live set."""
    out = defaultdict(list)
    live: set[str] = set()
    for change in memory.change_log(qid):
        kind = "add" if change.type == "result.add" else "remove"
        assert (kind == "add") != (change.result.key in live), f"{kind} of {change.result.key} breaks the live set"
        live.symmetric_difference_update({change.result.key})
        out[change.seq].append((kind, change.result.key))
    assert live == memory.live_keys(qid)
    return {seq: sorted(v) for seq, v in out.items()}, live


def runner(memory: MemoryBus, evaluator_id: int = 1) -> EvaluatorRunner:
    ev = EvaluatorRunner(memory_ports(memory, evaluator_id), evaluator_id)
    ev.start()
    return ev


def test_a_session_alone_gives_the_engine_changes_per_seq():
    doc = plan(1, query(5), query(6, tmax=4, window=30.0))
    session = StreamSession()
    change = session.adopt(doc)
    assert change is not None and change.cleared == () and change.reconciled == {5: [], 6: []}
    assert session.adopt(doc) is None  # the same version again: nothing changes
    got: dict[int, dict[int, list]] = {5: defaultdict(list), 6: defaultdict(list)}
    dead = []
    rows = rows_of(LINES, doc)
    for start in range(0, len(rows), 7):
        out = session.apply(rows[start:start + 7])
        for qid, quads in out.changes.items():
            for kind, key, _payload, seq in quads:
                got[qid][seq].append((kind, key))
        dead += [e.seq for e in out.events if isinstance(e, DeadLetter)]
        assert out.input_rows == len(rows[start:start + 7])
    for qid, kwargs in ((5, {}), (6, {"tmax": 4, "window": 30.0})):
        assert {seq: sorted(v) for seq, v in got[qid].items()} == reference(OPS, **kwargs)[0]
    assert dead == [13, 14, 15]
    write = session.state_write()
    assert write.seq == len(OPS) - 1 and {k for k, v in write.tuples.items() if v is not None} == set(session.stored)


def test_a_stream_in_memory_equals_the_engine_and_reports_its_batches():
    memory = MemoryBus(plans={1: plan(1, query(5))})
    ev = runner(memory)
    for batch_id, start in enumerate(range(0, len(LINES), 7)):
        ev.apply_batch(batch_id, rows_of(LINES[start:start + 7], memory.plans[1]))
    assert published(memory, 5) == reference(OPS)
    dead = memory.stream_events(2, DeadLetter)
    assert [(d.seq, d.reason.split(":")[0]) for d in dead] == [
        (13, "insert of Order 4"), (14, "delete of Order 99"), (15, "unknown relation 'Shipment'")]
    metrics = memory.stream_events(2, BatchMetrics)
    assert [m.input_rows for m in metrics] == [7, 7, 7, 7, 1]
    assert metrics[-1].state["5"]["live_results"] == len(reference(OPS)[1])
    assert memory.state(1).saved.seq == len(OPS) - 1


def test_plan_changes_in_memory():
    memory = MemoryBus(plans={1: plan(1, query(5))})
    ev = runner(memory)
    rows = rows_of(LINES, plan(1, query(5, keywords=("dress", "texas"))))
    ev.apply_batch(0, rows[:20])
    # a query joins with data in the window: static evaluation over the stored tuples
    memory.plans[1] = plan(2, query(5), query(7, keywords=("dress",), tmax=3))
    assert ev.refresh_plan()
    assert published(memory, 7)[1] == reference(OPS[:20], keywords=("dress",), tmax=3)[1]
    # an edited query restarts; its published set follows the new definition
    memory.plans[1] = plan(3, query(5, tmax=3), query(7, keywords=("dress",), tmax=3))
    ev.apply_batch(1, rows[20:25])
    assert published(memory, 5)[1] == reference(OPS[:25], tmax=3)[1]
    # a removed query ends: every live result gets a remove; a disabled one keeps its results
    memory.plans[1] = plan(4, query(7, keywords=("dress",), tmax=3), frozen=[])
    ev.apply_batch(2, rows[25:])
    assert published(memory, 5)[1] == set()
    assert published(memory, 7)[1] == reference(OPS, keywords=("dress",), tmax=3)[1]
    frozen_live = memory.live_keys(7)
    memory.plans[1] = plan(5, frozen=[7])
    assert ev.refresh_plan() and memory.live_keys(7) == frozen_live and ev.session.plan_version == 5


def test_restarts_and_a_crash_between_persist_and_publish_in_memory():
    memory = MemoryBus(plans={1: plan(1, query(5), query(6, tmax=4, window=30.0))})
    rows = rows_of(LINES, memory.plans[1])
    first = runner(memory)
    first.apply_batch(0, rows[:9])
    second = runner(memory)  # the process died; a new one starts from the store
    assert second.session.applied_seq == 8 and second.session.stored == first.session.stored
    second.apply_batch(0, rows[6:16])  # Spark replays an uncommitted batch
    for row in rows[16:22]:  # applied and persisted, but the process dies before publishing
        if row.op is not None:
            second.session.apply_op(row)
        second.session.applied_seq = row.seq
    second._persist()
    third = runner(memory)
    third.apply_batch(1, rows[14:])
    for qid, kwargs in ((5, {}), (6, {"tmax": 4, "window": 30.0})):
        expected, expected_live = reference(OPS, **kwargs)
        got, live = published(memory, qid)
        assert live == expected_live
        assert all(got.get(seq) == changes for seq, changes in expected.items() if seq < 16 or seq >= 22)


def test_a_lost_store_is_rebuilt_from_the_landing_files_in_memory(tmp_path):
    directory = tmp_path / "2"
    write_landing(directory, LINES, archived=2)
    memory = MemoryBus(plans={1: landing_plan(directory, query(5))})
    ev = runner(memory)
    rows = rows_of(LINES, memory.plans[1])
    ev.apply_batch(0, rows[:21])
    memory.lose_state(1)
    memory.live.clear()
    memory.changes.clear()
    memory.published_seq.clear()
    ev.apply_batch(1, rows[19:])  # the next batch finds the store lost and rebuilds from the first op
    assert published(memory, 5) == reference(OPS)
    assert memory.state(1).saved.seq == len(OPS) - 1


def test_a_rebuild_marks_progress_as_it_reads_and_applies_chunks(tmp_path, monkeypatch):
    """A rebuild reads the stored ops a chunk at a time and marks progress at its start and after each chunk:
    a rebuild of millions of ops is not taken for a stalled evaluator (which the supervisor kills, seen in the
    soak with faults) before its first chunk is read and applied."""
    monkeypatch.setattr(evaluator_module, "_REPLAY_CHUNK", 5)
    directory = tmp_path / "2"
    write_landing(directory, LINES)
    memory = MemoryBus(plans={1: landing_plan(directory, query(5))})
    ev = runner(memory)
    ev.apply_batch(0, rows_of(LINES, memory.plans[1])[:21])
    marked = []

    def stored():
        for line in LINES[:21]:
            marked.append(ev.progress_at is not None)
            ev.progress_at = None
            yield line

    assert ev.rebuild(stored()) == 21
    assert [i for i, m in enumerate(marked) if m] == [0, 5, 10, 15, 20]
    assert published(memory, 5) == reference(OPS[:21])


class MemoryPlacement(placement_case.Runner):
    """``test_placement.Runner`` on a memory bus: two evaluators, plans as the web tier writes them."""

    def __init__(self) -> None:
        self.memory = MemoryBus()
        super().__init__()

    def evaluator(self, e: int) -> EvaluatorRunner:
        return EvaluatorRunner(memory_ports(self.memory, e), e)

    def write_plan(self, e: int, plan: EvaluatorPlan) -> None:
        self.memory.plans[e] = plan

    def plan_of(self, e: int) -> EvaluatorPlan:
        return self.memory.plans[e]

    def joined(self, e: int) -> dict[int, int]:
        return self.memory.state(e).saved.joined


def changes_by_seq(memory: MemoryBus, qid: int) -> list[tuple[int, str, str]]:
    by_seq = defaultdict(list)
    for change in memory.change_log(qid):
        by_seq[change.seq].append((change.type, change.result.key))
    return [(seq, *c) for seq in sorted(by_seq) for c in sorted(by_seq[seq])]


def test_a_class_moving_between_evaluators_in_memory_publishes_what_one_evaluator_publishes():
    alone_bus = MemoryBus(plans={9: placement_case.full_plan(evaluator=9)})
    alone = runner(alone_bus, 9)
    lines = placement_case.LINES
    for start in range(0, len(lines), 50):
        alone.apply_batch(0, placement_case.parse(alone_bus.plans[9], lines[start:start + 50]))
    queries = [q["id"] for q in placement_case.QUERIES]
    expected = {q: changes_by_seq(alone_bus, q) for q in queries}
    assert any(expected.values())
    # each moves a unit to an evaluator ahead of its source; the last is test_placement's reproducer (query 10,
    # whose only changes fall between the source's position and the target's join seq)
    for unit_index, sizes, offset, move_at in ((0, {1: 40, 2: 70}, {1: 0, 2: 60}, 200),
                                               (3, {1: 90, 2: 25}, {1: 30, 2: 0}, 200),
                                               (4, {1: 20, 2: 72}, {1: 0, 2: 1}, 72)):
        run = MemoryPlacement()
        placement_case.move_mid_stream(run, sizes, offset, move_at, unit_index)
        assert run.target_lead > 0
        assert {q: changes_by_seq(run.memory, q) for q in queries} == expected


@pytest.mark.parametrize("move_ends_first", [False, True])
def test_a_target_restarted_while_it_holds_a_moving_query_loses_and_doubles_no_change(move_ends_first):
    """Query 5 moves from evaluator 1 to evaluator 2, which is ahead: 2 holds its changes, restarts with them
    (saved with its state; its fresh engine does not reconcile the query), holds on until 1 has published
    through the join seq, then releases them in order, in its next batch or, if the move ended before it,
    when it adopts that plan; the change stream is the single-engine one, seq by seq."""
    full = plan(1, query(5), query(7, keywords=("dress",), tmax=3))
    memory = MemoryBus()
    versions = {1: 0, 2: 0}

    def write(placement: Placement) -> None:
        for e in versions:
            versions[e] += 1
        memory.plans.update(evaluator_plans(full, [1, 2], placement, versions))

    write(Placement({5: 1, 7: 2}))
    source, target = runner(memory, 1), runner(memory, 2)
    rows = rows_of(LINES, full)
    source.apply_batch(0, rows[:10])
    target.apply_batch(0, rows[:17])
    move = Move((5,), 1, 2)
    write(Placement({5: 1, 7: 2}, move))
    target.apply_batch(1, rows[17:22])  # joins at 16, where the source has published through 9 only
    assert memory.state(2).saved.joined == {5: 16}
    assert [seq for *_, seq in memory.state(2).saved.held[5]] == [17, 18, 20, 21]
    before = changes_by_seq(memory, 5)
    assert {seq for seq, *_ in before} == {7, 8}  # the source's

    target = runner(memory, 2)  # the process died: a fresh engine, the held changes from the store
    assert changes_by_seq(memory, 5) == before  # not reconciled at 21
    target.apply_batch(2, rows[22:24])
    assert [seq for *_, seq in memory.state(2).saved.held[5]] == [17, 18, 20, 21, 23]
    assert changes_by_seq(memory, 5) == before
    assert not handoff_complete(move, memory.state(2).saved.joined, memory.state(1).published)

    source.apply_batch(1, rows[10:20])  # the source publishes through 19
    assert handoff_complete(move, memory.state(2).saved.joined, memory.state(1).published)
    done = Placement({5: 2, 7: 2}, Move((5,), 1, 2, done=True))
    if move_ends_first:
        write(done)
        assert target.refresh_plan() and target.session.held == {}
    target.apply_batch(3, rows[24:26])  # releases what it held (if it still does), before 25's change
    assert memory.state(2).saved.held == {}
    if not move_ends_first:
        write(done)
    source.apply_batch(2, rows[20:])
    target.apply_batch(4, rows[26:])
    assert 5 not in source.session.queries
    assert published(memory, 5) == reference(OPS)
    assert published(memory, 7) == reference(OPS, keywords=("dress",), tmax=3)


def test_poison_ops_are_dead_letters_and_a_guarded_batch_names_its_op_until_done():
    memory = MemoryBus(plans={1: plan(1, query(5))}, poison={2: {3: "it crashed the evaluator twice"}})
    ev = runner(memory)
    named = []
    state = memory.state(1)
    original = state.note_failed
    state.note_failed = lambda seq, error: (named.append(seq), original(seq, error))  # type: ignore[method-assign]
    ev.apply_batch(0, rows_of(LINES, memory.plans[1]), guarded=True)
    assert named == list(range(len(OPS))) and state.failed is None
    dead = memory.stream_events(2, DeadLetter)
    assert [(d.seq, d.reason) for d in dead][0] == (3, "it crashed the evaluator twice")
    assert published(memory, 5) == reference(OPS, keep=lambda op: op.ts != 3)


def test_a_new_schema_drops_the_stored_tuples_it_no_longer_admits():
    doc = plan(1, query(5))
    session = StreamSession()
    session.adopt(doc)
    session.apply(rows_of(LINES[:12], doc))
    products = {ident for ident in session.stored if ident[0] == "Product"}
    assert products and session.state_write().tuples
    narrower = doc.model_dump(mode="json", by_alias=True) | {"version": 2}
    relations = narrower["stream"]["schema"]["relations"]
    product = next(r for r in relations if r["name"] == "Product")
    del product["attributes"]["price"]
    kept = set(session.stored) - products
    session.adopt(EvaluatorPlan.model_validate(narrower))  # a stored product holds a price the new schema does not know
    assert set(session.stored) == kept and len(session.engine.store) == len(kept)
    assert {ident for ident, record in session.state_write().tuples.items() if record is None} == products
