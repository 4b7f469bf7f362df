"""Hypothesis strategies: random WXQuery subscriptions on the photons stream, and random photon streams."""

from __future__ import annotations

from hypothesis import strategies as st
from lxml import etree

from streaming.workloads.photons import PHOTONS_DTD, photon_items
from streaming.xmlstream.dtd import StreamDTD

DTD = StreamDTD.from_text(PHOTONS_DTD)
LEAVES = ["coord/cel/ra", "coord/cel/dec", "coord/det/dx", "coord/det/dy", "phc", "en", "det_time"]
RANGES = {"coord/det/dx": (0, 511), "coord/det/dy": (0, 511), "en": (0.1, 2.4), "phc": (0, 255)}
OPS = ["<", "<=", ">", ">=", "=", "!="]


def dtds(_stream: str) -> StreamDTD:
    return DTD


@st.composite
def constants(draw, leaf: str) -> str:
    lo, hi = RANGES[leaf]
    if leaf == "en":
        return repr(round(draw(st.floats(lo, hi)), 1))
    return str(draw(st.integers(lo, hi)))


@st.composite
def conditions(draw, prefix: str, depth: int = 2) -> str:
    """A condition on dx, dy, en, phc: comparisons combined with and/or."""
    if depth == 0 or draw(st.booleans()):
        leaf = draw(st.sampled_from(sorted(RANGES)))
        return f"{prefix}{leaf} {draw(st.sampled_from(OPS))} {draw(constants(leaf))}"
    parts = draw(st.lists(conditions(prefix, depth - 1), min_size=2, max_size=3))
    return "(" + f" {draw(st.sampled_from(['and', 'or']))} ".join(parts) + ")"


@st.composite
def item_subscriptions(draw) -> str:
    outputs = draw(st.lists(st.sampled_from(LEAVES + ["coord"]), min_size=1, max_size=4, unique=True))
    pre = f"[{draw(conditions(''))}]" if draw(st.booleans()) else ""
    where = f"where {draw(conditions('$p/'))}" if draw(st.booleans()) else ""
    returned = " ".join(f"{{ $p/{o} }}" for o in outputs)
    form = draw(st.integers(0, 2))
    if form == 0:
        body = f"<r>{returned}</r>"
    elif form == 1:
        other = draw(st.sampled_from(LEAVES))
        body = f"if ({draw(conditions('$p/'))}) then <a>{returned}</a> else <b>{{ $p/{other} }}</b>"
    else:
        extra = draw(st.sampled_from(LEAVES))
        body = f"<r>{returned}{{ if ({draw(conditions('$p/'))}) then $p/{extra} else () }}</r>"
    return (f'<photons>{{ for $p in stream("photons")/photons/photon{pre} {where} '
            f"return {body} }}</photons>")


@st.composite
def windows(draw) -> str:
    if draw(st.booleans()):
        size = draw(st.integers(1, 6))
        return f"|count {size} step {draw(st.integers(1, 6))}|"
    size = draw(st.sampled_from([2, 4, 5, 6, 10, 20]))
    return f"|det_time diff {size} step {draw(st.sampled_from([1, 2, 3, 5, 10]))}|"


@st.composite
def window_subscriptions(draw) -> str:
    window = draw(windows())
    pre = f"[{draw(conditions(''))}]" if draw(st.booleans()) else ""
    if draw(st.integers(0, 4)) == 0:
        leaf = draw(st.sampled_from(LEAVES))
        return (f'<photons>{{ for $w in stream("photons")/photons/photon{pre} {window} '
                f"return <win>{{ $w/{leaf} }}</win> }}</photons>")
    lets = []
    for i in range(draw(st.integers(1, 2))):
        function = draw(st.sampled_from(["avg", "sum", "min", "max", "count"]))
        leaf = draw(st.sampled_from(sorted(RANGES)))
        argument = "$w" if function == "count" and draw(st.booleans()) else f"$w/{leaf}"
        if "diff" in window and argument != "$w" and draw(st.integers(0, 3)) == 0:
            argument = f"$w/{leaf}[. >= {draw(constants(leaf))}]"
        lets.append(f"let $a{i} := {function}({argument})")
    conds = []
    if draw(st.booleans()):
        conds.append(f"$a0 >= {draw(st.sampled_from(['0.5', '1.0', '1.3', '3', '100']))}")
    if draw(st.integers(0, 2)) == 0:
        conds.append(draw(conditions("$w/", 1)))
    where = f"where {' and '.join(conds)}" if conds else ""
    values = " ".join(f"{{ $a{i} }}" for i in range(len(lets)))
    if draw(st.booleans()):
        body = f"<agg>{values}</agg>"
    else:
        body = f"if ($a0 > {draw(st.sampled_from(['0.8', '1.2', '2']))}) then <hi>{values}</hi> else <lo>{values}</lo>"
    return (f'<photons>{{ for $w in stream("photons")/photons/photon{pre} {window} '
            f"{' '.join(lets)} {where} return {body} }}</photons>")


subscriptions = st.one_of(item_subscriptions(), window_subscriptions())


@st.composite
def photon_streams(draw, stream: str = "photons") -> list[tuple[str, etree._Element]]:
    count = draw(st.integers(0, 60))
    seed = draw(st.integers(0, 10_000))
    rate = draw(st.sampled_from([0.5, 1.0, 3.0]))
    return [(stream, etree.fromstring(x)) for x in photon_items(count, seed=seed, rate=rate, vela=0.5)]


@st.composite
def join_subscriptions(draw, kind: str) -> str:
    def window() -> str:
        if kind == "count":
            return f"|count {draw(st.sampled_from([2, 3, 4, 6]))} step {draw(st.sampled_from([1, 2, 3]))}|"
        return f"|det_time diff {draw(st.sampled_from([4, 5, 10, 15, 20, 30]))} step {draw(st.sampled_from([5, 10, 15]))}|"
    join = draw(st.sampled_from(["$x/en >= $y/en", "$x/en >= $y/en + 0.5", "$x/phc < $y/phc - 20",
                                 "$x/en - 0.3 <= $y/en", "($x/en >= $y/en or $x/phc > $y/phc)"]))
    conds = [join]
    if draw(st.booleans()):
        conds.append(draw(conditions("$x/", 1)))
    if draw(st.booleans()):
        conds.append(draw(conditions("$y/", 1)))
    pre = f"[{draw(conditions(''))}]" if draw(st.integers(0, 3)) == 0 else ""
    xs = draw(st.lists(st.sampled_from(LEAVES), min_size=1, max_size=2, unique=True))
    ys = draw(st.lists(st.sampled_from(LEAVES), min_size=1, max_size=2, unique=True))
    returned = " ".join([f"{{ $x/{o} }}" for o in xs] + [f"{{ $y/{o} }}" for o in ys])
    return (f'<photons>{{ for $x in stream("photon1")/photons/photon{pre} {window()} '
            f'for $y in stream("photon2")/photons/photon {window()} '
            f"where {' and '.join(conds)} return <pair>{returned}</pair> }}</photons>")


@st.composite
def two_streams(draw) -> list[tuple[str, etree._Element]]:
    a = [etree.fromstring(x) for x in photon_items(draw(st.integers(0, 40)), seed=draw(st.integers(0, 999)), rate=1.0)]
    b = [etree.fromstring(x) for x in photon_items(draw(st.integers(0, 40)), seed=draw(st.integers(0, 999)), rate=1.0)]
    merged = [("photon1", x) for x in a] + [("photon2", y) for y in b]
    return sorted(merged, key=lambda p: float(p[1].findtext("det_time")))


JUMPS = [3.0, 17.0, 50.0, 1e3, 1e9, 1e15]


@st.composite
def with_jumps(draw, items: list[tuple[str, etree._Element]]) -> list[tuple[str, etree._Element]]:
    """``items`` with up to four jumps of det_time (seconds to 1e15) at random places: every later item
    moves by the jumps before it, so det_time stays non-decreasing in arrival order."""
    places = draw(st.lists(st.tuples(st.integers(0, max(len(items) - 1, 0)), st.sampled_from(JUMPS)), max_size=4))
    for index, (_, item) in enumerate(items):
        shift = sum(jump for place, jump in places if place <= index)
        if shift:
            item.find("det_time").text = repr(float(item.findtext("det_time")) + shift)
    return items
