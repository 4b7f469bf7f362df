"""The group's selection predicates, evaluated with attribute selection constructs (issue 4, item 5).

Driver side, :class:`GroupSelection` holds one :class:`~streaming.asc.AscIndex`
per relation that some query of the group has predicates on, each with its
:class:`~streaming.asc.DroppingMonitor` (macro or hybrid sequence, period λ,
threshold μ). :meth:`GroupSelection.executor_plan` is the JSON the executors
get with each batch (index definitions, current sequences, sample rates);
executors run :class:`SelectionRunner` over the inserts of their partition
and send back, per tuple, the bitmap of the queries it satisfies (queries
are the bits of the plan, :mod:`streaming.sharing.admission`), and per
relation the statistics the monitor needs. Closed periods and rearrangements become
:class:`~streaming.events.DroppingRatio` and
:class:`~streaming.events.Rearrangement` payloads for the stream dashboard.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence as Seq

import numpy as np

from .asc import AscIndex, BatchEvaluator, DroppingMonitor, Sequence, split_by_relation
from .asc.vectorised import words_to_int
from .events import DroppingRatio, Rearrangement
from .schema import Schema

__all__ = ["GroupSelection", "SelectionRunner"]


class GroupSelection:
    """Per relation with predicates: the ASC index of the group's queries and its monitor."""

    def __init__(self, schema: Schema, predicates: Mapping[int, Seq[dict[str, Any]]], kind: str = "macro",
                 period: int = 10_000, mu: float = 0.1):
        by_relation = split_by_relation({str(q): list(p) for q, p in predicates.items()}, schema.relations)
        self.monitors: dict[str, DroppingMonitor] = {}
        for relation, queries in by_relation.items():
            if any(queries.values()):
                index = AscIndex.build(queries, schema.relations[relation].attributes, relation)
                self.monitors[relation] = DroppingMonitor(index, kind, period, mu, relation=relation)

    def executor_plan(self) -> dict[str, Any]:
        """What the executors need for the next batch (JSON)."""
        return {
            relation: {
                "index": m.index.to_json(),
                "sequence": m.sequence.to_json(m.index),
                "sample_rate": m.sample_rate,
            }
            for relation, m in self.monitors.items()
        }

    def observe(self, relation: str, stats: Mapping[str, Any]) -> None:
        """Feed one partition's statistics of ``relation`` to its monitor (it may rearrange)."""
        monitor = self.monitors.get(relation)
        if monitor is not None:
            monitor.observe(stats)

    def drain_events(self, stream_id: int, now: float) -> list[DroppingRatio | Rearrangement]:
        """Closed periods and rearrangements since the last call, as dashboard payloads."""
        out: list[DroppingRatio | Rearrangement] = []
        for relation, monitor in self.monitors.items():
            for event in monitor.drain_events():
                if event["type"] == "period":
                    out.append(DroppingRatio(stream=stream_id, relation=relation, period=event["period"],
                                             tuples=event["tuples"], dropped=event["dropped"], ratio=event["d"], ts=now))
                elif event["type"] == "rearrangement":
                    # The first sequence is chosen without data: it has no d_init (reported as 0).
                    out.append(Rearrangement(stream=stream_id, relation=relation, old_sequence=event["old"],
                                             new_sequence=event["new"], d_init=event["d_init"] or 0.0,
                                             d_cur=event["d_cur"], mu=event["mu"], ts=now))
        return out


class SelectionRunner:
    """Executor side: evaluates batches of one partition's inserts against the plan's constructs."""

    def __init__(self, plan: Mapping[str, Any]):
        self.relations: dict[str, tuple[BatchEvaluator, Sequence, float]] = {}
        for relation, doc in plan.items():
            evaluator = BatchEvaluator(AscIndex.from_json(doc["index"]))
            self.relations[relation] = (evaluator, Sequence.from_json(doc["sequence"], evaluator.index),
                                        float(doc["sample_rate"]))

    def covers(self, relation: str) -> bool:
        return relation in self.relations

    def run(self, relation: str, rows: Seq[Mapping[str, Any]], seed: int | None = None
            ) -> tuple[list[int], dict[str, Any]]:
        """Per row the global-result bitmap (bit ``j``: the index's ``j``-th query admits it), and the
        batch's monitor statistics."""
        evaluator, sequence, sample_rate = self.relations[relation]
        columns = {a.attribute: np.array([r.get(a.attribute) for r in rows], dtype=object)
                   for a in evaluator.index.ascs}
        bitmaps, evaluated = evaluator.evaluate_batch(columns, sequence)
        stats = evaluator.batch_stats(columns, bitmaps, evaluated, sample_rate, seed)
        return [words_to_int(row) for row in bitmaps], stats
