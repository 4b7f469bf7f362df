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

__all__ = ["Change", "reference_changes", "change_of", "by_seq", "live_after"]

Change = tuple[int, str, tuple]  # (seq, "add" or "remove", the result's identity)


def reference_changes(schema: Schema, keywords: str, tmax: int, lines: list[str]) -> list[Change]:
    """The changes of the query ``keywords``/``tmax`` over the sent lines, seq i being line i."""
    engine = KeywordEngine(schema, keywords, tmax)
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
