"""The Pathway dataflow's output as kwmonitor events: what lets the two be compared op by op.

The dataflow writes, per query, one jsonlines row per update of a CN's
bindings: ``{"cn", "bound", "time", "diff"}`` (``bound[p]`` is the key at
position ``p`` of the query's CN ``cn`` in the join plan). Pathway
consolidates the updates of one time, so each row is the net change of one
binding at one op: it becomes an ``add`` or ``remove`` event of ``python -m
streaming run``'s format at the op's seq, removes first.
"""

from __future__ import annotations

import json
from typing import IO, Any, Callable, Iterable

from streaming.cli.run import event_line
from streaming.evaluate.results import Result, make_result

__all__ = ["OutputError", "result_of_binding", "write_events"]


class OutputError(ValueError):
    """An output row that is no result: a tuple bound twice, or a net diff other than +1 or -1."""


def result_of_binding(cn: dict[str, Any], bound: list[Any]) -> Result:
    """The result a CN's binding stands for (``cn``: ``{"tuples", "edges"}`` of the join plan)."""
    tuples = [(relation, key) for relation, key in zip(cn["tuples"], bound, strict=True)]
    edges = [(tuples[holder], tuples[referenced], fk) for holder, referenced, fk in cn["edges"]]
    result = make_result(tuples, edges)
    if result is None:
        raise OutputError(f"a binding of CN {cn['tuples']} holds one tuple twice: {bound}")
    return result


def write_events(cns: list[dict[str, Any]], rows: Iterable[str], seq_of_time: Callable[[int], int],
                 out: IO[str]) -> int:
    """Write the events of one query's output ``rows`` (jsonlines) to ``out``; return how many."""
    changes: dict[int, dict[Result, int]] = {}
    for line in rows:
        row = json.loads(line)
        net = changes.setdefault(seq_of_time(row["time"]), {})
        result = result_of_binding(cns[row["cn"]], row["bound"])
        net[result] = net.get(result, 0) + row["diff"]
    written = 0
    for seq in sorted(changes):
        diffs = changes[seq]
        odd = [(r, d) for r, d in diffs.items() if d not in (-1, 0, 1)]
        if odd:
            raise OutputError(f"op {seq}: a result changes by {odd[0][1]}: {odd[0][0]}")
        for kind, sign in (("remove", -1), ("add", 1)):
            for result in sorted((r for r, d in diffs.items() if d == sign), key=lambda r: (r.tuples, r.edges)):
                out.write(event_line(seq, kind, result) + "\n")
                written += 1
    return written
