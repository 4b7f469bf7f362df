"""The ``nts`` and ``cns`` commands."""

from __future__ import annotations

import json

from streaming.cli import main

from tests.examples import ECOMMERCE


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_nts_count(capsys):
    assert run(capsys, "nts", "--keywords-count", "3", "--tmax", "10", "--count") == (0, "220\n", "")


def test_nts_list(capsys):
    code, out, _ = run(capsys, "nts", "--keywords-count", "2", "--tmax", "3")
    assert code == 0 and out.splitlines() == ["R{k1,k2}\t3", "R{k1}( R{k2} )\t1[2]", "R{}( R{k1}, R{k2} )\t0[1,2]"]


def test_cns_count_both_algorithms(capsys):
    for algorithm in ("nt", "initcngen"):
        code, out, _ = run(
            capsys, "cns", "--schema", ECOMMERCE, "--keywords", "dress texas", "--tmax", "5", "--count",
            "--algorithm", algorithm,
        )
        assert (code, out) == (0, "80\n")


def test_cns_list_is_readable_with_codes(capsys):
    code, out, _ = run(capsys, "cns", "--schema", ECOMMERCE, "--keywords", "dress texas", "--tmax", "2")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 12
    assert "Order{dress}( -cid-> Customer{texas} )\tOrder{1}[>cid:Customer{2}]" in lines


def test_cns_lattice(capsys):
    code, out, _ = run(
        capsys, "cns", "--schema", ECOMMERCE, "--keywords", "dress texas", "--tmax", "3", "--lattice", "json"
    )
    doc = json.loads(out)
    assert code == 0 and doc["counts"]["roots"] == 26
    code, out, _ = run(
        capsys, "cns", "--schema", ECOMMERCE, "--keywords", "dress texas", "--tmax", "3", "--lattice", "text",
        "--algorithm", "initcngen",
    )
    assert code == 0 and sum(" root" in line for line in out.splitlines()) == 26


def test_cns_errors(capsys, tmp_path):
    code, _, err = run(capsys, "cns", "--schema", str(tmp_path / "none.json"), "--keywords", "a", "--tmax", "2")
    assert code == 2 and "none.json" in err
    code, _, err = run(capsys, "cns", "--schema", ECOMMERCE, "--keywords", "a a", "--tmax", "2")
    assert code == 2 and "twice" in err
    code, _, err = run(capsys, "cns", "--schema", ECOMMERCE, "--keywords", "a", "--tmax", "0")
    assert code == 2
