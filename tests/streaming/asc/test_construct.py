"""ASC construction (Def. 1, Sect. 4.1): regions, query-usage, query-result and candidate-arrow bitmaps."""

from __future__ import annotations

from streaming.asc.construct import AscIndex

QUERIES = {
    "q1": [{"attribute": "A1", "op": "<", "value": 30}, {"attribute": "A3", "op": "=", "value": 5}],
    "q2": [{"attribute": "A1", "op": "between", "value": [10, 70]}],
    "q3": [{"attribute": "A2", "op": ">=", "value": 20}],
    "q4": [{"attribute": "A1", "op": "!=", "value": 70}, {"attribute": "A2", "op": "=", "value": 20}],
}


def test_regions_and_bitmaps():
    idx = AscIndex.build(QUERIES)
    a1, a3, a2 = idx.ascs
    assert [a.attribute for a in idx.ascs] == ["A1", "A3", "A2"]  # order of first use
    assert a1.constants == (10.0, 30.0, 70.0) and a1.regions == 2 * 3 + 2
    assert a1.qub == 0b1011 and a2.qub == 0b1100 and a3.qub == 0b0001
    # regions of A1: (-inf,10) {10} (10,30) {30} (30,70) {70} (70,inf) null; q3 never fails here
    assert [format(b, "04b") for b in a1.qrb] == [
        "1101", "1111", "1111", "1110", "1110", "0110", "1100", "0100"]
    assert a2.qrb[a2.region(20.0)] == 0b1111 and a2.qrb[a2.region(25.0)] == 0b0111
    assert a2.qrb[a2.region(None)] == 0b0011
    # cab (bit = ASC position): after A1 region {70} only q2 and q3 are alive,
    # so only A2 (position 2) can fail one of them; region 0 leaves q1 for A3 too
    assert a1.cab[5] == 0b100
    assert a1.cab[0] == 0b110


def test_region_of_boundaries():
    idx = AscIndex.build({"q": [{"attribute": "x", "op": "between", "value": [2, 4]}]})
    a = idx.ascs[0]
    assert [a.region(v) for v in (1.0, 2.0, 3.0, 4.0, 5.0, None)] == [0, 1, 2, 3, 4, 5]


def test_text_attribute_regions():
    idx = AscIndex.build({"q": [{"attribute": "s", "op": "<", "value": "m"}],
                          "r": [{"attribute": "s", "op": "=", "value": "dress"}]})
    a = idx.ascs[0]
    assert a.qrb[a.region("dress")] == 0b11
    assert a.qrb[a.region("zebra")] == 0b00
    assert idx.query_names(a.qrb[a.region("apple")]) == ["q"]


def test_json_round_trip():
    idx = AscIndex.build(QUERIES, relation="R")
    again = AscIndex.from_json(idx.to_json())
    assert again.ascs == idx.ascs and again.query_ids == idx.query_ids and again.relation == "R"


def test_hundreds_of_queries_use_wide_bitmaps():
    queries = {f"q{j}": [{"attribute": "x", "op": ">=", "value": j}] for j in range(300)}
    a = AscIndex.build(queries).ascs[0]
    assert bin(a.qrb[a.region(150.0)]).count("1") == 151
