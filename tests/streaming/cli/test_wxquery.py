"""``python -m streaming wxquery``: the contract of issue 11, item 6."""

from __future__ import annotations

import json

import pytest

from streaming.cli import main
from streaming.wxquery.apt import APF, APT
from streaming.wxquery.matching import same_abstraction
from streaming.wxquery.translate import compile_text
from streaming.workloads.photons import JOIN_QUERIES, PAPER_QUERIES, PHOTONS_DTD, photon_items, photons_document
from streaming.xmlstream.dtd import StreamDTD

DTD = StreamDTD.from_text(PHOTONS_DTD)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "photons.dtd").write_text(PHOTONS_DTD)
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, text in PAPER_QUERIES.items():
        (subs / f"{name}.xq").write_text(text)
    items = photons_document(900, seed=11).replace("</photons>", "<photon><bad/></photon>\n</photons>")
    (tmp_path / "items.xml").write_text(items)
    return tmp_path


def run(*argv: str) -> int:
    return main(["wxquery", *map(str, argv)])


def test_apt_prints_the_apt_as_json(files, capsys):
    assert run("apt", "--dtd", files / "photons.dtd", "--query", files / "subs" / "q3.xq") == 0
    apt = APT.model_validate_json(capsys.readouterr().out)
    assert apt == compile_text(PAPER_QUERIES["q3"], lambda _s: DTD).abstraction


def test_apt_of_a_join_is_an_apf(files, capsys):
    (files / "q5.xq").write_text(JOIN_QUERIES["q5"])
    assert run("apt", "--dtd", files / "photons.dtd", "--query", files / "q5.xq") == 0
    assert isinstance(APF.model_validate_json(capsys.readouterr().out), APF)


def test_match_q2_serves_q1(files, capsys):
    assert run("match", "--dtd", files / "photons.dtd", "--stream", files / "subs" / "q2.xq",
               "--query", files / "subs" / "q1.xq") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["match"] is True
    assert APT.model_validate(out["merged"]) == compile_text(PAPER_QUERIES["q2"], lambda _s: DTD).abstraction


def test_match_q1_with_q2_merges_to_q2(files, capsys):
    assert run("match", "--dtd", files / "photons.dtd", "--stream", files / "subs" / "q1.xq",
               "--query", files / "subs" / "q2.xq") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["match"] is False
    assert same_abstraction(APT.model_validate(out["merged"]),
                            compile_text(PAPER_QUERIES["q2"], lambda _s: DTD).abstraction)


def test_query_back_translates(files, capsys, tmp_path):
    assert run("apt", "--dtd", files / "photons.dtd", "--query", files / "subs" / "q1.xq") == 0
    (tmp_path / "apt.json").write_text(capsys.readouterr().out)
    assert run("query", "--apt", tmp_path / "apt.json") == 0
    text = capsys.readouterr().out
    assert "|det_time diff 60 step 40|" in text and "let $a1 := avg($w/en)" in text


def test_run_outputs_are_identical_in_every_sharing_mode(files):
    outputs = {}
    for mode in ("none", "match", "widen"):
        out = files / f"out-{mode}"
        assert run("run", "--dtd", files / "photons.dtd", "--subscriptions", files / "subs", "--items",
                   files / "items.xml", "--out-dir", out, "--sharing", mode) == 0
        outputs[mode] = {n: (out / f"{n}.xml").read_text() for n in PAPER_QUERIES}
        stats = json.loads((out / "stats.json").read_text())
        assert stats["sharing"] == mode and stats["dead_letters"] == 1
        assert {"groups", "subscriptions_sharing", "stream_bytes", "input_bytes", "cpu_s"} <= set(stats)
        (dead,) = [json.loads(x) for x in (out / "dead_letters.ndjson").read_text().splitlines()]
        assert dead["index"] == 900 and "does not follow the DTD" in dead["reason"]
    assert outputs["none"] == outputs["match"] == outputs["widen"]
    q1 = outputs["none"]["q1"].splitlines()
    assert q1[0] == "<photons>" and q1[-1] == "</photons>" and all(x.startswith("<avg_en>") for x in q1[1:-1])
    assert len(outputs["none"]["q4"].splitlines()) > 100


def test_run_joins_from_interleaved_items(tmp_path):
    (tmp_path / "photons.dtd").write_text(PHOTONS_DTD)
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, text in JOIN_QUERIES.items():
        (subs / f"{name}.xq").write_text(text)
    a = [("photon1", x) for x in photon_items(80, seed=1)] + [("photon2", x) for x in photon_items(80, seed=2)]
    a.sort(key=lambda p: float(p[1].split("<det_time>")[1].split("<")[0]))
    (tmp_path / "items.xml").write_text(
        "<interleaved>" + "".join(f'<item stream="{s}">{x}</item>' for s, x in a) + "</interleaved>")
    texts = {}
    for mode in ("none", "widen"):
        assert run("run", "--dtd", tmp_path / "photons.dtd", "--subscriptions", subs, "--items",
                   tmp_path / "items.xml", "--out-dir", tmp_path / mode, "--sharing", mode) == 0
        texts[mode] = {n: (tmp_path / mode / f"{n}.xml").read_text() for n in JOIN_QUERIES}
    assert texts["none"] == texts["widen"]
    assert json.loads((tmp_path / "widen" / "stats.json").read_text())["subscriptions_sharing"] == 3


def test_errors_name_the_file_and_place(files, capsys):
    bad = files / "bad.xq"
    bad.write_text('<r>{ for $p in stream("photons")/photons/photon\n where $p/coord > 1 return $p/en }</r>')
    assert run("apt", "--dtd", files / "photons.dtd", "--query", bad) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}: line 2, column 8:") and "exactly once" in err
    (files / "plain.xml").write_text(photons_document(3))
    (files / "subs" / "q5.xq").write_text(JOIN_QUERIES["q5"])
    assert run("run", "--dtd", files / "photons.dtd", "--subscriptions", files / "subs", "--items",
               files / "plain.xml", "--out-dir", files / "o") == 2
    assert "<interleaved>" in capsys.readouterr().err
