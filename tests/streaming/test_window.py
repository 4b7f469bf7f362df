"""Live store FK index and sliding-window expiry ([s, s + W), oldest first, stale entries skipped)."""

import pytest

from streaming.schema import Schema
from streaming.window import LiveStore, SlidingWindow

SCHEMA = Schema.from_dict({
    "name": "s",
    "relations": [
        {"name": "P", "key": "id", "attributes": {"id": "int", "up": "int"},
         "foreign_keys": [{"name": "up", "column": "up", "references": "P"}]},
    ],
})


def test_fk_index_follows_adds_and_removes():
    store = LiveStore(SCHEMA)
    store.add("P", 1, {"id": 1, "up": None}, 0, 0.0)
    store.add("P", 2, {"id": 2, "up": 1}, 0, 0.0)
    store.add("P", 3, {"id": 3, "up": 1}, 0, 0.0)
    assert store.holders("P", "up", 1) == {2, 3}
    store.remove("P", 2)
    assert store.holders("P", "up", 1) == {3}
    store.remove("P", 3)
    assert store.holders("P", "up", 1) == frozenset()
    assert store.referencing[("P", "up")] == {}
    assert len(store) == 1


def test_expiry_boundary_and_order():
    store, window = LiveStore(SCHEMA), SlidingWindow(10)
    for key, ts in ((1, 0.0), (2, 5.0), (3, 5.0)):
        window.push("P", key, store.add("P", key, {"id": key, "up": None}, 0, ts))
    assert list(window.due(9.999, store)) == []
    assert window.expires_by(store.get("P", 1), 10.0)
    assert not window.expires_by(store.get("P", 2), 10.0)
    due = []
    for rel, key in window.due(15.0, store):
        due.append(key)
        store.remove(rel, key)
    assert due == [1, 2, 3]


def test_stale_entry_of_reinserted_key_is_skipped():
    store, window = LiveStore(SCHEMA), SlidingWindow(10)
    window.push("P", 1, store.add("P", 1, {"id": 1, "up": None}, 0, 0.0))
    store.remove("P", 1)
    window.push("P", 1, store.add("P", 1, {"id": 1, "up": None}, 0, 8.0))
    assert list(window.due(12.0, store)) == []
    assert list(window.due(18.0, store)) == [("P", 1)]


def test_no_window_never_expires():
    store, window = LiveStore(SCHEMA), SlidingWindow(None)
    window.push("P", 1, store.add("P", 1, {"id": 1, "up": None}, 0, 0.0))
    assert list(window.due(1e12, store)) == []
    assert not window.expires_by(store.get("P", 1), 1e12)


def test_window_must_be_positive():
    with pytest.raises(ValueError):
        SlidingWindow(0)
