"""The shared lattice of many keyword sets against the brute-force enumerator, with keyword sets coming and going.

Random schemas (a self-reference, two parallel FKs), random streams of
inserts and deletes over a store, and a random sequence of keyword sets
registered (some again with another Tmax) and unregistered in between:
after every step each registered keyword set's live results equal the
independent enumerator's over the stored tuples, the changes reported replay
to them, and the sub-relations hold a fresh evaluation of the same lattice
(more only where a keyword set that left made tuples eligible, each still
holding its node's words and joining every child).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.evaluate.shared import SharedLatticeEvaluator
from streaming.keywords import tuple_tokens
from streaming.lattice import Lattice
from streaming.schema import Schema
from streaming.window import LiveStore
from tests.streaming.bruteforce import enumerate_results
from tests.streaming.test_engine_properties import schemas

WORDS = ["x", "y", "z", "w", "v"]


def as_keys(results) -> set:
    return {(r.tuples, r.edges) for r in results}


class Stream:
    """A store fed by random ops, its tuples classified over :data:`WORDS`, and the evaluator over it."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.store = LiveStore(schema)
        self.network = SharedLatticeEvaluator(schema, self.store)
        self.live: dict[int, set] = {}  # keyword set id -> live results replayed from the changes
        self.registered: dict[int, tuple[list[str], int]] = {}

    def mask(self, relation: str, values: dict) -> int:
        found = tuple_tokens(self.schema.relations[relation], values)
        return sum(1 << i for i, w in enumerate(WORDS) if w in found)

    def insert(self, relation: str, values: dict) -> None:
        key = values[self.schema.relations[relation].key]
        if key in self.store.rows[relation]:
            return
        row = self.store.add(relation, key, values, self.mask(relation, values), 0.0)
        for kid, result in self.network.insert(relation, key, row):
            assert (result.tuples, result.edges) not in self.live[kid]
            self.live[kid].add((result.tuples, result.edges))

    def delete(self, relation: str, key: int) -> None:
        row = self.store.rows[relation].get(key)
        if row is None:
            return
        for kid, result in self.network.delete(relation, key, row):
            self.live[kid].remove((result.tuples, result.edges))
        self.store.remove(relation, key)

    def register(self, kid: int, words: list[str], tmax: int) -> None:
        words = sorted(words)
        results = self.network.set_keyword_set(kid, [WORDS.index(w) for w in words],
                                               Lattice.build(self.schema, len(words), tmax))
        self.live[kid] = as_keys(results)
        self.registered[kid] = (words, tmax)

    def unregister(self, kid: int) -> None:
        self.network.remove_keyword_set(kid)
        del self.live[kid], self.registered[kid]

    def check(self) -> None:
        stored = {(rel, key): row.values for rel, rows in self.store.rows.items() for key, row in rows.items()}
        for kid, (words, tmax) in self.registered.items():
            expected = enumerate_results(self.schema, words, tmax, stored)
            assert as_keys(self.network.results.of.get(kid, ())) == expected, (kid, words, tmax)
            assert self.live[kid] == expected, (kid, words, tmax)
        fresh = SharedLatticeEvaluator(self.schema, self.store)
        for kid, (words, tmax) in sorted(self.registered.items()):
            fresh.set_keyword_set(kid, [WORDS.index(w) for w in words], Lattice.build(self.schema, len(words), tmax))
        plan, fresh_ids = self.network.plan, {code(fresh.plan, v): v for v in live_nodes(fresh.plan)}
        assert len(fresh_ids) == plan.live_nodes
        network, rows = self.network, self.store.rows
        for v in live_nodes(plan):
            same = fresh_ids[code(plan, v)]
            assert fresh.sub[same] <= network.sub[v], v
            for key in network.sub[v] - fresh.sub[same]:  # kept from a keyword set gone: still genuine
                row = rows[plan.rel[v]][key]
                assert row.mask & plan.mask[v] == plan.mask[v] and joins_every_child(plan, network, rows, v, key, row), (v, key)
            assert network.missing[v] == sum(1 for c, *_ in plan.kids[v] if not network.sub[c]), v


def joins_every_child(plan, network, rows, v: int, key, row) -> bool:
    for c, parent_holds, fk, column in plan.kids[v]:
        if parent_holds:
            if row.values[column] not in network.sub[c]:
                return False
        elif not any(rows[plan.rel[c]][ck].values[column] == key for ck in network.sub[c]):
            return False
    return True


def live_nodes(plan) -> list[int]:
    return [v for v in range(len(plan.rel)) if plan.alive[v]]


def code(plan, v: int) -> tuple:
    """A node's structure, whatever its id: relation, label and the codes of its children."""
    return (plan.rel[v], plan.mask[v], tuple(sorted((fk, holds, code(plan, c)) for c, holds, fk, _ in plan.kids[v])))


@st.composite
def steps(draw, schema: Schema) -> list[tuple]:
    out = []
    names = sorted(schema.relations)
    # a few words per example, so that tuples often hold a registered keyword set's words and parents fill
    vocabulary = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=len(WORDS), unique=True))
    for _ in range(draw(st.integers(1, 40))):
        roll = draw(st.integers(0, 9))
        if roll < 2:
            words = draw(st.lists(st.sampled_from(vocabulary), min_size=1, max_size=3, unique=True))
            out.append(("register", draw(st.integers(0, 5)), words, draw(st.integers(1, 4))))
        elif roll < 3:
            out.append(("unregister", draw(st.integers(0, 5))))
        elif roll < 5:
            out.append(("delete", draw(st.sampled_from(names)), draw(st.integers(0, 4))))
        else:
            rel = schema.relations[draw(st.sampled_from(names))]
            key = draw(st.integers(0, 4))
            values = {"id": key, "t": " ".join(draw(st.lists(st.sampled_from(vocabulary), max_size=2)))}
            for fk in rel.foreign_keys:
                values[fk.column] = draw(st.sampled_from([None, 0, 1, 2, key]))
            out.append(("insert", rel.name, values))
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_keyword_set_equals_the_enumerator_as_sets_and_tuples_come_and_go(data):
    schema = data.draw(schemas())
    stream = Stream(schema)
    for step in data.draw(steps(schema)):
        if step[0] == "register":
            _, kid, words, tmax = step
            if all(w != sorted(words) for other, (w, _) in stream.registered.items() if other != kid):
                stream.register(kid, words, tmax)
        elif step[0] == "unregister":
            if step[1] in stream.registered:
                stream.unregister(step[1])
        elif step[0] == "delete":
            stream.delete(step[1], step[2])
        else:
            stream.insert(step[1], step[2])
        stream.check()


def test_a_tuple_with_two_keywords_is_a_result_of_each_and_of_both_and_leaves_all_at_once():
    schema = Schema.from_dict({"name": "one", "relations": [
        {"name": "P", "key": "id", "attributes": {"id": "int", "t": "text"}}]})
    stream = Stream(schema)
    stream.register(0, ["x"], 1)
    stream.register(1, ["y"], 1)
    stream.register(2, ["x", "y"], 2)
    stream.insert("P", {"id": 1, "t": "x y"})
    assert {kid: len(results) for kid, results in stream.live.items()} == {0: 1, 1: 1, 2: 1}
    stream.delete("P", 1)
    assert stream.live == {0: set(), 1: set(), 2: set()}
    stream.check()


@pytest.mark.parametrize("emptied", [False, True])
def test_a_parent_made_ready_by_a_childs_first_tuple_joins_tuples_reached_later_through_another_child(emptied):
    """Order{}(Customer{x}, Product{y}) becomes ready when Customer{x} gets its first tuple (again, after it
    was emptied); an order stored before its product arrives is then reached from the product and
    checked against the customers of that moment."""
    schema = Schema.from_dict({"name": "shop", "relations": [
        {"name": "C", "key": "id", "attributes": {"id": "int", "t": "text"}},
        {"name": "P", "key": "id", "attributes": {"id": "int", "t": "text"}},
        {"name": "O", "key": "id", "attributes": {"id": "int", "t": "text", "cid": "int", "pid": "int"},
         "foreign_keys": [{"name": "cid", "column": "cid", "references": "C"},
                          {"name": "pid", "column": "pid", "references": "P"}]}]})
    stream = Stream(schema)
    stream.register(0, ["x", "y"], 3)
    stream.insert("P", {"id": 1, "t": "y"})
    if emptied:
        stream.insert("C", {"id": 9, "t": "x"})
        stream.delete("C", 9)
    stream.insert("C", {"id": 1, "t": "x"})
    stream.insert("O", {"id": 1, "t": "", "cid": 1, "pid": 2})
    stream.insert("P", {"id": 2, "t": "y"})
    assert [tuples for tuples, _ in stream.live[0]] == [(("C", 1), ("O", 1), ("P", 2))]
    stream.check()


def test_a_parent_fills_when_a_keyword_set_widens_its_child():
    """R0{x} admits a tuple holding *x y* only once {x} is registered (for {w, x, y} it holds a forbidden
    word); R1{w y}'s tuple joining it must then enter R1{w y}, though {x} does not reach that node."""
    schema = Schema.from_dict({"name": "two", "relations": [
        {"name": "R0", "key": "id", "attributes": {"id": "int", "t": "text"}},
        {"name": "R1", "key": "id", "attributes": {"id": "int", "t": "text", "f": "int"},
         "foreign_keys": [{"name": "f", "column": "f", "references": "R0"}]}]})
    stream = Stream(schema)
    stream.insert("R0", {"id": 1, "t": "y x"})
    stream.register(5, ["w", "x", "y"], 2)
    stream.insert("R1", {"id": 4, "t": "y w", "f": 1})
    stream.register(0, ["x"], 1)
    stream.check()
