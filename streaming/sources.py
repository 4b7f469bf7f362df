"""Op sources of a stream: where ingest writes ops and where the evaluator reads them.

Every op line carries a ``seq`` assigned once, at ingest, from the Redis
counter ``Keys.stream_seq`` (0, 1, 2, ...), so the position of an op in the
stream survives restarts of the ingest, the evaluator and Redis clients. A
landing writer that finds no counter (a Redis that lost its data) starts it
after the newest stored file, so no seq is given twice.
A stored line is the op's JSON object with ``seq`` as its first field::

    {"seq":17,"op":"insert","relation":"Order","tuple":{...},"ts":12.0}

Two sources (README, "How it runs"):

- a **landing directory** ``{LANDING_DIR}/{stream_id}/`` of NDJSON files, each
  written to a hidden temporary name and renamed into place (readers never see
  a partial file). Names are the zero-padded first seq, so name order is seq
  order; seq assignment and the rename happen under one Redis lock per stream,
  so a file with lower seqs is always visible before one with higher seqs.
  The evaluator reads them with the ``kwlanding`` Spark source
  (``streaming.spark.landing_source``) and moves the files it has committed
  into the stream's archive :func:`landing_archive`, so the directory it lists
  every micro-batch stays small however long the stream runs.
- a **Redis stream** ``Keys.stream_ops(stream_id)`` (field ``line``); one Lua
  script assigns the seqs and appends the lines, so stream order is seq order.

Writers of either source take turns under the stream's lock
(:class:`SourceWriter`), in which a writer also reads and advances the
stream's *ingest clock* (``Keys.stream_clock``, the largest ``ts`` stored),
so the clock guard that ingest judges a body by (docs/ops.md, "The stream
clock") sees every body stored before it.
"""

from __future__ import annotations

import os
import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import orjson
import redis

from .bus import Keys

__all__ = [
    "LINE_FIELD",
    "SourceError",
    "stamp",
    "split_seq",
    "WriteTurn",
    "SourceWriter",
    "LandingFile",
    "LandingWriter",
    "RedisStreamWriter",
    "ingest_clock",
    "writer_for",
    "landing_directory",
    "landing_file_name",
    "is_landing_file",
    "landing_file_seq",
    "landing_archive",
    "prune_archive",
    "landing_pruned",
    "next_landing_seq",
    "landing_files",
    "read_landing",
    "read_redis_stream",
    "redis_stream_last_id",
    "input_seq",
]

LINE_FIELD = "line"
#: Left in a landing archive once :func:`prune_archive` deleted a file from it.
PRUNED_MARK = ".pruned"
#: How long a writer holds the stream's lock at most (:class:`SourceWriter`); writing the largest body
#: (``INGEST_MAX_BYTES``, fsynced) takes well under it.
LANDING_LOCK_SECONDS = 10.0


class SourceError(ValueError):
    """A stored op line has no valid ``seq`` (the source was written by something else)."""


def stamp(seq: int, op_json: str) -> str:
    """The stored line: ``op_json`` (a compact JSON object) with ``seq`` put first."""
    body = op_json.strip()
    if not body.startswith("{"):
        raise ValueError("an op must be a JSON object")
    rest = body[1:].lstrip()
    return f'{{"seq":{seq}}}' if rest == "}" else f'{{"seq":{seq},{rest}'


def split_seq(line: str | bytes) -> tuple[int, dict[str, Any]]:
    """Decode a stored line into its seq and the op object without ``seq``.

    Raises :class:`SourceError` if the line is not a JSON object with an
    integer ``seq`` >= 0; a malformed op body is left to ``parse_op``.
    """
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"stored line is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise SourceError("stored line is not a JSON object")
    seq = obj.pop("seq", None)
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise SourceError(f"stored line has no valid seq: {seq!r}")
    return seq, obj


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


def prune_archive(directory: str | Path, keep_seconds: float, now: float) -> int:
    """Delete a landing directory's archived files written more than ``keep_seconds`` before ``now``.

    A file keeps the time ingest wrote it when it is archived, so the age is
    the ops' age. The first deletion leaves a mark (:func:`landing_pruned`).
    Returns how many files were deleted.
    """
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


class WriteTurn:
    """One writer's turn at a stream's source, under the stream's lock: the ingest clock it found, one store.

    ``clock`` is the largest ``ts`` stored so far (None: nothing yet), read
    once the lock is held, so what a writer judges against it (the clock
    guard, at ingest) cannot be overtaken by another writer before
    :meth:`store` advances it.
    """

    def __init__(self, writer: "SourceWriter", clock: float | None):
        self.writer = writer
        self.clock = clock
        self.stored = False

    def store(self, ops: Sequence[str], clock: float | None = None) -> list[int]:
        """Store ``ops`` (compact JSON objects) in order with their seqs and advance the ingest clock to
        ``clock`` (None: leave it); return the seqs."""
        if self.stored:
            raise RuntimeError("a write turn stores once")
        self.stored = True
        if not ops:
            return []
        first = self.writer.append(ops, clock if clock is not None and clock != self.clock else None)
        return list(range(first, first + len(ops)))


class SourceWriter:
    """Writes ops to one stream's source in turns under the stream's lock (``Keys.stream_lock``).

    The lock expires after ``lock_seconds``: a writer that lost Redis
    before releasing it (the key outlives a Redis restart that persists)
    holds the next writers no longer than that, and they wait a little
    longer, so such a lock never fails a write.
    """

    def __init__(self, client: redis.Redis, stream_id: int, lock_seconds: float | None = None):
        self.client = client
        self.stream_id = stream_id
        self.lock_seconds = lock_seconds or LANDING_LOCK_SECONDS

    @contextmanager
    def turn(self) -> Iterator[WriteTurn]:
        """Hold the stream's lock for one :class:`WriteTurn`.

        Raises ``redis.exceptions.LockError`` (nothing stored) when the lock
        could not be taken within its expiry and 2 s more (other writers kept
        taking it).
        """
        wait = self.lock_seconds + 2.0
        lock = self.client.lock(Keys.stream_lock(self.stream_id), timeout=self.lock_seconds, blocking_timeout=wait)
        if not lock.acquire():
            raise redis.exceptions.LockError(f"stream {self.stream_id}: the landing lock is still held after {wait:g} s")
        try:
            yield WriteTurn(self, ingest_clock(self.client, self.stream_id))
        finally:
            try:
                lock.release()
            except redis.RedisError:  # Redis went away: the lock expires by itself; the ops are stored
                pass

    def write(self, ops: Sequence[str]) -> list[int]:
        """Store ``ops`` (compact JSON objects) in order in one turn, the ingest clock left as it is;
        return their seqs."""
        if not ops:
            return []
        with self.turn() as turn:
            return turn.store(ops)

    def append(self, ops: Sequence[str], clock: float | None) -> int:
        """Assign seqs to ``ops`` and store them (the lock is held), setting the ingest clock to ``clock``
        unless None; return the first seq."""
        raise NotImplementedError


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

    def append(self, ops: Sequence[str], clock: float | None) -> int:
        landing = self.reserve(ops, clock)
        self.place(landing)
        return landing.first_seq

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


# KEYS: seq counter, ops stream, ingest clock. ARGV: the new clock ("" to leave it), then the op lines
# (compact JSON objects, never "{}").
_APPEND = """
local n = #ARGV - 1
local first = redis.call('INCRBY', KEYS[1], n) - n
for i = 1, n do
  local body = string.sub(ARGV[i + 1], 2)
  redis.call('XADD', KEYS[2], '*', 'line', '{"seq":' .. (first + i - 1) .. ',' .. body)
end
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[3], ARGV[1])
end
return first
"""


class RedisStreamWriter(SourceWriter):
    """Appends ops to a stream's Redis stream, seqs assigned and the ingest clock set in one atomic step."""

    def __init__(self, client: redis.Redis, stream_id: int, key: str | None = None):
        super().__init__(client, stream_id)
        self.key = key or Keys.stream_ops(stream_id)
        self._script = client.register_script(_APPEND)

    def append(self, ops: Sequence[str], clock: float | None) -> int:
        for op in ops:
            if not op.startswith("{") or op.replace(" ", "") == "{}":
                raise ValueError("an op must be a non-empty compact JSON object")
        keys = [Keys.stream_seq(self.stream_id), self.key, Keys.stream_clock(self.stream_id)]
        return int(self._script(keys=keys, args=["" if clock is None else repr(clock), *ops]))


def ingest_clock(client: redis.Redis, stream_id: int) -> float | None:
    """The stream's ingest clock: the largest ``ts`` stored so far (None: nothing stored since its reset)."""
    value = client.get(Keys.stream_clock(stream_id))
    return float(value) if value is not None else None


def writer_for(client: redis.Redis, stream_id: int, source_kind: str, landing_root: str | Path) -> SourceWriter:
    """The writer of a stream's source (``"landing"`` or ``"redis"``)."""
    if source_kind == "landing":
        return LandingWriter(client, stream_id, landing_directory(landing_root, stream_id))
    if source_kind == "redis":
        return RedisStreamWriter(client, stream_id)
    raise ValueError(f"unknown source kind {source_kind!r}")


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


def read_landing(directory: str | Path) -> Iterator[str]:
    """Every stored line of a landing directory, archived or not, files in name (= seq) order."""
    for path in landing_files(directory):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield line.rstrip("\n")


def read_redis_stream(
    client: redis.Redis, key: str, after_id: str, until_id: str = "+", count: int = 10_000
) -> list[tuple[str, str]]:
    """``(entry id, line)`` of entries in ``(after_id, until_id]``, oldest first, at most ``count``."""
    low = "-" if after_id == "0-0" else f"({after_id}"
    return [(entry_id, fields[LINE_FIELD]) for entry_id, fields in client.xrange(key, min=low, max=until_id, count=count)]


def redis_stream_last_id(client: redis.Redis, key: str) -> str:
    """Id of the newest entry ("0-0" if the stream is empty or missing)."""
    last = client.xrevrange(key, count=1)
    return last[0][0] if last else "0-0"


def line_seq(line: str) -> int:
    """The seq of a stored line (it is written first: no full decode)."""
    head = line[:40]
    if head.startswith('{"seq":'):
        digits = head[7:].split(",", 1)[0].split("}", 1)[0]
        if digits.isdigit():
            return int(digits)
    return split_seq(line)[0]


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


def applied_seq_of(client: redis.Redis, state_key: str) -> int:
    """The last seq an evaluator applied and persisted (-1: none)."""
    value = client.hget(state_key, "seq")
    return int(value) if value is not None else -1


def input_seq(client: redis.Redis, stream_id: int, source: dict[str, Any]) -> int:
    """The newest seq a reader of ``source`` (a plan's) can find there (-1: none yet): the stream's last
    assigned seq for the raw source, the pre-processor's last derived seq for its derived stream."""
    if source.get("kind") == "derived":
        return max((applied_seq_of(client, Keys.evaluator_state(p)) for p in source["raw"].get("consumers", [])),
                   default=-1)
    value = client.get(Keys.stream_seq(stream_id))
    return int(value) - 1 if value is not None else -1
