"""``python -m streaming compare``: live sets after every seq, self-consistency, unreadable files."""

from __future__ import annotations

import json
from pathlib import Path

from streaming.cli import main
from tests.examples import EXAMPLES

A = {"seq": 3, "type": "add", "tuples": [["Order", 1], ["Customer", 1]], "edges": [[["Order", 1], ["Customer", 1], "cid"]]}
A_REORDERED = dict(A, tuples=[["Customer", 1], ["Order", 1]])
B = {"seq": 3, "type": "add", "tuples": [["Customer", 2]], "edges": []}


def write(path: Path, *events: dict) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def compare(capsys, expected: Path, actual: Path) -> tuple[int, str]:
    code = main(["compare", str(expected), str(actual)])
    return code, capsys.readouterr().out.strip()


def test_the_worked_example_is_the_same_as_itself(capsys):
    path = EXAMPLES / "events-dress-texas-tmax5.ndjson"
    assert compare(capsys, path, path) == (0, "same")


def test_order_within_a_seq_and_tuple_order_do_not_matter(capsys, tmp_path):
    expected = write(tmp_path / "e", A, B)
    actual = write(tmp_path / "a", B, A_REORDERED)
    assert compare(capsys, expected, actual) == (0, "same")


def test_a_missing_result_is_the_first_difference(capsys, tmp_path):
    code, out = compare(capsys, write(tmp_path / "e", A, B), write(tmp_path / "a", A))
    assert code == 1 and out.startswith("after seq 3: missing") and "Customer" in out


def test_an_add_of_a_live_result_is_reported(capsys, tmp_path):
    code, out = compare(capsys, write(tmp_path / "e", A), write(tmp_path / "a", A, dict(A, seq=4)))
    assert code == 1 and "seq 4 adds a result that is already live" in out


def test_a_line_that_is_not_an_event_names_the_file_and_line(capsys, tmp_path):
    bad = tmp_path / "bad"
    bad.write_text(json.dumps(A) + "\n" + '{"seq": "x"}\n')
    code, out = compare(capsys, write(tmp_path / "e", A), bad)
    assert code == 2 and out.startswith(f"{bad}:2: not an engine event")
