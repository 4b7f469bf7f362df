"""Reference MTJNT enumerator, written independently of the CN and lattice code.

It knows nothing of candidate networks: after every op it enumerates, over
the live tuples, every tree of distinct tuples joined by foreign-key
references with at most ``tmax`` tuples whose keyword sets are pairwise
disjoint, cover the query and put a keyword in every leaf (docs/results.md). Replaying a stream gives the expected add/remove events.
Exponential on purpose: meant for the small random cases of the tests.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from streaming.schema import Schema, ValueRejected

__all__ = ["tuple_mask", "enumerate_results", "BruteForceStream", "replay"]

_TOKEN = re.compile(r"[^\W_]+")

Node = tuple[str, Any]
Edge = tuple[Node, Node, str]
ResultKey = tuple[tuple[Node, ...], tuple[Edge, ...]]


def tuple_mask(schema: Schema, relation: str, values: dict, keywords: list[str]) -> int:
    """Keyword bitmask of a tuple, from the schema's types (text, not key, not FK column)."""
    rel = schema.relations[relation]
    fk_cols = {fk.column for fk in rel.foreign_keys}
    toks: set[str] = set()
    for attr, typ in rel.attributes.items():
        if typ == "text" and attr != rel.key and attr not in fk_cols and isinstance(values.get(attr), str):
            toks.update(_TOKEN.findall(values[attr].casefold()))
    return sum(1 << i for i, k in enumerate(keywords) if k in toks)


def enumerate_results(schema: Schema, keywords: list[str], tmax: int, live: dict[Node, dict]) -> set[ResultKey]:
    """Every MTJNT over ``live`` ((relation, key) -> values), as (sorted tuples, sorted edges)."""
    full = (1 << len(keywords)) - 1
    mask = {node: tuple_mask(schema, node[0], values, keywords) for node, values in live.items()}
    adjacent: dict[Node, list[tuple[Node, Edge]]] = {node: [] for node in live}
    for node, values in live.items():
        for fk in schema.relations[node[0]].foreign_keys:
            target = (fk.target, values.get(fk.column))
            if target in live and target != node:
                edge = (node, target, fk.name)
                adjacent[node].append((target, edge))
                adjacent[target].append((node, edge))
    out: set[ResultKey] = set()
    seen: set[tuple[frozenset, frozenset]] = set()
    frontier = []
    for node, m in mask.items():
        if m:
            state = (frozenset([node]), frozenset())
            seen.add(state)
            frontier.append((state, m))
    while frontier:
        nxt = []
        for (nodes, edges), used in frontier:
            if used == full and _leaves_have_keywords(nodes, edges, mask):
                out.add((tuple(sorted(nodes)), tuple(sorted(edges))))
            if len(nodes) == tmax:
                continue
            for node in nodes:
                for other, edge in adjacent[node]:
                    if other in nodes or mask[other] & used:
                        continue
                    state = (nodes | {other}, edges | {edge})
                    if state not in seen:
                        seen.add(state)
                        nxt.append((state, used | mask[other]))
        frontier = nxt
    return out


def _leaves_have_keywords(nodes: frozenset, edges: frozenset, mask: dict) -> bool:
    degree = {node: 0 for node in nodes}
    for a, b, _ in edges:
        degree[a] += 1
        degree[b] += 1
    return all(mask[node] for node, d in degree.items() if d <= 1)


class BruteForceStream:
    """Applies ops with the stream rules of docs/ops.md and recomputes the live result set.

    The clock rule: an op of a known relation that is neither late nor
    outside the guard (``ts_min <= ts <= ts_max``, at most ``max_jump`` past
    the clock) moves the clock, and tuples whose window ended leave; only
    then is an insert of a live key or a delete of a missing key rejected.
    """

    def __init__(self, schema: Schema, keywords: Iterable[str], tmax: int, window: float | None = None,
                 ts_min: float = -62_135_596_800.0, ts_max: float = 253_402_300_799.0,
                 max_jump: float | None = 30 * 86_400.0):
        self.schema = schema
        self.keywords = [k.casefold() for k in keywords]
        self.tmax = tmax
        self.window = window
        self.ts_range = (ts_min, ts_max)
        self.max_jump = max_jump
        self.live: dict[Node, tuple[dict, float]] = {}
        self.last_ts: float | None = None
        self.results: set[ResultKey] = set()

    def apply(self, obj: Any) -> str | None:
        """Apply one op (decoded JSON); return a rejection reason or None."""
        if not isinstance(obj, dict) or obj.get("op") not in ("insert", "delete"):
            return "not an op"
        rel = self.schema.relations.get(obj.get("relation"))
        ts = obj.get("ts")
        if rel is None:
            return "unknown relation"
        if isinstance(ts, bool) or not isinstance(ts, (int, float)):
            return "bad ts"
        try:
            if obj["op"] == "insert":
                values = rel.validate_tuple(obj.get("tuple"))
                key = values[rel.key]
            else:
                key, values = rel.validate_key(obj.get("key")), None
        except (ValueRejected, KeyError):
            return "bad tuple"
        if self.last_ts is not None and ts < self.last_ts:
            return "late"
        if not self.ts_range[0] <= ts <= self.ts_range[1]:
            return "outside the range"
        if self.last_ts is not None and self.max_jump is not None and ts - self.last_ts > self.max_jump:
            return "jump"
        self.last_ts = ts
        self.live = {n: v for n, v in self.live.items() if self.window is None or v[1] + self.window > ts}
        node = (rel.name, key)
        if values is not None and node in self.live:
            return "duplicate"
        if values is None and node not in self.live:
            return "missing"
        if values is None:
            del self.live[node]
        else:
            self.live[node] = (values, ts)
        return None

    def current(self) -> set[ResultKey]:
        return enumerate_results(self.schema, self.keywords, self.tmax, {n: v for n, (v, _) in self.live.items()})


def replay(schema: Schema, keywords: Iterable[str], tmax: int, window: float | None, ops: list[Any]) -> list[dict]:
    """Expected events of a stream of decoded ops (seq = index in ``ops``); a rejected op that moved
    the clock reports the results its time ended."""
    stream = BruteForceStream(schema, keywords, tmax, window)
    events: list[dict] = []
    before: set[ResultKey] = set()
    for seq, obj in enumerate(ops):
        clock = stream.last_ts
        if stream.apply(obj) is not None and stream.last_ts == clock:
            continue
        after = stream.current()
        for kind, diff in (("remove", before - after), ("add", after - before)):
            for tuples, edges in sorted(diff):
                events.append({"seq": seq, "type": kind, "tuples": [list(t) for t in tuples],
                               "edges": [[list(a), list(b), f] for a, b, f in edges]})
        before = after
    return events


def load_ops(path: str) -> list[Any]:
    """Decoded ops of an NDJSON file (a malformed line becomes None)."""
    out = []
    for line in open(path, encoding="utf-8"):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                out.append(None)
    return out
