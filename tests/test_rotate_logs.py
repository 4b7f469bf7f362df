"""`make run` keeps the logs of its previous runs (scripts/rotate_logs.sh) instead of overwriting them."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rotate(directory: Path, keep: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "rotate_logs.sh"), str(directory), keep],
                          capture_output=True, text=True, timeout=30)


def test_each_run_moves_the_logs_one_place_down_and_keeps_only_the_last_runs(tmp_path):
    for run in range(1, 5):
        assert rotate(tmp_path, "2").returncode == 0
        (tmp_path / "web.log").write_text(f"web run {run}\n")
        if run == 1:
            (tmp_path / "evaluator-7.log").write_text("a traceback of run 1\n")  # its evaluator is gone after run 1
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "web.log": "web run 4\n", "web.log.1": "web run 3\n", "web.log.2": "web run 2\n",
    }
    (tmp_path / "evaluator-7.log").write_text("run 5\n")
    assert rotate(tmp_path, "2").returncode == 0
    assert (tmp_path / "evaluator-7.log.1").read_text() == "run 5\n" and not (tmp_path / "evaluator-7.log").exists()
    assert (tmp_path / "web.log.2").read_text() == "web run 3\n"


def test_keep_zero_keeps_nothing_and_a_bad_keep_is_refused(tmp_path):
    (tmp_path / "web.log").write_text("x\n")
    (tmp_path / "web.log.1").write_text("y\n")
    (tmp_path / "notes.txt").write_text("not a log\n")
    assert rotate(tmp_path, "0").returncode == 0
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    proc = rotate(tmp_path, "many")
    assert proc.returncode == 2 and "KEEP must be a number of runs" in proc.stderr
