"""The source kinds, by name: one module of ``streaming.sources`` per kind.

Two names are looked up here and nowhere else compared:

- a stream's configured source (``Stream.source_kind``, a :class:`StreamKind`):
  who writes its ops, where the plan's raw source points, which archive to
  prune;
- what an evaluator reads (the plan's ``source["kind"]``, an
  :class:`InputKind`): the Spark reader, how the batch's lines become rows,
  what is recovered after a stop, what a lost state is rebuilt from.

A new kind is a module with a class that has these members, and its
instance added to :data:`STREAM_KINDS` and/or :data:`INPUT_KINDS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol

import redis

from .derived import DERIVED, DerivedReader
from .landing import LANDING
from .postgres import POSTGRES
from .redis_stream import REDIS_STREAM
from .writer import SourceWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamReader

__all__ = ["StreamKind", "InputKind", "STREAM_KINDS", "INPUT_KINDS", "stream_kind", "input_kind", "writer_for",
           "input_seq", "prune_archives"]


class StreamKind(Protocol):
    """A stream's configured source."""

    name: str
    label: str
    #: The capture is its only writer (the ingest refuses the stream).
    captured: bool
    #: Its ops land in a landing directory, which several evaluators and the pre-processor can share.
    has_landing_directory: bool

    def spec(self, stream_id: int, landing_root: str | Path) -> dict[str, Any]:
        """The plan's raw source: where its ops are stored."""

    def writer(self, client: redis.Redis, stream_id: int, landing_root: str | Path) -> SourceWriter:
        """The ingest's writer of the stream's ops."""

    def prune(self, stream_id: int, landing_root: str | Path, keep_seconds: float, now: float) -> int | None:
        """Delete archived ops older than ``keep_seconds``; how many files (None: it keeps no archive)."""


class InputKind(Protocol):
    """What an evaluator (or the pre-processor) reads: a plan's ``source``."""

    name: str
    #: The query checkpoint's directory below the evaluator's checkpoint directory.
    checkpoint: str

    def reader(self, spark: "SparkSession", source: dict[str, Any], redis_url: str,
               applied_key: str | None) -> "DataStreamReader":
        """The streaming reader (``applied_key``: keep what that evaluator state has not applied)."""

    def row_reader(self, client: redis.Redis) -> DerivedReader | None:
        """What turns a batch's lines into rows on the driver (None: raw op lines, parsed by the executors)."""

    def recover(self, source: dict[str, Any], offset: dict[str, Any], applied_seq: int, redis_url: str,
                evaluator_id: int) -> tuple[Iterable[str], bool]:
        """The lines Spark committed (``offset``) that the evaluator did not apply, and whether they rebuild
        its state from the first op (its state was lost: then they may be read as they are applied)."""

    def catch_up(self, source: dict[str, Any], applied_seq: int) -> list[str]:
        """Lines after ``applied_seq`` the query will not read again (archived meanwhile)."""

    def replay(self, source: dict[str, Any], evaluator_id: int, upto: int) -> Iterator[str] | None:
        """Every stored line up to seq ``upto``, from the first (None: the source cannot be read again)."""

    def input_seq(self, client: redis.Redis, stream_id: int, source: dict[str, Any]) -> int:
        """The newest seq a reader can find there (-1: none yet)."""

    def raw(self, source: dict[str, Any]) -> dict[str, Any]:
        """The raw source under it (what a pre-processor reads)."""


STREAM_KINDS: dict[str, StreamKind] = {kind.name: kind for kind in (LANDING, REDIS_STREAM, POSTGRES)}
INPUT_KINDS: dict[str, InputKind] = {kind.name: kind for kind in (LANDING, REDIS_STREAM, DERIVED)}


def stream_kind(name: str) -> StreamKind:
    """The configured source kind ``name``; :class:`ValueError` if there is none."""
    try:
        return STREAM_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown source kind {name!r}") from None


def input_kind(source: dict[str, Any]) -> InputKind:
    """The kind of a plan's ``source``; :class:`ValueError` if there is none."""
    try:
        return INPUT_KINDS[source["kind"]]
    except KeyError:
        raise ValueError(f"unknown source kind {source.get('kind')!r}") from None


def writer_for(client: redis.Redis, stream_id: int, source_kind: str, landing_root: str | Path) -> SourceWriter:
    """The writer of a stream's source (its :class:`StreamKind`'s)."""
    return stream_kind(source_kind).writer(client, stream_id, landing_root)


def input_seq(client: redis.Redis, stream_id: int, source: dict[str, Any]) -> int:
    """The newest seq a reader of ``source`` (a plan's) can find there (-1: none yet): the stream's last
    assigned seq for the raw source, the pre-processor's last derived seq for its derived stream."""
    return input_kind(source).input_seq(client, stream_id, source)


def prune_archives(source_kind: str, stream_id: int, landing_root: str | Path, keep_seconds: float,
                   now: float) -> int | None:
    """Delete a stream's archived ops older than ``keep_seconds`` before ``now``; how many files (None: its
    source keeps no archive). A source that keeps one lands in a directory, which a pre-processor may read:
    the derived stream's archive is pruned with it."""
    own = stream_kind(source_kind).prune(stream_id, landing_root, keep_seconds, now)
    if own is None:
        return None
    return own + DERIVED.prune(stream_id, landing_root, keep_seconds, now)
