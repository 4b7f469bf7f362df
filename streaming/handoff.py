"""The queries a move hands over to an evaluator, on that evaluator's side (``streaming.placement``).

The target of a move builds the moving queries' classes over its own store
and notes the seq each joined at. The evaluator handing them over (the
plan's ``handoff.source``) publishes their changes up to there; the target
holds the changes of later ops until that evaluator has published through
the join seq, then releases them in seq order, in front of its newer ones. A
target ahead of its source would otherwise publish a later change first, and
the publish script would drop the source's earlier ones. What it holds is
saved with the state, so a restart keeps it. No I/O: :class:`ArrivingQueries`
belongs to the session (``streaming.session``), which consults it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:
    from .session import Change

__all__ = ["ArrivingQueries"]


class ArrivingQueries:
    """The queries handed over to this evaluator: the seq each joined at, and their changes held until the
    evaluator handing them over has published through that seq."""

    def __init__(self) -> None:
        self.joined: dict[int, int] = {}  # query taken over from another evaluator -> the seq it joined at
        self.held: dict[int, list[Change]] = {}  # a joined query's changes until its source published through its seq
        self._held_changed = False
        self._reconcile_on_release: set[int] = set()  # held queries whose results were built again here

    def restore(self, joined: Mapping[int, int], held: Mapping[int, Sequence[Change]]) -> None:
        """Take the join seqs and held changes a state store saved."""
        self.joined = dict(joined)
        self.held = {qid: list(changes) for qid, changes in held.items()}

    def take_over(self, joining: set[int], rebuilt: set[int], fresh: bool, applied_seq: int,
                  source_published: int) -> tuple[dict[int, int] | None, set[int]]:
        """Note the seq each query handed over to this evaluator joined at (``applied_seq`` for one arriving
        now); the new notes, or None if unchanged (they go to the state store, for the supervisor, which ends
        the hand-off once the other evaluator has published through that seq), and the ``rebuilt`` queries
        whose published live set is not to be reconciled now.

        The evaluator handing a query over publishes its changes up to
        there, so an arriving query's live set is not reconciled and only
        the changes of later ops are published, held until that evaluator
        has published through the join seq (:meth:`hold`). Nor is a held
        query whose class is built again here (a fresh engine after a
        restart, a class rebuilt around it, an edit): a reconcile now would
        publish at a seq the source has not published through. Its held
        changes lead the published live set to what the engine held, and it
        is reconciled once released, after them. A fresh engine (a restart)
        reconciles a query no longer held as usual: the publish script drops
        whatever the other evaluator already published at a later seq.
        """
        arriving = joining & rebuilt
        arrived = {qid for qid in arriving if qid not in self.joined}
        kept = {qid: seq for qid, seq in self.joined.items() if qid in joining}
        changed = bool(arrived) or kept != self.joined
        self.joined = kept | {qid: applied_seq for qid in arrived}
        not_reconciled = set()
        for qid in arriving:
            held = self._holding(qid, source_published)
            if held and qid not in arrived:
                self._reconcile_on_release.add(qid)
            if held or (qid in arrived and not fresh):
                not_reconciled.add(qid)
        return (self.joined if changed else None), not_reconciled

    def hold(self, changes: dict[int, list[Change]], source_published: int) -> set[int]:
        """Hold the batch's ``changes`` of the queries still waiting on their source, and put the changes held
        before in front of the batch's for the queries now released; the released queries that were rebuilt
        while held (their live sets are to be reconciled after those changes)."""
        released, rebuilt_while_held = self.release(source_published)
        for qid in [qid for qid in changes if self._holding(qid, source_published)]:
            self.held.setdefault(qid, []).extend(changes.pop(qid))
            self._held_changed = True
        for qid, held in released.items():
            changes[qid] = held + changes.get(qid, [])
        return rebuilt_while_held

    def release(self, source_published: int) -> tuple[dict[int, list[Change]], set[int]]:
        """The held changes of the queries no longer held (their source has published through their join
        seq, or the move ended), and the released queries that were rebuilt while held."""
        released = {qid: self.held.pop(qid) for qid in list(self.held) if not self._holding(qid, source_published)}
        self._held_changed |= bool(released)
        rebuilt_while_held = {qid for qid in self._reconcile_on_release if not self._holding(qid, source_published)}
        self._reconcile_on_release -= rebuilt_while_held
        return released, rebuilt_while_held

    def drop_held(self, qid: int) -> None:
        """Forget what is held of a query (edited: its held changes were made by its old definition)."""
        if self.held.pop(qid, None) is not None:
            self._held_changed = True

    def leave(self, qid: int) -> None:
        """Forget a query that left this evaluator."""
        self.drop_held(qid)
        self._reconcile_on_release.discard(qid)

    def held_to_save(self) -> dict[int, list[Change]] | None:
        """A copy of the held changes if they changed since the last call (to save with the state), else None."""
        held = {qid: list(changes) for qid, changes in self.held.items()} if self._held_changed else None
        self._held_changed = False
        return held

    def _holding(self, qid: int, source_published: int) -> bool:
        """Whether a query handed over to this evaluator waits for its source to publish through its join seq."""
        joined = self.joined.get(qid)
        return joined is not None and source_published < joined
