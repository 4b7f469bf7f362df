"""``bench eval`` end to end on tiny streams: JSON with agreeing evaluators, and the plots."""

from __future__ import annotations

import json

import pytest

from streaming.cli import main as cli_main


@pytest.mark.slow
def test_bench_eval_smoke(tmp_path):
    code = cli_main(["bench", "eval", "--quick", "--minutes", "2", "--fig17-minutes", "1", "--papers", "60",
                     "--repeat", "1", "--series", "kwf", "tmax", "--out", str(tmp_path)])
    assert code == 0
    result = json.loads((tmp_path / "eval.json").read_text())
    head = result["headline"]
    assert head["agree"] and head["runs"]["dynamic"]["operations"] == 15 * 120
    assert set(head["memory"]) == {"store-only", "dynamic", "mesh"}
    assert all(p["agree"] for points in result["fig14"].values() for p in points)
    assert all(p["agree"] for points in result["fig15"]["series"].values() for p in points)
    assert all(p["agree"] for p in result["fig17"]["points"])
    assert {p.name for p in tmp_path.glob("*.png")} == {"fig14.png", "fig15.png", "fig17.png"}
