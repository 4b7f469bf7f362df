"""A Spark streaming source over a stream's Redis stream of op lines.

Registered as format ``kwredis`` (options ``url`` and ``key``); it yields one
string column ``value`` per entry, the stored op line with its ``seq``, like
Spark's text source over a landing directory. Offsets are Redis stream entry
ids, so Spark's checkpoint resumes exactly after the last committed batch;
once Spark commits a batch the entries up to it are trimmed (the evaluator's
persisted state now holds what they did). With ``appliedKey`` (an evaluator's
state hash) only the entries the evaluator has applied and persisted are
trimmed, so it can recover a batch Spark committed before it was applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["RedisOpsSource", "RedisOpsReader", "IdRange"]

_READ_CHUNK = 10_000


def _id_tuple(entry_id: str) -> tuple[int, int]:
    ms, _, n = entry_id.partition("-")
    return int(ms), int(n or 0)


class IdRange(InputPartition):
    """Entries with ids in ``(after, until]``."""

    def __init__(self, after: str, until: str):
        super().__init__((after, until))
        self.after = after
        self.until = until


class RedisOpsReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets ``{"id": "<ms>-<n>"}``; one partition per micro-batch (the stream is one ordered log)."""

    def __init__(self, url: str, key: str, max_rows: int | None, applied_key: str | None = None):
        self.url = url
        self.key = key
        self.max_rows = max_rows
        self.applied_key = applied_key
        self._target: str | None = None

    def _client(self):
        from streaming import bus

        return bus.connect(self.url)

    def initialOffset(self) -> dict:
        return {"id": "0-0"}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def _newest(self) -> str:
        from streaming.sources import redis_stream_last_id

        return redis_stream_last_id(self._client(), self.key)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._newest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        newest = self._target if self._target is not None else self._newest()
        if _id_tuple(newest) <= _id_tuple(start["id"]):
            return start
        if isinstance(limit, ReadMaxRows):
            from streaming.sources import read_redis_stream

            entries = read_redis_stream(self._client(), self.key, start["id"], newest, count=limit.max_rows)
            if entries:
                return {"id": entries[-1][0]}
        return {"id": newest}

    def reportLatestOffset(self) -> dict:
        return {"id": self._newest()}

    def partitions(self, start: dict, end: dict) -> list[IdRange]:
        if start["id"] == end["id"]:
            return []
        return [IdRange(start["id"], end["id"])]

    def read(self, partition: IdRange) -> Iterator["pa.RecordBatch"]:
        """The partition's lines as Arrow batches (no per-row conversion in the worker)."""
        import pyarrow as pa

        from streaming.sources import read_redis_stream

        client = self._client()
        after = partition.after
        while True:
            entries = read_redis_stream(client, self.key, after, partition.until, count=_READ_CHUNK)
            if entries:
                yield pa.RecordBatch.from_pydict({"value": [line for _, line in entries]})
            if len(entries) < _READ_CHUNK:
                return
            after = entries[-1][0]

    def commit(self, end: dict) -> None:
        if end["id"] == "0-0":
            return
        client = self._client()
        minid = end["id"]
        if self.applied_key is not None:
            import redis

            from streaming.sources import applied_seq_of, line_seq, read_redis_stream

            try:
                applied = applied_seq_of(client, self.applied_key)
            except redis.RedisError:  # Redis away: trim at a later commit
                return
            after = "0-0"
            while True:  # keep from the first entry the evaluator has not applied
                entries = read_redis_stream(client, self.key, after, end["id"], count=_READ_CHUNK)
                first = next((entry_id for entry_id, line in entries if line_seq(line) > applied), None)
                if first is not None:
                    minid = first
                    break
                if len(entries) < _READ_CHUNK:
                    break
                after = entries[-1][0]
        client.xtrim(self.key, minid=minid, approximate=False)


class RedisOpsSource(DataSource):
    """``spark.readStream.format("kwredis").option("url", ...).option("key", ...)``."""

    @classmethod
    def name(cls) -> str:
        return "kwredis"

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: StructType) -> RedisOpsReader:
        max_rows = self.options.get("maxrows") or self.options.get("maxRows")
        applied_key = self.options.get("appliedkey") or self.options.get("appliedKey")
        return RedisOpsReader(self.options["url"], self.options["key"], int(max_rows) if max_rows else None,
                              applied_key)
