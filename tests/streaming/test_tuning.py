"""The interpreter tuning of engine processes: what a long-lived build leaves to the collector."""

import gc

import pytest

from streaming.tuning import building_long_lived


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation=generation))


@pytest.fixture
def collector():
    """The collector enabled, and left as the test found it."""
    enabled = gc.isenabled()
    gc.enable()
    yield
    if not enabled:
        gc.disable()


def test_what_a_build_makes_goes_to_the_oldest_generation_with_no_collection_meanwhile(collector):
    collections = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with building_long_lived():
            assert not gc.isenabled()
            built = [[i] for i in range(300_000)]  # over the young threshold: 700 by default, 100,000 in an engine
    finally:
        gc.callbacks.remove(count)
    assert collections == []
    assert gc.isenabled()
    assert gc.get_count()[0] < 100
    assert _in_generation(built, 2) and not _in_generation(built, 0)


def test_a_cycle_that_was_garbage_is_still_collected_by_a_full_collection(collector):
    class Node:
        pass

    with building_long_lived():
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
    assert gc.collect() >= 2


def test_a_paused_collector_stays_paused_and_a_failing_build_still_hands_over():
    enabled = gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(RuntimeError), building_long_lived():
            kept = {"x": [1]}
            raise RuntimeError("the build failed")
        assert not gc.isenabled()
        assert _in_generation(kept, 2)
    finally:
        if enabled:
            gc.enable()
