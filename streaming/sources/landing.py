"""The landing source: a directory of NDJSON files written by the HTTP ingest.

``{LANDING_DIR}/{stream_id}/`` holds files each written to a hidden
temporary name and renamed into place (readers never see a partial file).
Names are the zero-padded first seq, so name order is seq order; seq
assignment and the rename happen under one Redis lock per stream, so a file
with lower seqs is always visible before one with higher seqs. A landing
writer that finds no seq counter (a Redis that lost its data) starts it
after the newest stored file, so no seq is given twice.

The evaluator reads the directory with the ``kwlanding`` Spark source
(``streaming.spark.landing_source``) and moves the files it has committed
into the stream's archive :func:`landing_archive`, so the directory it lists
every micro-batch stays small however long the stream runs. The archive is
pruned by age (:func:`prune_archive`); a pruned archive no longer holds every
op from the first, so a lost evaluator state cannot be rebuilt from it
(:func:`refuse_pruned`).

Receipts of bodies stored under an idempotency key (``streaming.sources.writer``)
are files too, in :func:`landing_receipts`, written after the seqs are assigned
and before the landing file is placed, and naming the file's digest: a
receipt counts only once its landing file holds those bytes, so it survives
any Redis loss with the ops it speaks for, and is pruned with the archive.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import orjson
import redis

from streaming.bus import Keys

from streaming.seqs import assigned_seq
from streaming.stored_lines import line_seq, stamp
from .writer import Receipt, SourceWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamReader

__all__ = [
    "PRUNED_MARK",
    "landing_directory",
    "landing_file_name",
    "is_landing_file",
    "landing_file_seq",
    "landing_archive",
    "landing_receipts",
    "prune_archive",
    "landing_pruned",
    "refuse_pruned",
    "write_atomic",
    "LandingFile",
    "LandingWriter",
    "next_landing_seq",
    "landing_files",
    "read_landing",
    "landing_files_through",
    "unapplied_landing_lines",
    "archived_lines_after",
    "landing_reader",
    "committed_landing_lines",
    "LandingSource",
    "LANDING",
]

#: Left in a landing archive once :func:`prune_archive` deleted a file from it.
PRUNED_MARK = ".pruned"


def landing_directory(landing_root: str | Path, stream_id: int) -> Path:
    """``{LANDING_DIR}/{stream_id}`` (the file source's path)."""
    return Path(landing_root) / str(stream_id)


_LANDING_FILE = re.compile(r"\d{20}\.ndjson")


def landing_file_name(first_seq: int) -> str:
    """The name of the landing file whose first op has ``first_seq``: name order is seq order."""
    return f"{first_seq:020d}.ndjson"


def is_landing_file(name: str) -> bool:
    """Whether ``name`` is a landing file's (hidden temporaries and foreign files are not)."""
    return _LANDING_FILE.fullmatch(name) is not None


def landing_file_seq(name: str) -> int:
    """The first seq of a landing file (:func:`is_landing_file`)."""
    return int(name[:20])


def landing_archive(directory: str | Path) -> Path:
    """Where the evaluator archives a landing directory's committed files: ``{LANDING_DIR}/.archive/{stream}``.

    A sibling of the stream directories, so the source never lists it.
    """
    directory = Path(directory)
    return directory.parent / ".archive" / directory.name


def landing_receipts(directory: str | Path) -> Path:
    """Where a landing directory's idempotency receipts are: ``{LANDING_DIR}/.receipts/{stream}``."""
    directory = Path(directory)
    return directory.parent / ".receipts" / directory.name


def _prune_receipts(directory: str | Path, keep_seconds: float, now: float) -> None:
    try:
        entries = list(os.scandir(landing_receipts(directory)))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.stat().st_mtime < now - keep_seconds:
            Path(entry.path).unlink(missing_ok=True)


def prune_archive(directory: str | Path, keep_seconds: float, now: float) -> int:
    """Delete a landing directory's archived files (and idempotency receipts) written more than
    ``keep_seconds`` before ``now``.

    A file keeps the time ingest wrote it when it is archived, so the age is
    the ops' age. The first deletion leaves a mark (:func:`landing_pruned`).
    Returns how many landing files were deleted.
    """
    _prune_receipts(directory, keep_seconds, now)
    deleted = 0
    archive = landing_archive(directory)
    try:
        entries = list(os.scandir(archive))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if is_landing_file(entry.name) and entry.stat().st_mtime < now - keep_seconds:
            if not deleted:
                (archive / PRUNED_MARK).touch()
            Path(entry.path).unlink(missing_ok=True)
            deleted += 1
    return deleted


def landing_pruned(directory: str | Path) -> bool:
    """Whether archived files of the landing directory were deleted: it no longer holds every op from the first."""
    return (landing_archive(directory) / PRUNED_MARK).exists()


def refuse_pruned(evaluator_id: int, directory: str) -> None:
    """Raise ``RuntimeError`` if the landing directory no longer holds every op from the first: a lost state
    cannot be rebuilt from it."""
    if landing_pruned(directory):
        raise RuntimeError(f"evaluator {evaluator_id}: its state in Redis is lost and archived landing files were "
                           "deleted (LANDING_ARCHIVE_HOURS), so it cannot be rebuilt: reset the stream")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a synced temporary file in its directory, renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class LandingFile:
    """One landing file before it is placed: its first seq, how many ops, its stamped lines."""

    first_seq: int
    count: int
    data: bytes

    @property
    def name(self) -> str:
        return landing_file_name(self.first_seq)


class LandingWriter(SourceWriter):
    """Writes batches of ops as atomic NDJSON files in a stream's landing directory.

    :meth:`append` is :meth:`reserve` (seqs, stamped lines) then :meth:`place`
    (the atomic rename); a writer that must record what it is about to place
    before placing it (the PostgreSQL capture, docs/sources.md) calls the two
    itself.
    """

    def __init__(self, client: redis.Redis, stream_id: int, directory: str | Path, lock_seconds: float | None = None):
        super().__init__(client, stream_id, lock_seconds)
        self.directory = Path(directory)

    def append(self, ops: Sequence[str], clock: float | None, receipt: tuple[str, str] | None = None) -> int:
        landing = self.reserve(ops, clock)
        if receipt is not None:
            key, digest = receipt
            self._write_receipt(key, Receipt(digest, landing.first_seq, landing.count),
                                hashlib.sha256(landing.data).hexdigest())
        self.place(landing)
        return landing.first_seq

    def _receipt_path(self, key: str) -> Path:
        return landing_receipts(self.directory) / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def _write_receipt(self, key: str, receipt: Receipt, data_digest: str) -> None:
        path = self._receipt_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, orjson.dumps({**receipt.to_json(), "file": data_digest}))

    def receipt(self, key: str) -> Receipt | None:
        try:
            recorded = orjson.loads(self._receipt_path(key).read_bytes())
        except FileNotFoundError:
            return None
        receipt = Receipt.from_json(recorded)
        name = landing_file_name(receipt.first)
        for folder in (self.directory, landing_archive(self.directory)):
            try:
                data = (folder / name).read_bytes()
            except FileNotFoundError:
                continue
            # killed before placing, a Redis that lost its seq counter can give the seqs to another body
            return receipt if hashlib.sha256(data).hexdigest() == recorded["file"] else None
        return None

    def answer(self, key: str, receipt: Receipt, answer: dict[str, Any]) -> None:
        recorded = orjson.loads(self._receipt_path(key).read_bytes())
        self._write_receipt(key, Receipt(receipt.digest, receipt.first, receipt.count, answer), recorded["file"])

    def reserve(self, ops: Sequence[str], clock: float | None = None) -> LandingFile:
        """Assign the next seqs to ``ops`` (and the ingest clock ``clock`` unless None) and stamp them; nothing
        is written yet."""
        # the clock moves with the seqs, before the file is written: a write that fails then leaves a clock
        # ahead of the stored ops, which judges later jumps more leniently, never more strictly
        counter = Keys.stream_seq(self.stream_id)
        if not self.client.exists(counter):  # a new stream, or a Redis that lost its data: the files say
            self.client.set(counter, next_landing_seq(self.directory), nx=True)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.incrby(counter, len(ops))
            if clock is not None:
                pipe.set(Keys.stream_clock(self.stream_id), repr(clock))
            first = int(pipe.execute()[0]) - len(ops)
        text = "".join(stamp(first + i, op) + "\n" for i, op in enumerate(ops))
        return LandingFile(first, len(ops), text.encode("utf-8"))

    def place(self, landing: LandingFile) -> None:
        """Write the file whole into the directory (a synced temporary renamed into place)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomic(self.directory / landing.name, landing.data)

    def placed(self, name: str) -> bool:
        """Whether the file is in the directory or its archive."""
        return (self.directory / name).exists() or (landing_archive(self.directory) / name).exists()


def next_landing_seq(directory: str | Path) -> int:
    """The seq after the last op stored in a landing directory or its archive (0: none).

    The newest file holds it (files are named by their first seq, and a
    file is archived only after every file before it).
    """
    directory = Path(directory)
    for folder in (directory, landing_archive(directory)):
        try:
            names = [e.name for e in os.scandir(folder) if is_landing_file(e.name)]
        except FileNotFoundError:
            continue
        if names:
            newest = max(names)
            with open(folder / newest, "rb") as fh:
                return landing_file_seq(newest) + fh.read().count(b"\n")
    return 0


def landing_files(directory: str | Path) -> list[Path]:
    """The files of a landing directory, archived or not, in name (= seq) order."""
    directory = Path(directory)
    files = [p for folder in (directory, landing_archive(directory)) if folder.is_dir()
             for p in folder.iterdir() if is_landing_file(p.name)]
    return sorted(files, key=lambda p: p.name)


def read_landing(directory: str | Path, through: str | None = None) -> Iterator[str]:
    """Every stored line of a landing directory, archived or not, files in name (= seq) order, read as
    they are taken (``through``: only the files named up to it)."""
    for path in landing_files(directory):
        if through is not None and path.name > through:
            break
        try:
            opened = path.open(encoding="utf-8")
        except FileNotFoundError:  # archived since the listing (by another consumer of the directory)
            opened = (landing_archive(directory) / path.name).open(encoding="utf-8")
        with opened as lines:
            for line in lines:
                if line.strip():
                    yield line.rstrip("\n")


def landing_files_through(directory: str | Path, applied_seq: int, through: str | None = None) -> list[str]:
    """Names of the landing files (not archived) whose every op has a seq <= ``applied_seq``.

    A file holds the seqs from its name up to the next file's; the newest file
    is read to count its lines. ``through`` limits the files considered to
    names <= it. A file that another consumer of the directory archives
    meanwhile was applied by every consumer; it is left out.
    """
    directory = Path(directory)
    try:
        names = sorted(e.name for e in os.scandir(directory) if is_landing_file(e.name))
    except FileNotFoundError:
        return []
    if through is not None:
        names = [n for n in names if n <= through]
    done = []
    for i, name in enumerate(names):
        if i + 1 < len(names):
            last = landing_file_seq(names[i + 1]) - 1
        else:
            try:
                with open(directory / name, "rb") as fh:
                    last = landing_file_seq(name) + fh.read().count(b"\n") - 1
            except FileNotFoundError:
                break
        if last > applied_seq:
            break
        done.append(name)
    return done


def unapplied_landing_lines(directory: str | Path, applied_seq: int, through: str) -> list[str]:
    """The stored lines with a seq > ``applied_seq`` in the files up to ``through`` (not archived; a file
    archived meanwhile by another consumer was applied by all, this one included, and has none)."""
    directory = Path(directory)
    out = []
    try:
        names = sorted(e.name for e in os.scandir(directory) if is_landing_file(e.name) and e.name <= through)
    except FileNotFoundError:
        return []
    for name in names:
        try:
            with open(directory / name, encoding="utf-8") as fh:
                out += [line for line in fh.read().split("\n") if line and line_seq(line) > applied_seq]
        except FileNotFoundError:
            continue
    return out


def archived_lines_after(directory: str | Path, applied_seq: int) -> list[str]:
    """The stored lines with a seq > ``applied_seq`` in the archive of a landing directory (the newest
    archived files only: those a consumer that did not gate archiving may have missed)."""
    archive = landing_archive(directory)
    try:
        names = sorted(e.name for e in os.scandir(archive) if is_landing_file(e.name))
    except FileNotFoundError:
        return []
    newest: list[str] = []
    for name in reversed(names):  # files before one that starts at or below applied_seq + 1 end before it
        newest.append(name)
        if landing_file_seq(name) <= applied_seq + 1:
            break
    out = []
    for name in reversed(newest):
        with open(archive / name, encoding="utf-8") as fh:
            out += [line for line in fh.read().split("\n") if line and line_seq(line) > applied_seq]
    return out


def landing_reader(spark: "SparkSession", source: dict[str, Any], redis_url: str,
                   applied_key: str | None) -> "DataStreamReader":
    """The ``kwlanding`` reader of a landing directory ``source["path"]`` (raw or derived).

    A batch is split into at most one partition per core of the Spark
    application, and its files move to the directory's archive once it is
    committed (``streaming.spark.landing_source``) — with ``applied_key`` (the
    evaluator's state hash), once the evaluator has also applied them, and
    with ``source["consumers"]`` (evaluator ids: several processes read the
    directory), once each of them has; with ``source["consumers_key"]``, once
    each consumer in that Redis set has, as it is at each commit (the web tier
    rewrites it with every plan).
    """
    path = Path(source["path"])
    reader = (
        spark.readStream.format("kwlanding")
        .option("path", str(path))
        .option("archive", str(landing_archive(path)))
        .option("partitions", str(spark.sparkContext.defaultParallelism))
    )
    keys = [Keys.evaluator_state(c) for c in source.get("consumers", [])]
    if applied_key is not None and applied_key not in keys:
        keys.append(applied_key)
    if keys:
        reader = reader.option("appliedUrl", redis_url).option("appliedKeys", ",".join(keys))
    if source.get("consumers_key"):
        reader = reader.option("appliedUrl", redis_url).option("consumersKey", source["consumers_key"])
    return reader


def committed_landing_lines(source: dict[str, Any], offset: dict[str, Any], applied_seq: int) -> list[str]:
    """The lines of a landing directory up to the committed ``offset`` with a seq > ``applied_seq``."""
    return unapplied_landing_lines(source["path"], applied_seq, offset["file"]) if offset.get("file") else []


class LandingSource:
    """The landing kind, as a stream's source (``Stream.source_kind``) and as what its evaluators read."""

    name = "landing"
    label = "Landing directory of NDJSON files"
    captured = False
    has_landing_directory = True
    checkpoint = "query"

    def spec(self, stream_id: int, landing_root: str | Path) -> dict[str, Any]:
        return {"kind": self.name, "path": str(landing_directory(landing_root, stream_id).resolve())}

    def writer(self, client: redis.Redis, stream_id: int, landing_root: str | Path) -> LandingWriter:
        return LandingWriter(client, stream_id, landing_directory(landing_root, stream_id))

    def prune(self, stream_id: int, landing_root: str | Path, keep_seconds: float, now: float) -> int | None:
        return prune_archive(landing_directory(landing_root, stream_id), keep_seconds, now)

    def reader(self, spark: "SparkSession", source: dict[str, Any], redis_url: str,
               applied_key: str | None) -> "DataStreamReader":
        return landing_reader(spark, source, redis_url, applied_key)

    def row_reader(self, client: redis.Redis) -> None:
        return None

    def recover(self, source: dict[str, Any], offset: dict[str, Any], applied_seq: int, redis_url: str,
                evaluator_id: int) -> tuple[Iterable[str], bool]:
        """With no applied seq (Redis lost the state) every stored op up to the committed file, archived ones
        included, to rebuild from (read as the rebuild applies them, not held at once); otherwise the
        committed lines not applied yet."""
        if offset.get("file") and applied_seq < 0:
            refuse_pruned(evaluator_id, source["path"])
            return read_landing(source["path"], offset["file"]), True
        return committed_landing_lines(source, offset, applied_seq), False

    def catch_up(self, source: dict[str, Any], applied_seq: int) -> list[str]:
        """The archived ops after ``applied_seq`` (archived while the pre-processor, not this reader, gated
        archiving); none before a first applied seq (the reader starts where the directory does)."""
        return archived_lines_after(source["path"], applied_seq) if applied_seq >= 0 else []

    def replay(self, source: dict[str, Any], evaluator_id: int, upto: int) -> Iterator[str] | None:
        refuse_pruned(evaluator_id, source["path"])
        return itertools.takewhile(lambda line: line_seq(line) <= upto, read_landing(source["path"]))

    def input_seq(self, client: redis.Redis, stream_id: int, source: dict[str, Any]) -> int:
        return assigned_seq(client, stream_id)

    def raw(self, source: dict[str, Any]) -> dict[str, Any]:
        return source


LANDING = LandingSource()
