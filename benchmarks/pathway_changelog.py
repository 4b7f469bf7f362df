"""An op stream as the changelog the Pathway dataflow reads: one row per change, at a time of its op.

Pathway takes a table's changes as rows with a logical time and a diff (+1
insert, -1 retraction of the same row), so a delete, which names only a key,
becomes the retraction of the inserted tuple (its values and ``ts``). Op
``seq``'s changes are at Pathway time :func:`data_time` (``4 * seq + 4``), so
the dataflow's updates say which op caused them (:func:`seq_of_time`).

The sliding window comes in one of two :data:`WINDOW_MODES`:

* ``expiries``: kwmonitor's own stream rules (a :class:`StreamEngine` per
  window of the plan, every query's window or none) decide what each op
  changes; the rows carry a ``window`` tag (the index of their window in
  the plan's windows), and a tuple's expiry is its retraction at the time of the op
  whose clock ended it. Rejected ops change nothing but the expiries their
  time causes, as in kwmonitor, so any stream can be compared. The dataflow
  does no window work.
* ``forget``: one copy of every tuple, and each window is Pathway's own
  ``Table.forget`` (a row leaves when the largest ``ts`` the table has seen
  reaches its ``ts + W``, docs/ops.md's ``s + W <= t``). Deletes bring no
  ``ts`` of their own and ``forget`` acts at the table's next time, so every
  op also has a *tick* row (relation ``null``, its ``ts``) at :func:`tick_time`
  (``4 * seq + 2``): the tick moves the clock and the expiries land at the
  op's own time. The dataflow has no reject rules, so this mode refuses
  (:class:`ChangelogError`) a stream with an op kwmonitor rejects under any
  of the plan's windows. Its rows have the tag -1 (every window).
"""

from __future__ import annotations

import json
from typing import IO, Any, Iterable

from streaming.clock import ClockGuard
from streaming.engine import StreamEngine
from streaming.ops import OpRejected, parse_op
from streaming.schema import Schema
from streaming.query_alone import verdict_store
from streaming.window import LiveTuple

__all__ = ["WINDOW_MODES", "ChangelogError", "data_time", "tick_time", "seq_of_time", "write_changelog"]

WINDOW_MODES = ("expiries", "forget")


class ChangelogError(ValueError):
    """``forget`` mode: the stream has an op kwmonitor rejects, which the dataflow would apply."""


def tick_time(seq: int) -> int:
    """Pathway time of op ``seq``'s tick (even, as Pathway's input times must be)."""
    return 4 * seq + 2


def data_time(seq: int) -> int:
    """Pathway time of op ``seq``'s changes (and of the expiries its time causes)."""
    return 4 * seq + 4


def seq_of_time(time: int) -> int:
    """The op whose tick or changes a Pathway time belongs to."""
    return (time - 2) // 4


def write_changelog(schema: Schema, lines: Iterable[str], windows: list[float | None], mode: str, out: IO[str],
                    guard: ClockGuard | None = None) -> dict[str, int]:
    """Write the changelog of the op stream ``lines`` (NDJSON ops) as NDJSON to ``out``; return its counts.

    ``windows`` are the join plan's (every query's window, ``None`` for
    none); ``mode`` one of :data:`WINDOW_MODES`. Each row is ``{"time", "diff", "relation", "key", "serial",
    "window", "ts", "values"}``; ``serial`` tells two lives of one key apart.
    """
    if mode not in WINDOW_MODES:
        raise ValueError(f"window mode must be one of {', '.join(WINDOW_MODES)}, got {mode!r}")
    writer = _Rows(out)
    numbered = enumerate(line for line in lines if line.strip())
    if mode == "expiries":
        engines = [_recording_engine(schema, w, guard, writer, i) for i, w in enumerate(windows)]
        for seq, line in numbered:
            writer.seq, writer.seen = seq, True
            try:
                op = parse_op(line, schema)
            except OpRejected:
                continue
            for engine in engines:
                try:
                    engine.apply(op)
                except OpRejected:
                    pass
    else:
        _forget_changelog(schema, numbered, windows, guard, writer)
    return {**writer.counts, "ops": writer.seq + 1 if writer.seen else 0}


class _Rows:
    """Writes changelog rows at the current op's times and counts them."""

    def __init__(self, out: IO[str]):
        self.out = out
        self.seq = 0
        self.seen = False
        self.counts = {"insert": 0, "retract": 0, "tick": 0}

    def change(self, diff: int, relation: str, key: Any, serial: int, window: int, row: LiveTuple) -> None:
        self.counts["insert" if diff > 0 else "retract"] += 1
        self._write(data_time(self.seq), diff, relation, key, serial, window, row.ts, row.values)

    def tick(self, ts: float) -> None:
        self.counts["tick"] += 1
        self._write(tick_time(self.seq), 1, None, self.seq, self.seq, -1, ts, None)

    def _write(self, time: int, diff: int, relation: str | None, key: Any, serial: int, window: int, ts: float,
               values: dict[str, Any] | None) -> None:
        self.out.write(json.dumps({"time": time, "diff": diff, "relation": relation, "key": key, "serial": serial,
                                   "window": window, "ts": ts, "values": values}, separators=(",", ":")) + "\n")


class _Recorder:
    """The evaluator of a stream engine that writes every tuple its store takes in or lets go."""

    def __init__(self, rows: _Rows, window: int):
        self.rows = rows
        self.window = window

    def insert(self, relation: str, key: Any, row: LiveTuple) -> list:
        self.rows.change(1, relation, key, row.serial, self.window, row)
        return []

    def delete(self, relation: str, key: Any, row: LiveTuple) -> list:
        self.rows.change(-1, relation, key, row.serial, self.window, row)
        return []

    def snapshot(self) -> list:
        return []

    def stats(self) -> dict[str, Any]:
        return {}


def _recording_engine(schema: Schema, window: float | None, guard: ClockGuard | None, rows: _Rows,
                      tag: int) -> StreamEngine:
    """A stream engine for ``window`` whose store's changes are written as rows tagged ``tag``."""
    engine = StreamEngine(schema, window, guard)
    engine.evaluator = _Recorder(rows, tag)
    return engine


def _forget_changelog(schema: Schema, numbered: Iterable[tuple[int, str]], windows: list[float | None],
                      guard: ClockGuard | None, rows: _Rows) -> None:
    judges = [verdict_store(schema, w, guard) for w in windows]
    ticks = any(w is not None for w in windows)
    live: dict[tuple[str, Any], tuple[int, LiveTuple]] = {}
    for seq, line in numbered:
        rows.seq, rows.seen = seq, True
        try:
            op = parse_op(line, schema)
            for judge in judges:
                judge.apply(op)
        except OpRejected as exc:
            raise ChangelogError(f"op {seq} is rejected by kwmonitor ({exc}); the Pathway dataflow has no "
                                 "reject rules, so window mode 'forget' cannot compare this stream") from None
        if ticks:
            rows.tick(op.ts)
        if op.kind == "insert":
            tuple_ = LiveTuple(op.values or {}, 0, op.ts, seq)
            live[(op.relation, op.key)] = (seq, tuple_)
            rows.change(1, op.relation, op.key, seq, -1, tuple_)
        else:
            serial, tuple_ = live.pop((op.relation, op.key))
            rows.change(-1, op.relation, op.key, serial, -1, tuple_)
