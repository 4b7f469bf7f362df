"""Live tuples of a stream and their sliding-window expiry.

:class:`LiveStore` holds the tuples currently alive, relation by relation,
with an index of every foreign-key value (so "which live tuples reference this
key" is one dict lookup). :class:`SlidingWindow` remembers insertion times and
yields the tuples whose lifespan ``[s, s + W)`` has ended before an op at time
``t`` (``s + W <= t``), oldest first, as docs/ops.md ("Windows") requires.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterator

from .schema import Schema

__all__ = ["LiveTuple", "LiveStore", "SlidingWindow"]


class LiveTuple:
    """One live tuple: its values, keyword mask, insertion time and serial number.

    The serial tells two lives of the same key apart (deleted, then inserted
    again), so a stale expiry entry never removes the newer tuple. A store
    shared by several queries (``streaming.sharing``) also keeps ``qmask``,
    the queries whose predicates the tuple satisfies (all ones: no predicate
    on its relation), ``classes``, the filter classes it sits in, and
    ``labels``, the shared lattice's node labels its words carry, as of the
    lattice's version ``labels_version``.
    """

    __slots__ = ("values", "mask", "ts", "serial", "qmask", "classes", "labels", "labels_version")

    def __init__(self, values: dict, mask: int, ts: float, serial: int, qmask: int = -1):
        self.values = values
        self.mask = mask
        self.ts = ts
        self.serial = serial
        self.qmask = qmask
        self.classes = 0
        self.labels = ()
        self.labels_version = -1


class LiveStore:
    """Live tuples per relation plus, per foreign key, the live holders of each value.

    ``referencing[(holder, fk)][value]`` is the set of keys of live ``holder``
    tuples whose column of ``fk`` equals ``value``.
    """

    def __init__(self, schema: Schema):
        self.schema = schema
        self.rows: dict[str, dict[Any, LiveTuple]] = {name: {} for name in schema.relations}
        self.fk_columns: dict[str, tuple[tuple[str, str], ...]] = {
            name: tuple((fk.name, fk.column) for fk in rel.foreign_keys) for name, rel in schema.relations.items()
        }
        self.referencing: dict[tuple[str, str], dict[Any, set]] = {
            (fk.holder, fk.name): {} for fk in schema.foreign_keys
        }
        # per relation: (column, its index in ``referencing``), resolved once
        self._indexes: dict[str, tuple[tuple[str, dict[Any, set]], ...]] = {
            name: tuple((column, self.referencing[(name, fk)]) for fk, column in cols)
            for name, cols in self.fk_columns.items()
        }
        self._serial = 0

    def __len__(self) -> int:
        return sum(len(r) for r in self.rows.values())

    def get(self, relation: str, key: Any) -> LiveTuple | None:
        return self.rows[relation].get(key)

    def add(self, relation: str, key: Any, values: dict, mask: int, ts: float, qmask: int = -1) -> LiveTuple:
        """Store a new live tuple (the caller checked the key is not live)."""
        self._serial += 1
        row = LiveTuple(values, mask, ts, self._serial, qmask)
        self.rows[relation][key] = row
        for column, index in self._indexes[relation]:
            value = values[column]
            if value is not None:
                keys = index.get(value)
                if keys is None:
                    index[value] = {key}
                else:
                    keys.add(key)
        return row

    def remove(self, relation: str, key: Any) -> LiveTuple:
        """Forget a live tuple and its foreign-key index entries."""
        row = self.rows[relation].pop(key)
        values = row.values
        for column, index in self._indexes[relation]:
            value = values[column]
            if value is not None:
                keys = index[value]
                keys.discard(key)
                if not keys:
                    del index[value]
        return row

    def holders(self, relation: str, fk: str, value: Any) -> set:
        """Keys of live ``relation`` tuples whose foreign key ``fk`` equals ``value``."""
        return self.referencing[(relation, fk)].get(value, _EMPTY)

    def counts(self) -> dict[str, int]:
        return {name: len(rows) for name, rows in self.rows.items()}


_EMPTY: frozenset = frozenset()


class SlidingWindow:
    """Insertion times in arrival order; ``seconds=None`` means no window (nothing expires)."""

    def __init__(self, seconds: float | None):
        if seconds is not None and not seconds > 0:
            raise ValueError(f"window must be a positive number of seconds, got {seconds!r}")
        self.seconds = seconds
        self._queue: deque[tuple[float, str, Any, int]] = deque()

    def push(self, relation: str, key: Any, row: LiveTuple) -> None:
        if self.seconds is not None:
            self._queue.append((row.ts + self.seconds, relation, key, row.serial))

    def expires_by(self, row: LiveTuple, now: float) -> bool:
        """Whether ``row`` is out of the window at time ``now``."""
        return self.seconds is not None and row.ts + self.seconds <= now

    def pending(self, now: float) -> bool:
        """Whether some insertion's lifespan ended by ``now`` (cheap test before :meth:`due`)."""
        queue = self._queue
        return bool(queue) and queue[0][0] <= now

    def due(self, now: float, store: LiveStore) -> Iterator[tuple[str, Any]]:
        """Pop and yield ``(relation, key)`` of live tuples expired at ``now``, oldest first.

        Entries of tuples already deleted (or deleted and inserted again) are
        dropped silently. The caller removes each yielded tuple before the
        next one is produced.
        """
        queue = self._queue
        rows = store.rows
        while queue and queue[0][0] <= now:
            _, relation, key, serial = queue.popleft()
            row = rows[relation].get(key)
            if row is not None and row.serial == serial:
                yield relation, key

    def __len__(self) -> int:
        return len(self._queue)
