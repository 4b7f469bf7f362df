"""The reference a fault test holds its results to: a query's changes over the lines the client sent.

Computed by the reference engine (``streaming.engine.KeywordEngine``) over
the lines in the order they were sent, line ``i`` having seq ``i``, never
from what the product stored. Changes are compared seq by seq as multisets
of (add/remove, result), in seq order, so a change lost and another
duplicated never balance out.
"""

from __future__ import annotations

import json
from collections import Counter

from streaming.cli.compare import event_key
from streaming.engine import KeywordEngine
from streaming.ops import OpRejected, parse_op
from streaming.schema import Schema

__all__ = ["Change", "reference_changes", "change_of", "by_seq", "live_after", "differences", "feed_differences"]

Change = tuple[int, str, tuple]  # (seq, "add" or "remove", the result's identity)


def reference_changes(schema: Schema, keywords: str, tmax: int, lines: list[str],
                      window_seconds: float | None = None) -> list[Change]:
    """The changes of the query ``keywords``/``tmax`` (and window) over the sent lines, seq i being line i."""
    engine = KeywordEngine(schema, keywords, tmax, window_seconds)
    out = []
    for seq, line in enumerate(lines):
        try:
            changes = engine.apply(parse_op(json.loads(line), schema))
        except OpRejected as exc:
            changes = exc.changes
        out += [(seq, c.type, event_key(c.result.to_json())) for c in changes]
    return out


def change_of(seq: int, kind: str, result: dict) -> Change:
    """A published change (a feed message's or a history row's seq, type and result) as a reference change."""
    return (seq, kind.removeprefix("result."),
            event_key({"tuples": [[t["relation"], t["key"]] for t in result["tuples"]], "edges": result["edges"]}))


def by_seq(changes: list[Change]) -> list[tuple[int, Counter]]:
    """Changes grouped by seq, in order: (seq, multiset of (kind, result)); a seq that goes back fails."""
    groups: list[tuple[int, Counter]] = []
    for seq, kind, key in changes:
        if not groups or groups[-1][0] != seq:
            assert not groups or seq > groups[-1][0], f"seq {seq} after {groups[-1][0]}"
            groups.append((seq, Counter()))
        groups[-1][1][(kind, key)] += 1
    return groups


def live_after(reference: list[Change], seq: int) -> set:
    """The reference's live set once every op up to ``seq`` is applied."""
    live: set = set()
    for s, _, key in reference:
        if s > seq:
            break
        live.symmetric_difference_update({key})
    return live


def differences(reference: list[Change], changes: list[Change]) -> dict[str, int]:
    """What ``changes`` lack of the reference and hold twice or beyond it, counted change by change (seq, kind,
    result): a loss and a duplicate never balance out."""
    want, got = Counter(reference), Counter(changes)
    return {"lost": sum((want - got).values()), "duplicated": sum((got - want).values())}


def feed_differences(reference: list[Change], messages: list[dict]) -> dict[str, int]:
    """A feed client's messages (snapshots, each followed by changes) against the reference, counted rather than
    asserted (``tests.faults.pipeline.check_feed`` asserts): results a snapshot has that the reference's live set
    at its seq has not, or lacks (``snapshot_wrong``); changes after each snapshot lost or duplicated against the
    reference's changes after it, up to the last change received before the next snapshot (whose seq may be cut
    short by the drop) or, for the last stretch, to the reference's end."""
    starts = [i for i, m in enumerate(messages) if m["type"] == "snapshot"] + [len(messages)]
    out = {"snapshots": len(starts) - 1, "snapshot_wrong": 0, "lost": 0, "duplicated": 0}
    if not messages or messages[0]["type"] != "snapshot":
        out["lost"] = len(reference)
        return out
    for first, end in zip(starts, starts[1:]):
        snapshot, last = messages[first], end == len(messages)
        at = snapshot["last_seq"] if snapshot["last_seq"] is not None else -1
        live = {change_of(0, "add", r)[2] for r in snapshot["results"]}
        out["snapshot_wrong"] += len(live ^ live_after(reference, at))
        got = [change_of(m["seq"], m["type"], m["result"]) for m in messages[first + 1:end]]
        upto = float("inf") if last else max((seq for seq, _, _ in got), default=at)
        want = [c for c in reference if at < c[0] <= upto]
        if not last and got:  # the connection may have dropped within the last seq of the stretch
            cut = Counter(c for c in got if c[0] == upto) & Counter(c for c in want if c[0] == upto)
            want = [c for c in want if c[0] < upto] + list(cut.elements())
        found = differences(want, got)
        out["lost"] += found["lost"]
        out["duplicated"] += found["duplicated"]
    return out
