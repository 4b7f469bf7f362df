"""The soak's counting of a feed against the reference: a loss and a duplicate are each counted, never balanced."""

from __future__ import annotations

from tests.faults.reference import change_of, differences, feed_differences

A, B, C = ({"tuples": [{"relation": "Order", "key": [oid]}], "edges": []} for oid in (1, 2, 3))
REFERENCE = [change_of(1, "add", A), change_of(3, "add", B), change_of(5, "remove", A), change_of(7, "add", C)]


def snapshot(last_seq: int | None, *results: dict) -> dict:
    return {"type": "snapshot", "last_seq": last_seq, "results": list(results)}


def change(seq: int, kind: str, result: dict) -> dict:
    return {"type": f"result.{kind}", "seq": seq, "result": result}


def test_an_exact_feed_counts_nothing():
    messages = [snapshot(None), change(1, "add", A), change(3, "add", B), change(5, "remove", A), change(7, "add", C)]
    assert feed_differences(REFERENCE, messages) == {"snapshots": 1, "snapshot_wrong": 0, "lost": 0, "duplicated": 0}


def test_a_loss_and_a_duplicate_are_both_counted():
    messages = [snapshot(None), change(1, "add", A), change(3, "add", B), change(3, "add", B), change(7, "add", C)]
    assert feed_differences(REFERENCE, messages) == {"snapshots": 1, "snapshot_wrong": 0, "lost": 1, "duplicated": 1}
    assert differences(REFERENCE, [c for c in REFERENCE if c[0] != 5] + [REFERENCE[1]]) == {"lost": 1,
                                                                                          "duplicated": 1}


def test_a_resynchronised_feed_is_held_to_the_live_set_at_its_new_snapshot():
    # dropped after seq 3; the new snapshot at seq 5 holds B (A removed at 5), then the change at 7
    messages = [snapshot(None), change(1, "add", A), change(3, "add", B), snapshot(5, B), change(7, "add", C)]
    assert feed_differences(REFERENCE, messages) == {"snapshots": 2, "snapshot_wrong": 0, "lost": 0, "duplicated": 0}
    wrong = [snapshot(None), change(1, "add", A), snapshot(5, A, B), change(7, "add", C)]
    assert feed_differences(REFERENCE, wrong)["snapshot_wrong"] == 1


def test_the_last_stretch_must_reach_the_end_of_the_reference():
    messages = [snapshot(3, B)]
    assert feed_differences(REFERENCE, messages)["snapshot_wrong"] == 1  # A is live at seq 3 too
    assert feed_differences(REFERENCE, [snapshot(3, A, B)])["lost"] == 2
