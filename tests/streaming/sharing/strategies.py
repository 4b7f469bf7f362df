"""Hypothesis strategies for sharing tests: random schemas, streams without re-inserts of live keys, random plans."""

from __future__ import annotations

from hypothesis import strategies as st

WORDS = ["x", "y", "z", "w", "v", "u"]
# a few sets that overlap a lot (the same set in another order, subsets, supersets) ...
KEYWORD_SETS = [["x"], ["x", "y"], ["y", "x"], ["x", "y", "z"], ["y", "z"], ["w"], ["x", "w"]]


@st.composite
def keyword_sets(draw) -> list[str]:
    """... or any set of one to three words, overlapping the others or disjoint from them."""
    if draw(st.booleans()):
        return draw(st.sampled_from(KEYWORD_SETS))
    return draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True))


@st.composite
def schema_docs(draw) -> dict:
    """2-3 relations with a text attribute, a number ``v``, a self-reference and two parallel FKs."""
    n = draw(st.integers(2, 3))
    rels = [{"name": f"R{i}", "key": "id", "attributes": {"id": "int", "t": "text", "v": "int"},
             "foreign_keys": []} for i in range(n)]

    def add_fk(holder: int, target: int) -> None:
        rel = rels[holder]
        name = f"f{len(rel['foreign_keys'])}"
        rel["attributes"][name] = "int"
        rel["foreign_keys"].append({"name": name, "column": name, "references": f"R{target}"})

    add_fk(0, 0)
    add_fk(1, 0)
    add_fk(1, 0)
    for _ in range(draw(st.integers(0, 2))):
        add_fk(draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)))
    return {"name": "random", "relations": rels}


@st.composite
def streams(draw, schema_doc: dict, max_ops: int = 40, windows: tuple = (), words: tuple = tuple(WORDS)) -> list[dict]:
    """Inserts, deletes of live and missing keys, late ops and time jumps, with no re-insert of a key
    still live in the widest of ``windows``; texts are drawn from ``words``.

    Under the stream clock rule (docs/ops.md) every op then gets the same
    verdict from each query alone as from the widest window, but for a delete
    of a tuple that left a narrower window: alone that query rejects it, after
    its time ended the tuple's results, so its events are the same.
    """
    bounded = [w for w in windows if w is not None]
    widest = None if not windows or None in windows else max(bounded)
    ops: list[dict] = []
    ts = 0.0
    clock: float | None = None  # the stream clock: every op that is not late moves it
    rels = {r["name"]: r for r in schema_doc["relations"]}
    live: dict[tuple[str, int], float] = {}  # live in the widest window: key -> insertion time
    for _ in range(draw(st.integers(1, max_ops))):
        ts += draw(st.sampled_from([0, 0, 1, 1, 2, 3, 5, -1]))
        late = clock is not None and ts < clock
        if not late:
            clock = ts
            live = {k: at for k, at in live.items() if widest is None or at + widest > ts}
        name = draw(st.sampled_from(sorted(rels)))
        key = draw(st.integers(0, 5))
        if draw(st.integers(0, 4)) == 0 or (name, key) in live:
            if not late:
                live.pop((name, key), None)
            ops.append({"op": "delete", "relation": name, "key": key, "ts": ts})
            continue
        if not late:
            live[(name, key)] = ts
        values = {"id": key, "t": " ".join(draw(st.lists(st.sampled_from(words), max_size=3))),
                  "v": draw(st.one_of(st.none(), st.integers(0, 5)))}
        for fk in rels[name]["foreign_keys"]:
            values[fk["column"]] = draw(st.sampled_from([None, 0, 1, 2, key, key]))
        ops.append({"op": "insert", "relation": name, "tuple": values, "ts": ts})
    return ops


@st.composite
def predicates(draw, schema_doc: dict, max_size: int = 2) -> list[dict]:
    names = [r["name"] for r in schema_doc["relations"]]
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "between"]))
        value = [draw(st.integers(0, 2)), draw(st.integers(2, 5))] if op == "between" else draw(st.integers(0, 5))
        out.append({"relation": draw(st.sampled_from(names)), "attribute": "v", "op": op, "value": value})
    return out


@st.composite
def plans(draw, schema_doc: dict, min_queries: int = 2, max_queries: int = 12) -> dict:
    queries = []
    for qid in range(1, draw(st.integers(min_queries, max_queries)) + 1):
        keywords = [] if draw(st.integers(0, 7)) == 0 else draw(keyword_sets())
        preds = draw(predicates(schema_doc, max_size=2))
        if not keywords and not preds:
            preds = [{"relation": "R0", "attribute": "v", "op": ">=", "value": draw(st.integers(0, 5))}]
        queries.append({"id": qid * 7, "keywords": keywords, "tmax": draw(st.integers(1, 4)),
                        "window_seconds": draw(st.sampled_from([None, 2.0, 4.0, 6.0])), "predicates": preds})
    return {"schema": schema_doc, "queries": queries, "aggregates": []}


def plan_windows(plan_doc: dict) -> tuple:
    return tuple(q["window_seconds"] for q in plan_doc["queries"])


def plan_words(plan_doc: dict) -> tuple:
    """The words of the plan's queries and one word none of them has (if any is left): stream texts drawn
    from these hold the queries' keywords far more often than texts of every word."""
    used = sorted({w for q in plan_doc["queries"] for w in q["keywords"]})
    return tuple(used + [w for w in WORDS if w not in used][:1])
