"""The paper's own examples (002): APTs of q1-q4 (Figure 4), APFs of q5-q8 (Figure 12), the matchings of
Sect. 4.4 and the join-sharing cases of Sect. 5.3.2."""

from __future__ import annotations

import pytest

from streaming.wxquery.apt import APF, APT
from streaming.wxquery.matching import join_case, match_or_merge, matches, merge, same_abstraction, shape
from streaming.wxquery.predicates import parse_dnf
from streaming.wxquery.translate import compile_text
from streaming.workloads.photons import JOIN_QUERIES, PAPER_QUERIES, PHOTONS_DTD
from streaming.xmlstream.dtd import StreamDTD

DTD = StreamDTD.from_text(PHOTONS_DTD)


def dtds(_stream: str) -> StreamDTD:
    return DTD


def apt(name: str) -> APT | APF:
    return compile_text({**PAPER_QUERIES, **JOIN_QUERIES}[name], dtds).abstraction


P = "/photons/photon"
VELA = parse_dnf([[(f"{P}/coord/cel/ra", ">=", 120.0), (f"{P}/coord/cel/ra", "<=", 138.0),
                   (f"{P}/coord/cel/dec", ">=", -49.0), (f"{P}/coord/cel/dec", "<=", -40.0)]])
RXJ = parse_dnf([[(f"{P}/en", ">=", 1.3), (f"{P}/coord/cel/ra", ">=", 130.5), (f"{P}/coord/cel/ra", "<=", 135.5),
                  (f"{P}/coord/cel/dec", ">=", -48.0), (f"{P}/coord/cel/dec", "<=", -45.0)]])


def test_q1_apt_as_figure_4a():
    t = apt("q1")
    assert t.paths() == ["/photons", P, f"{P}/coord", f"{P}/coord/cel", f"{P}/coord/cel/ra",
                         f"{P}/coord/cel/dec", f"{P}/en", f"{P}/det_time"]
    w = t.window
    assert (w.kind, w.reference, w.size, w.step) == ("time", f"{P}/det_time", 60, 40)
    assert same_pred(w.pre, VELA)
    (g,) = t.aggregates
    assert (g.function, g.path, g.output) == ("avg", f"{P}/en", True)
    assert str(g.selection) == "avg(/photons/photon/en) >= 1.3"
    assert t.outputs() == {}  # only the aggregate carries the output marker
    assert shape(t) == "aggregates"


def same_pred(a, b) -> bool:
    from streaming.wxquery.predicates import equivalent
    return equivalent(a, b)


def test_q2_apt_as_figure_4b():
    t = apt("q2")
    assert (t.window.size, t.window.step) == (20, 10)
    (g,) = t.aggregates
    assert g.selection.is_true and g.output


def test_q3_q4_apts_pull_the_selection_up_to_photon():
    for name, cond, outs in (("q3", RXJ, ["coord/cel/ra", "coord/cel/dec", "en", "det_time"]),
                             ("q4", VELA, ["coord/cel/ra", "coord/cel/dec", "phc", "en", "det_time"])):
        t = apt(name)
        photon = t.tree.children[0]
        assert same_pred(photon.selection, cond)
        assert list(t.outputs()) == [f"{P}/{o}" for o in outs]  # DTD order
        assert all(n.selection is None for _, n, _ in t.nodes() if n is not photon and n.name != "photons")
        assert shape(t) == "items"


def test_json_round_trip():
    for name in ("q1", "q3", "q5"):
        t = apt(name)
        assert type(t).model_validate_json(t.model_dump_json()) == t


# -- Sect. 4.4 -----------------------------------------------------------------------------------

def test_q2_serves_q1_without_widening():
    assert matches(apt("q2"), apt("q1"), dtds)


def test_q1_with_q2_merges_to_q2s_apt():
    assert not matches(apt("q1"), apt("q2"), dtds)
    merged = merge(apt("q1"), apt("q2"), dtds)
    assert same_abstraction(merged, apt("q2"))


def test_q4_serves_q3():
    assert matches(apt("q4"), apt("q3"), dtds)


def test_q3_with_q4_widens_adding_phc_and_relaxing_the_predicate():
    assert not matches(apt("q3"), apt("q4"), dtds)
    matched, merged = match_or_merge(apt("q3"), apt("q4"), dtds)
    assert not matched
    assert f"{P}/phc" in merged.outputs()
    assert same_abstraction(merged, apt("q4"))


@pytest.mark.parametrize("stream,query", [("q3", "q1"), ("q1", "q3")])
def test_q3_with_q1_removes_window_and_aggregate(stream, query):
    merged = merge(apt(stream), apt(query), dtds)
    assert merged.window is None and not merged.aggregates
    photon = merged.tree.children[0]
    assert same_pred(photon.selection, VELA)  # q3's predicate relaxed to q1's window pre-selection
    assert list(merged.outputs()) == [f"{P}/{o}" for o in ("coord/cel/ra", "coord/cel/dec", "en", "det_time")]
    assert matches(merged, apt("q1"), dtds) and matches(merged, apt("q3"), dtds)


# -- Sect. 5 -------------------------------------------------------------------------------------

def test_q5_apf_as_figure_12a():
    f = apt("q5")
    assert [t.stream for t in f.trees] == ["photon1", "photon2"]
    assert [(t.window.size, t.window.step) for t in f.trees] == [(10, 5), (20, 10)]
    assert str(f.join.predicate) == 'stream("photon1")/photons/photon/en >= stream("photon2")/photons/photon/en + 0.5'
    assert set(f.join.parents) == {f'stream("photon{i}")/photons/photon/{e}' for i in (1, 2) for e in ("en", "phc")}


def test_join_cases():
    assert join_case(apt("q5"), apt("q6")) == "full"
    assert join_case(apt("q5"), apt("q7")) == "selective"
    assert join_case(apt("q5"), apt("q8")) == "windows"


def test_full_join_sharing_q5_q6_relaxes_the_join_condition_to_q6s():
    merged = merge(apt("q5"), apt("q6"), dtds)
    assert same_pred(merged.join.predicate, apt("q6").join.predicate)
    assert [(t.window.size, t.window.step) for t in merged.trees] == [(10, 5), (20, 10)]
    assert matches(merged, apt("q5")) and matches(merged, apt("q6"))


def test_selective_join_sharing_q5_q7_takes_the_larger_sizes():
    merged = merge(apt("q5"), apt("q7"), dtds)
    assert [(t.window.size, t.window.step) for t in merged.trees] == [(30, 5), (20, 10)]
    assert matches(merged, apt("q5")) and matches(merged, apt("q7"))


def test_selective_window_sharing_q5_q8_relaxes_windows_and_drops_the_join():
    merged = merge(apt("q5"), apt("q8"), dtds)
    assert merged.join is None
    assert [(t.window.size, t.window.step) for t in merged.trees] == [(5, 5), (10, 5)]
    assert matches(merged, apt("q5")) and matches(merged, apt("q8"))


# -- results: every sharing equals evaluating each subscription alone ---------------------------

def _photons(count: int, seed: int):
    from lxml import etree

    from streaming.workloads.photons import photon_items
    return [("photons", etree.fromstring(x)) for x in photon_items(count, seed=seed)]


def _two_streams(count: int):
    from lxml import etree

    from streaming.workloads.photons import photon_items
    a = [("photon1", etree.fromstring(x)) for x in photon_items(count, seed=1)]
    b = [("photon2", etree.fromstring(x)) for x in photon_items(count, seed=2)]
    return sorted(a + b, key=lambda p: float(p[1].findtext("det_time")))


def _run(names: list[str], items, mode: str):
    from streaming.wxquery.run import run_subscriptions
    subs = [(n, compile_text({**PAPER_QUERIES, **JOIN_QUERIES}[n], dtds)) for n in names]
    return run_subscriptions(subs, items, mode, dtds)


@pytest.mark.parametrize("names,kind", [(["q2", "q1"], "aggregates"), (["q4", "q3"], "items"),
                                        (["q3", "q4"], "items"), (["q3", "q1"], "items"),
                                        (["q1", "q2", "q3", "q4"], "items")])
def test_q1_to_q4_shared_results_equal_alone(names, kind):
    items = _photons(1500, seed=3)
    alone = _run(names, items, "none").results
    widened = _run(names, items, "widen")
    assert widened.results == alone and all(alone.values())
    assert [g["kind"] for g in widened.stats["groups"]] == [kind]
    assert widened.stats["subscriptions_sharing"] == len(names) - 1


def test_q2_q1_share_one_relaxed_window():
    result = _run(["q2", "q1"], _photons(1500, seed=3), "match")
    (group,) = result.stats["groups"]
    assert group["kind"] == "aggregates" and group["members"] == ["q2", "q1"] and group["widened"] == 0


@pytest.mark.parametrize("pair,kind", [(("q5", "q6"), "join"), (("q5", "q7"), "join"), (("q5", "q8"), "windows")])
def test_join_sharing_cases_equal_alone(pair, kind):
    items = _two_streams(150)
    alone = _run(list(pair), items, "none").results
    shared = _run(list(pair), items, "widen")
    assert shared.results == alone and all(alone.values())
    assert [g["kind"] for g in shared.stats["groups"]] == [kind]


def test_relax_window_example_4_1_through_merging():
    """Example 4.1: windows (45, 30) and (30, 20) relax to (15, 5)."""
    def q(size: int, step: int) -> str:
        return (f'<r>{{ for $w in stream("photons")/photons/photon |det_time diff {size} step {step}| '
                f"let $a := sum($w/en) return <s>{{ $a }}</s> }}</r>")
    merged = merge(compile_text(q(45, 30), dtds).abstraction, compile_text(q(30, 20), dtds).abstraction, dtds)
    assert (merged.window.size, merged.window.step) == (15, 5)
    items = _photons(600, seed=9)
    from streaming.wxquery.run import run_subscriptions
    subs = [("a", compile_text(q(45, 30), dtds)), ("b", compile_text(q(30, 20), dtds))]
    assert run_subscriptions(subs, items, "widen", dtds).results == run_subscriptions(subs, items, "none", dtds).results


def test_narrowing_after_a_subscription_leaves():
    from streaming.wxquery.planner import leave, plan_groups
    subs = [(n, compile_text(PAPER_QUERIES[n], dtds)) for n in ("q3", "q4")]
    (group,) = plan_groups(subs, "widen", dtds)
    assert f"{P}/phc" in group.abstraction.outputs()
    narrowed = leave(group, "q4", dtds)
    assert same_abstraction(narrowed.abstraction, apt("q3"))
    assert leave(narrowed, "q3", dtds) is None
