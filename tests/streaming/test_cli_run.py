"""``python -m streaming run``: the worked examples for every engine, rejects with line numbers, static prefix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.cli import main as cli_main
from streaming.schema import load_schema
from tests.examples import EXAMPLES
from tests.streaming.bruteforce import load_ops, replay

CASES = [(["--tmax", "5"], "events-dress-texas-tmax5.ndjson"),
         (["--tmax", "4", "--window-seconds", "30"], "events-dress-texas-tmax4-window30.ndjson")]


def run_cli(tmp_path: Path, *extra: str, ops: Path = EXAMPLES / "ops.ndjson") -> tuple[Path, Path]:
    out, rejects = tmp_path / "events.ndjson", tmp_path / "rejects.txt"
    code = cli_main(["run", "--schema", str(EXAMPLES / "schema.json"), "--keywords", "dress texas",
                     "--ops", str(ops), "--out", str(out), "--rejects", str(rejects), *extra])
    assert code == 0
    return out, rejects


def compare(expected: Path, actual: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "streaming", "compare", str(expected), str(actual)],
                          capture_output=True, text=True)
    return done.stdout.strip()


@pytest.mark.parametrize("engine", ["dynamic", "static-dynamic", "mesh"])
@pytest.mark.parametrize("args, expected", CASES)
def test_examples_for_every_engine(tmp_path, engine, args, expected):
    out, rejects = run_cli(tmp_path, "--engine", engine, *args)
    assert compare(EXAMPLES / expected, out) == "same"
    lines = rejects.read_text().splitlines()
    assert lines[:3] == ["line 14: insert of Order 4: the key is already live",
                         "line 15: delete of Order 99: no live tuple with this key",
                         "line 16: unknown relation 'Shipment'"]


@pytest.mark.parametrize("prefix", [1, 8, 13, 20, 29])
def test_static_prefix_reports_the_initial_set_at_its_last_seq(tmp_path, prefix):
    out, _ = run_cli(tmp_path, "--engine", "static-dynamic", "--static-prefix", str(prefix), "--tmax", "5")
    events = [json.loads(line) for line in out.read_text().splitlines()]
    expected = replay(load_schema(EXAMPLES / "schema.json"), ["dress", "texas"], 5, None,
                      load_ops(str(EXAMPLES / "ops.ndjson")))
    # collapse the expected events of the prefix into adds at seq prefix - 1
    live: dict = {}
    for ev in expected:
        if ev["seq"] < prefix:
            key = json.dumps([ev["tuples"], ev["edges"]])
            if ev["type"] == "add":
                live[key] = ev
            else:
                del live[key]
    collapsed = [{**ev, "seq": prefix - 1} for ev in live.values()] + [ev for ev in expected if ev["seq"] >= prefix]
    (tmp_path / "expected.ndjson").write_text("".join(json.dumps(e) + "\n" for e in collapsed))
    assert compare(tmp_path / "expected.ndjson", out) == "same"
    assert all(ev["type"] == "add" for ev in events if ev["seq"] == prefix - 1)


def test_bad_lines_are_rejected_and_the_run_goes_on(tmp_path):
    ops = tmp_path / "ops.ndjson"
    ops.write_text("\n".join([
        '{"op":"insert","relation":"Product","tuple":{"pid":1,"title":"Texas dress"},"ts":5}',
        "{oops",
        "",
        '{"op":"insert","relation":"Product","tuple":{"pid":"two"},"ts":6}',
        '{"op":"insert","relation":"Product","tuple":{"pid":2,"title":"dress"},"ts":4}',
        '{"op":"delete","relation":"Product","key":1,"ts":7}',
    ]) + "\n")
    out, rejects = run_cli(tmp_path, "--tmax", "3", ops=ops)
    assert [(e["seq"], e["type"]) for e in map(json.loads, out.read_text().splitlines())] == [(0, "add"), (4, "remove")]
    reasons = rejects.read_text().splitlines()
    assert [r.split(":")[0] for r in reasons] == ["line 2", "line 4", "line 5"]
    assert "malformed JSON" in reasons[0] and "expected int" in reasons[1] and "late op" in reasons[2]


def test_usage_errors(tmp_path, capsys):
    assert cli_main(["run", "--schema", str(tmp_path / "missing.json"), "--keywords", "a", "--tmax", "3",
                     "--ops", "-"]) == 2
    assert cli_main(["run", "--schema", str(EXAMPLES / "schema.json"), "--keywords", "a a", "--tmax", "3",
                     "--ops", "-"]) == 2
    assert cli_main(["run", "--schema", str(EXAMPLES / "schema.json"), "--keywords", "a", "--tmax", "3",
                     "--static-prefix", "3", "--ops", "-"]) == 2
    assert "error" in capsys.readouterr().err
