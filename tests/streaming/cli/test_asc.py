"""``python -m streaming asc``: one line per tuple, then the totals; rejects and rearrangements on stderr."""

from __future__ import annotations

import json

import pytest

from streaming.cli import main

QUERIES = [
    {"id": "q1", "predicates": [{"attribute": "a1", "op": ">=", "value": 40}, {"attribute": "a3", "op": "<", "value": 10}]},
    {"id": "q2", "predicates": [{"attribute": "a1", "op": "between", "value": [10, 30]}]},
    {"id": "q3", "predicates": [{"attribute": "a2", "op": "=", "value": 5}]},
]
TUPLES = [{"a1": 45, "a2": 5, "a3": 3}, {"a1": 20, "a2": 1, "a3": 50}, {"a1": 1, "a2": 1, "a3": 1},
          {"a1": 50, "a2": 5, "a3": 60}] * 3


@pytest.fixture
def files(tmp_path):
    q = tmp_path / "Q.json"
    q.write_text(json.dumps(QUERIES))
    t = tmp_path / "T.ndjson"
    lines = [json.dumps(x) for x in TUPLES]
    lines.insert(2, "{not json")
    lines.insert(5, json.dumps({"a1": "high"}))
    t.write_text("\n".join(lines) + "\n")
    return str(q), str(t)


@pytest.mark.parametrize("strategy", ["macro", "hybrid", "ticket", "fixed:A3,A1,A2"])
def test_asc_cli_lines(files, strategy, capsys):
    q, t = files
    assert main(["asc", "--queries", q, "--tuples", t, "--strategy", strategy, "--period", "4"]) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    *rows, last = lines
    assert [r["i"] for r in rows] == [0, 1, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13]
    assert [r["queries"] for r in rows[:4]] == [["q1", "q3"], ["q2"], [], ["q3"]]
    assert all(r["evaluated"] >= 1 for r in rows)
    assert last["cost"] == sum(r["evaluated"] for r in rows)
    assert (last["tuples"], last["dropped"], last["rejected"]) == (12, 3, 2)
    logged = [json.loads(x) for x in err.splitlines()]
    assert [x["line"] for x in logged if x["type"] == "reject"] == [3, 6]
    rearranged = [x for x in logged if x["type"] == "rearrangement"]
    assert len(rearranged) == last["rearrangements"] == (3 if strategy in ("macro", "hybrid") else 0)
    for event in rearranged:
        assert {"old", "new", "d_init", "d_cur", "mu", "tuple"} <= set(event)


def test_asc_cli_bad_input(files, tmp_path, capsys):
    q, t = files
    assert main(["asc", "--queries", q, "--tuples", t, "--strategy", "fixed:a1"]) == 2
    assert "missing p-attribute" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "q", "predicates": [{"attribute": "x", "op": "~", "value": 1}]}]))
    assert main(["asc", "--queries", str(bad), "--tuples", t, "--strategy", "macro"]) == 2
    assert "op" in capsys.readouterr().err
