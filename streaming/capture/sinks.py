"""Where a capture appends its ops, each batch sealed together with the capture's state.

A batch is staged op by op, then sealed: on return from :meth:`OpSink.seal`
its ops are durable and the state (LSN, live rows, ``ts``) committed with
them, so the capture may confirm the LSN to the slot. What a kill leaves
half done is put right by :meth:`OpSink.recover` at the next start:

- :class:`FileSink` appends NDJSON lines to a file and fsyncs it, then
  commits the state with the file's sealed length; a restart cuts the file
  back to that length (a batch written but not sealed goes, and comes again
  from the slot, which was not told it is stored).
- :class:`LandingSink` writes a stream's landing directory through the
  ingest's :class:`~streaming.sources.LandingWriter` (seqs from the same
  counter, the same atomic files): each file is reserved (its seqs
  assigned), recorded in the state as pending with the batch, and placed
  after the commit; a restart places the pending files not placed yet. The
  capture is then the stream's only writer (the ingest refuses a PostgreSQL
  stream), so a file placed again after its archived copy was pruned has
  seqs the evaluator applied long ago, and its reader archives it unread.
  Seqs reserved by a batch that was never sealed are skipped, as those of
  an ingest request that failed midway are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

import redis

from streaming import bus
from streaming.sources import LandingFile, LandingWriter

from . import CaptureError
from .state import CaptureState

__all__ = ["OpSink", "FileSink", "LandingSink"]


class OpSink(Protocol):
    """Where a capture's ops go, sealed with its state."""

    description: str
    state: CaptureState

    def recover(self) -> None:
        """Put right what a kill left between a batch's staging and its seal."""

    def stage(self, lines: list[bytes]) -> None:
        """Ops (compact JSON objects) of the open batch: not durable yet."""

    def seal(self, **meta: Any) -> None:
        """Make the staged ops durable and commit the state with ``meta`` (lsn, ts, ...)."""

    def abandon(self) -> None:
        """Drop the open batch (a stop in the middle of a transaction)."""

    def close(self) -> None:
        """Release what the sink holds open."""


class FileSink:
    """An NDJSON file of ops (``python -m streaming cdc --out``)."""

    def __init__(self, path: str | Path, state: CaptureState):
        self.path = Path(path)
        self.state = state
        self.description = str(self.path)
        self._out: Any = None
        self._sealed = 0

    def recover(self) -> None:
        position = self.state.position()
        size = self.path.stat().st_size if self.path.exists() else 0
        if position.phase is None and size:
            raise CaptureError(f"{self.path} already holds {size} bytes that no capture state accounts for: give "
                               "an empty or new file (or the state it was written with)")
        if size < position.sink_bytes:
            raise CaptureError(f"{self.path} holds {size} bytes but {position.sink_bytes} were stored in it: it was "
                               "changed by something else; start again with a new file and a new slot")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = open(self.path, "ab")
        if size > position.sink_bytes:  # a batch written but never sealed: it comes again from the slot
            self._out.truncate(position.sink_bytes)
            os.fsync(self._out.fileno())
        self._sealed = position.sink_bytes

    def stage(self, lines: list[bytes]) -> None:
        if lines:
            self._out.write(b"\n".join(lines) + b"\n")

    def seal(self, **meta: Any) -> None:
        self._out.flush()
        os.fsync(self._out.fileno())
        # the file's size, not tell(): after a truncate (recover, abandon) tell() keeps the old end until the
        # next write, so a batch sealed with no line stored a length the file never had
        size = os.fstat(self._out.fileno()).st_size
        self.state.commit(sink_bytes=size, **meta)
        self._sealed = size

    def abandon(self) -> None:
        self.state.rollback()
        self._out.flush()
        self._out.truncate(self._sealed)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None


class LandingSink:
    """A stream's landing directory, written as the ingest writes it."""

    def __init__(self, writer: LandingWriter, state: CaptureState, ops_per_file: int = 5_000):
        self.writer = writer
        self.state = state
        self.ops_per_file = ops_per_file
        self.description = f"the landing directory {writer.directory}"
        self._lines: list[str] = []
        self._staged = 0

    def recover(self) -> None:
        if self.state.position().phase is None and self.writer.client.exists(bus.Keys.stream_seq(self.writer.stream_id)):
            raise CaptureError(f"stream {self.writer.stream_id} already holds ops but its capture state is new: "
                               "reset the stream (manage.py reset_stream) to capture the publication from a snapshot")
        self._place()

    def stage(self, lines: list[bytes]) -> None:
        self._lines += [line.decode() for line in lines]
        self._staged += len(lines)
        while len(self._lines) >= self.ops_per_file:
            self._reserve(self._lines[:self.ops_per_file])
            del self._lines[:self.ops_per_file]

    def seal(self, **meta: Any) -> None:
        if self._lines:
            self._reserve(self._lines, clock=meta.get("ts"))
            self._lines = []
        self.state.commit(**meta)
        self._place()
        staged, self._staged = self._staged, 0
        if staged:
            try:
                bus.record_ingest(self.writer.client, self.writer.stream_id, staged)
            except redis.RedisError:  # stored: a missed count only dents the input rate shown
                pass

    def abandon(self) -> None:
        self._lines, self._staged = [], 0
        self.state.rollback()

    def close(self) -> None:
        pass

    def _reserve(self, lines: list[str], clock: float | None = None) -> None:
        landing = self.writer.reserve(lines, clock)
        self.state.add_pending(landing.first_seq, landing.count, landing.data)

    def _place(self) -> None:
        """Place the files the state holds as pending (after their batch was committed), then forget them."""
        pending = self.state.pending()
        if not pending:
            return
        with self.writer.turn():  # the stream's lock: files appear in seq order
            for first_seq, count, data in pending:
                landing = LandingFile(first_seq, count, data)
                if not self.writer.placed(landing.name):
                    self.writer.place(landing)
        self.state.clear_pending()
