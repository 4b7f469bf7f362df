"""Attribute selection constructs with adaptive two-level ordering (Lee & Lee; issue 4).

Build an :class:`AscIndex` from ``{query_id: [predicate objects]}``; evaluate
tuples one at a time (:class:`ScalarEvaluator`, :class:`AscStream`) or in numpy
batches (:class:`BatchEvaluator`); a :class:`DroppingMonitor` on the driver
turns batch statistics into new :class:`Sequence` objects (JSON for transport).
"""

from .construct import Asc, AscIndex
from .evaluate import ScalarEvaluator
from .monitor import DroppingMonitor, rearrangement_delta
from .predicates import OPS, Predicate, PredicateError, parse_predicate, parse_queries, split_by_relation
from .sequence_search import hybrid_sequence, macro_order, macro_sequence
from .sequences import Sequence
from .stream import AscStream
from .ticket import TicketRouter
from .vectorised import BatchEvaluator

__all__ = [
    "OPS",
    "Asc",
    "AscIndex",
    "AscStream",
    "BatchEvaluator",
    "DroppingMonitor",
    "Predicate",
    "PredicateError",
    "ScalarEvaluator",
    "Sequence",
    "TicketRouter",
    "hybrid_sequence",
    "macro_order",
    "macro_sequence",
    "parse_predicate",
    "parse_queries",
    "rearrangement_delta",
    "split_by_relation",
]
