"""The shared engine's keyword bits of a tuple: each distinct short text value's bits are found once and kept,
up to a bound, and found afresh when the vocabulary changes."""

from __future__ import annotations

from streaming.keywords import tuple_tokens
from streaming.schema import Schema
from streaming.sharing import plan_state
from streaming.sharing.engine import SharedEngine
from streaming.sharing.properties import QueryEntry, query_properties

SCHEMA = Schema.from_dict({"name": "shop", "relations": [
    {"name": "Customer", "key": "cid", "attributes": {"cid": "int", "name": "text", "state": "text"}}]})


def engine_for(*keyword_sets: str) -> SharedEngine:
    engine = SharedEngine(SCHEMA, "widen")
    engine.set_plan([query_properties(QueryEntry.model_validate({"id": i, "keywords": k.split()}), SCHEMA)
                     for i, k in enumerate(keyword_sets)])
    return engine


def expected(engine: SharedEngine, values: dict) -> int:
    words = tuple_tokens(SCHEMA.relations["Customer"], values)
    return sum(1 << bit for word, bit in engine.vocabulary.items() if word in words)


def test_more_distinct_texts_than_kept_are_each_classified_right(monkeypatch):
    monkeypatch.setattr(plan_state, "_TEXT_MASKS", 3)
    engine = engine_for("texas", "ann ohio")
    texts = ["Ann Smith", "Texas", "ohio", "Bob", "ANN of Texas", "Ann Smith", "Texas", "x"]
    for i, text in enumerate(texts):
        values = {"cid": i, "name": text, "state": texts[-1 - i]}
        assert engine._classify("Customer", values) == expected(engine, values)
        assert len(engine._text_masks) <= 3


def test_a_new_vocabulary_classifies_a_text_seen_before_afresh():
    engine = engine_for("texas")
    values = {"cid": 1, "name": "Ann", "state": "Ohio"}
    assert engine._classify("Customer", values) == 0
    engine.set_plan([query_properties(QueryEntry.model_validate({"id": 0, "keywords": ["ann"]}), SCHEMA)])
    assert engine.vocabulary == {"ann": 0}
    assert engine._classify("Customer", values) == 1


def test_a_long_text_is_classified_each_time_and_not_kept():
    engine = engine_for("texas")
    values = {"cid": 1, "name": "x" * (plan_state._TEXT_KEPT_CHARS + 1), "state": "Texas"}
    for _ in range(2):
        assert engine._classify("Customer", values) == 1
    assert list(engine._text_masks) == ["Texas"]
