"""What a :class:`~streaming.engine.StreamEngine` drives: an evaluator of the tuples its store holds.

The engine keeps the stream rules, the store and the window; an evaluator
turns each tuple inserted into or deleted from the store into the results
born or dead with it. Every evaluator of a single stream engine implements
:class:`Evaluator`: CNEvalDynamic (:class:`~streaming.evaluate.dynamic.DynamicEvaluator`),
the operator mesh (:class:`~streaming.evaluate.mesh.MeshEvaluator`), filter
subscriptions (:class:`~streaming.evaluate.filtering.FilterEvaluator`) and the
verdict-only store of ``streaming.query_alone``. One that can start on a full
store at once (``static-dynamic``) is a :class:`BulkEvaluator`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..window import LiveTuple
from .results import Result

__all__ = ["Evaluator", "BulkEvaluator"]


@runtime_checkable
class Evaluator(Protocol):
    """Results from the tuples entering and leaving a store."""

    def insert(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        """Take a tuple just added to the store; return the results born with it."""

    def delete(self, relation: str, key: Any, row: LiveTuple) -> list[Result]:
        """Withdraw a tuple about to leave the store; return the results that die with it."""

    def snapshot(self) -> list[Result]:
        """The live results, sorted."""

    def stats(self) -> dict[str, Any]:
        """The evaluator's own sizes, for dashboards and benchmarks."""


@runtime_checkable
class BulkEvaluator(Evaluator, Protocol):
    """An evaluator that can take a whole store at once."""

    def bulk_load(self) -> list[Result]:
        """Evaluate every tuple the store holds (the evaluator has seen none); return the results found."""
