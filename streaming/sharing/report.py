"""What sharing saves, measured on a running engine (the Sharing page and the batch metrics).

For each class: its merged properties, members, lattice size, state (tuples
in sub-relations) and results (produced, and produced for no member: the
price of widening, which narrowing recovers). Against evaluating every
query alone ("data shipping") the totals compare, at this moment:

* stored tuples: the one shared store against one store per query holding
  the tuples of its own window;
* lattice nodes: the one lattice of every keyword set (a sub-CN stored once
  for all) against one lattice per keyword query;
* engine evaluations per op: the class evaluations the engine made against
  one evaluation per query per op.

A stream run by several evaluators has one report per evaluator
(``bus.read_sharing_report`` merges them); each class says its
evaluator and its measured work (``busy_seconds``: time spent evaluating
ops), from which placement estimates its cost.
"""

from __future__ import annotations

import bisect
from typing import Any

from ..events import SharingReport
from .classes import KeywordClass
from .engine import SharedEngine

__all__ = ["sharing_report"]


def sharing_report(engine: SharedEngine, stream_id: int, now: float, evaluator: int | None = None,
                   plan_version: int = 0) -> SharingReport:
    times = sorted(row.ts for rows in engine.store.rows.values() for row in rows.values())
    clock = engine.last_ts

    def in_window(window: float | None) -> int:
        if window is None or clock is None:
            return len(times)
        return len(times) - bisect.bisect_right(times, clock - window)

    classes: list[dict[str, Any]] = []
    alone_nodes = alone_tuples = 0
    engine.apportion_busy()
    for cls in engine.live_classes():
        members = sorted(cls.members.values(), key=lambda q: q.id)
        nodes = len(engine.network.plan.nodes_of(cls.kid)) if isinstance(cls, KeywordClass) else 0
        member_nodes = sum(len(engine.lattice(len(q.keywords), q.tmax)) for q in members if q.keywords)
        alone_nodes += member_nodes
        member_tuples = sum(in_window(q.window) for q in members)
        alone_tuples += member_tuples
        stats = cls.stats()
        classes.append({
            "class": cls.index,
            "evaluator": evaluator,
            "busy_seconds": stats["busy_seconds"],
            "properties": cls.props.to_json(),
            "members": [q.id for q in members],
            "lattice_nodes": nodes,
            "lattice_nodes_alone": member_nodes,
            "view_tuples": in_window(cls.props.window),
            "stored_tuples_alone": member_tuples,
            "subrelation_tuples": stats.get("subrelation_tuples", stats.get("live_results", 0)),
            "class_results": stats["class_results"],
            "produced": stats["produced"],
            "undelivered": stats["undelivered"],
        })
    queries = len(engine.queries)
    applied = engine.applied
    totals = {
        "queries": queries,
        "classes": len(classes),
        "queries_sharing": queries - len(classes),
        "stored_tuples": len(engine.store),
        "stored_tuples_alone": alone_tuples,
        "lattice_nodes": engine.network.plan.live_nodes,
        "lattice_nodes_alone": alone_nodes,
        "ops": applied,
        "evaluations_per_op": engine.class_evaluations / applied if applied else 0.0,
        "evaluations_per_op_alone": float(queries),
    }
    aggregates = [cls.stats() for cls in engine.aggregate_classes]
    return SharingReport(stream=stream_id, evaluator=evaluator, plan_version=plan_version, sharing=engine.mode,
                         classes=classes, aggregate_classes=aggregates, totals=totals, ts=now)
