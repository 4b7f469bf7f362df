"""A Spark streaming source over a stream's landing directory of NDJSON files.

Registered as format ``kwlanding`` (options ``path``, ``archive``, optional
``maxRows``, ``partitions``, ``appliedUrl`` with ``appliedKeys`` and
``consumersKey``); it yields one string column ``value`` per stored line,
like Spark's text source. It reads only what ingest writes
(``streaming.sources.LandingWriter``): files named by their zero-padded first
seq, renamed into place in seq order, so

* an offset is the name of the last file a batch includes, and the files after
  it are the ones not yet read: Spark's checkpoint holds a few bytes per batch
  (Spark's own file source keeps every file name ever read in its checkpoint
  and rewrites that list every ten batches: 112 MB a day at ten files a second);
* a file holds the seqs from its name up to the next file's name, so a batch
  is capped at ``maxRows`` ops exactly (whole files, at least one);
* once Spark commits a batch its files move to ``archive`` (the stream's
  :func:`~streaming.sources.landing_archive`), so the directory listed every
  micro-batch only holds what is not yet committed. With ``appliedUrl`` and
  ``appliedKeys`` (comma-separated state hashes in Redis: the evaluator's own
  and those of every other consumer of the directory) a committed file moves
  only once each of them has applied and persisted all its ops: an evaluator
  that applies a batch while Spark reads the next can then still recover a
  batch Spark committed before it was applied, and several evaluators (or a
  pre-processor alone) can read one directory. With ``consumersKey`` (a
  Redis set of such state hashes, ``bus.Keys.landing_consumers``), the
  consumers are those in the set at each commit when it is not empty: a
  consumer added while the reader runs (a new evaluator, a pre-processor
  switched on) holds files back from then on.

A batch's files are split into up to ``partitions`` contiguous ranges of about
equal size (no more than one per :data:`MIN_PARTITION_OPS` ops), read and
parsed by that many executor tasks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from streaming.sources import is_landing_file, landing_file_seq

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["MIN_PARTITION_OPS", "LandingOpsSource", "LandingOpsReader", "FileRange"]

# A partition is one more executor task, which costs ~40 ms of Python worker CPU
# here (reader and parser set-up) whatever its size, while parsing takes ~18 µs an
# op: a batch is split only where each part gets at least this many ops.
MIN_PARTITION_OPS = 4_000


class FileRange(InputPartition):
    """Consecutive files of a landing directory, read in order."""

    def __init__(self, directory: str, names: list[str]):
        super().__init__((directory, names))
        self.directory = directory
        self.names = names


class LandingOpsReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets ``{"file": "<name of the last file read>"}`` (``""``: nothing read yet)."""

    def __init__(self, directory: str, archive: str, max_rows: int | None, partitions: int,
                 applied: tuple[str, list[str], str | None] | None = None):
        self.directory = Path(directory)
        self.archive = Path(archive)
        self.max_rows = max_rows
        self.partition_count = max(1, partitions)
        self.applied = applied
        self._target: str | None = None

    def _listing(self) -> list[str]:
        """Names of the stored files, in name (= seq) order."""
        try:
            return sorted(e.name for e in os.scandir(self.directory) if is_landing_file(e.name))
        except FileNotFoundError:
            return []

    def _lines(self, name: str) -> int:
        with open(self.directory / name, "rb") as f:
            return f.read().count(b"\n")

    def initialOffset(self) -> dict:
        return {"file": ""}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        listing = self._listing()
        self._target = listing[-1] if listing else ""

    def _after(self, start: dict) -> list[str]:
        # An offset without "file" comes from Spark's own file source (a checkpoint older than
        # this source): read every file still in the directory; seqs already applied are skipped
        # by the evaluator.
        after = start.get("file", "")
        return [name for name in self._listing() if name > after]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        files = self._after(start)
        if self._target is not None:
            files = [name for name in files if name <= self._target]
        if not files:
            return start
        if isinstance(limit, ReadMaxRows):
            first = landing_file_seq(files[0])

            def rows(k: int) -> int:  # ops in files[:k]: a file ends where the next begins
                if k < len(files):
                    return landing_file_seq(files[k]) - first
                return landing_file_seq(files[-1]) - first + self._lines(files[-1])

            taken = 1
            while taken < len(files) and rows(taken + 1) <= limit.max_rows:
                taken += 1
            files = files[:taken]
        return {"file": files[-1]}

    def reportLatestOffset(self) -> dict:
        listing = self._listing()
        return {"file": listing[-1] if listing else ""}

    def partitions(self, start: dict, end: dict) -> list[FileRange]:
        end_name = end.get("file", "")
        files = [name for name in self._after(start) if name <= end_name]
        if not files:
            return []
        starts = [landing_file_seq(name) for name in files]
        sizes = [b - a for a, b in zip(starts, starts[1:])] + [self._lines(files[-1])]  # ops per file
        count = max(1, min(self.partition_count, len(files), sum(sizes) // MIN_PARTITION_OPS))
        share = sum(sizes) / count
        ranges: list[FileRange] = []
        names: list[str] = []
        filled = 0
        for name, size in zip(files, sizes):
            names.append(name)
            filled += size
            if filled >= share * (len(ranges) + 1) and len(ranges) < count - 1:
                ranges.append(FileRange(str(self.directory), names))
                names = []
        if names:
            ranges.append(FileRange(str(self.directory), names))
        return ranges

    def read(self, partition: FileRange) -> Iterator["pa.RecordBatch"]:
        """Each file's lines as one Arrow batch (no per-row conversion in the worker)."""
        import pyarrow as pa

        for name in partition.names:
            with open(os.path.join(partition.directory, name), encoding="utf-8") as f:
                lines = [line for line in f.read().split("\n") if line]
            if lines:
                yield pa.RecordBatch.from_pydict({"value": lines})

    def commit(self, end: dict) -> None:
        """Move the committed files (and any left by a crash before an earlier commit) to the archive,
        held back while a consumer has not applied them (``applied``; a consumer with no applied seq yet
        holds back every file)."""
        end_name = end.get("file", "")
        if self.applied is not None:
            import redis

            from streaming import bus
            from streaming.sources import applied_seq_of, landing_files_through

            url, keys, consumers = self.applied
            try:
                client = bus.connect(url)
                current = client.smembers(consumers) if consumers else set()
                applied = min(applied_seq_of(client, key) for key in (current or keys))
            except redis.RedisError:  # Redis away: archive at a later commit, never lose a file
                return
            done = landing_files_through(self.directory, applied, end_name)
        else:
            done = [name for name in self._listing() if name <= end_name]
        if not done:
            return
        self.archive.mkdir(parents=True, exist_ok=True)
        for name in done:
            try:
                os.replace(self.directory / name, self.archive / name)
            except FileNotFoundError:  # another consumer of the directory archived it first
                continue


class LandingOpsSource(DataSource):
    """``spark.readStream.format("kwlanding").option("path", ...).option("archive", ...)``."""

    @classmethod
    def name(cls) -> str:
        return "kwlanding"

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: StructType) -> LandingOpsReader:
        options = {k.lower(): v for k, v in self.options.items()}
        max_rows = options.get("maxrows")
        keys = [k for k in options.get("appliedkeys", "").split(",") if k]
        consumers = options.get("consumerskey")
        applied = (options["appliedurl"], keys, consumers) if keys or consumers else None
        return LandingOpsReader(options["path"], options["archive"], int(max_rows) if max_rows else None,
                                int(options.get("partitions", "2")), applied)
