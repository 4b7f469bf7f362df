"""What an evaluator published that the history may not hold yet, kept to publish again if Redis loses it.

The history persister marks, per evaluator, the seq up to which the history
holds every change and dead letter the evaluator had published when the mark
was made (``bus.Keys.persisted_seq``: it reads the evaluator's published seq,
drains every change stream and the stream events to their ends, then writes
that seq). The evaluator keeps each change and dead letter it publishes at
that seq or after (a plan change publishes at the seq already applied, which
may equal a mark made before it), dropping what the mark passes.

When Redis comes back empty while the evaluator runs, its session still
holds every tuple and result, so nothing has to be applied again: it writes
its state back, sets each query's live set to what it was before the mark's
seq (its live results now, with the kept changes undone, newest first; the
change stream gets a mark, :class:`~streaming.events.LiveRestored`, so a feed
that read the set before answers with a new snapshot), and publishes the
kept changes and dead letters again. The history skips what it already
holds and a feed client resynchronises from a snapshot. A loss then costs
what was published since the mark, not the stream since its first op.

What is kept is complete only once a mark reaches the seq keeping began at
(the applied seq when the evaluator started: what an earlier process
published after the mark is not here) or, after the kept changes outgrew
:data:`KEEP_AT_MOST`, the seq after the one they were dropped at.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import orjson

from .events import DeadLetter, change_json
from .session import Change

__all__ = ["KEEP_AT_MOST", "Unpersisted"]

#: Changes kept at most: past it (a history persister stopped for long) they are dropped, and a loss is
#: rebuilt from the landing files until the next mark passes the seq they were dropped at.
KEEP_AT_MOST = 500_000


class Unpersisted:
    """The changes (per query, in the order published) and dead letters at or after the history's mark."""

    def __init__(self, since: int = 0) -> None:
        self.since = since  # every change at this seq or after is kept
        self.persisted = -1  # the history persister's mark, as last read
        self.changes: dict[int, list[Change]] = {}
        self.dead: list[DeadLetter] = []

    @property
    def restored_seq(self) -> int:
        """The seq a live set given back is as of: every change before the mark (those at it are kept)."""
        return self.persisted - 1

    @property
    def complete(self) -> bool:
        """Whether every change and dead letter the history may lack is kept."""
        return self.persisted >= self.since

    def restart(self, since: int) -> None:
        """Keep from ``since`` on, nothing before (a process starting at the applied seq ``since``)."""
        self.since = since
        self.changes, self.dead = {}, []

    def keep(self, changes: Mapping[int, Sequence[Change]], applied_seq: int) -> None:
        """Changes about to be published (in seq order per query); ``applied_seq``: the session's."""
        floor = self.persisted
        for qid, quads in changes.items():
            kept = [c for c in quads if c[3] >= floor]
            if kept:
                self.changes.setdefault(qid, []).extend(kept)
        if sum(map(len, self.changes.values())) > KEEP_AT_MOST:
            self.restart(applied_seq + 1)

    def keep_dead(self, events: Iterable[Any]) -> None:
        """The dead letters among stream events about to be published (those with a seq: the history knows
        them by it)."""
        self.dead += [e for e in events if isinstance(e, DeadLetter) and e.seq is not None and e.seq >= self.persisted]

    def persisted_through(self, mark: int) -> None:
        """The history persister's mark, as read: drop what it passed."""
        if mark <= self.persisted:
            return
        self.persisted = mark
        for qid, quads in list(self.changes.items()):
            kept = [c for c in quads if c[3] >= mark]
            if kept:
                self.changes[qid] = kept
            else:
                del self.changes[qid]
        self.dead = [d for d in self.dead if d.seq is not None and d.seq >= mark]

    def live_at_mark(self, query_id: int, live_now: Mapping[str, str]) -> dict[str, str]:
        """The query's live set (result key -> add payload) before its kept changes, from ``live_now``: a
        result removed since is added back at :attr:`restored_seq`."""
        live = dict(live_now)
        for kind, key, payload, _ in reversed(self.changes.get(query_id, ())):
            if kind == "add":
                live.pop(key, None)
            else:
                result = orjson.dumps(orjson.loads(payload)["result"]).decode()
                live[key] = change_json("add", query_id, self.restored_seq, result)
        return live
