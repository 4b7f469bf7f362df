"""What an evaluator runner reads and writes, as protocols: its state, what it publishes, its plan.

:class:`~streaming.evaluator.EvaluatorRunner` drives a
:class:`~streaming.session.StreamSession` through these three ports. The
Redis adapters (``streaming.redis_ports``) are what an evaluator process
uses; the in-memory ones (``streaming.testing``) run a whole stream in a test
with no Redis and no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol, Sequence

if TYPE_CHECKING:  # the bus raises StateLost and imports this module: it must not load the engine
    from .events import AggregateValue, ResultView, SubscriptionResult
    from .session import Change, SavedState, StateWrite
    from .sharing.properties import EvaluatorPlan

__all__ = ["StateLost", "StateStore", "Publisher", "PlanSource", "Ports"]


class StateLost(RuntimeError):
    """The store no longer holds the publishing evaluator's state: nothing was published."""


class StateStore(Protocol):
    """One evaluator's saved state, and the op it failed on (for the supervisor)."""

    def load(self) -> SavedState:
        """The saved state (empty if none), marking it loaded."""

    def lost(self) -> bool:
        """Whether the state marked loaded is gone (the store came back empty, or another took its place)."""

    def save(self, write: StateWrite) -> None:
        """Write what a batch changed, atomically."""

    def save_joined(self, joined: Mapping[int, int]) -> None:
        """The seq each query handed over to this evaluator joined at."""

    def save_published(self, seq: int) -> None:
        """The last seq whose changes this evaluator has published (a move's target waits on its source's)."""

    def persisted_seq(self) -> int:
        """The last seq the history holds every change and dead letter of that this evaluator published
        (the history persister's mark; -1 if none is known)."""

    def clear(self) -> None:
        """Delete the saved state and mark the (empty) state loaded: a rebuild starts."""

    def note_failed(self, seq: int | None, error: str) -> None:
        """Name the op the evaluator is in (or failed on) and why."""

    def clear_failed(self) -> None:
        """The guarded batch finished: no op to name."""


class Publisher(Protocol):
    """Where results go: per query a live set and a change log, per stream its events."""

    def publish_changes(self, changes: Mapping[int, Sequence[Change]]) -> None:
        """Each query's changes, in seq order, each once; :class:`StateLost` (nothing published) if the
        evaluator's state was lost."""

    def reconcile(self, query_id: int, seq: int, results: Iterable[ResultView]) -> list[Change]:
        """Make the query's live set equal ``results`` by publishing the difference at ``seq``; the changes
        published."""

    def restore_live(self, query_id: int, seq: int, adds: Mapping[str, str]) -> None:
        """Set the query's live set to ``adds`` (result key -> add payload) and its published seq to ``seq``,
        publishing no change (an evaluator putting back what a lost store held)."""

    def forget(self, query_ids: Iterable[int]) -> None:
        """Drop the queries' live sets, change logs and published seqs (a rebuild publishes them again)."""

    def publish_values(self, stream_id: int, values: Sequence[AggregateValue]) -> None:
        """Aggregate values, each at most once (per subscription and window end)."""

    def publish_items(self, items: Sequence[SubscriptionResult]) -> None:
        """WXQuery result items, each at most once (per subscription, seq and rank)."""

    def publish_events(self, stream_id: int, events: Sequence[Any]) -> None:
        """Stream events (metrics, dead letters, selection events, reports), in order."""

    def write_report(self, report: Any) -> None:
        """The evaluator's latest sharing report."""


class PlanSource(Protocol):
    """What the web tier, the supervisor and the stream's other evaluators say: the evaluator's plan, the
    stream's poison ops, and how far another evaluator has published."""

    def read(self) -> EvaluatorPlan | None:
        """The plan as written (None: none yet)."""

    def poison(self, stream_id: int) -> dict[int, str]:
        """The stream's poison ops: seq -> reason."""

    def published_seq(self, evaluator_id: int) -> int:
        """The last seq whose changes evaluator ``evaluator_id`` has published (-1: none)."""


@dataclass(frozen=True, slots=True)
class Ports:
    """The three ports of one evaluator."""

    state: StateStore
    publisher: Publisher
    plans: PlanSource
