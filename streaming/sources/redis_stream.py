"""The Redis source: a Redis stream ``Keys.stream_ops(stream_id)`` (field ``line``) of stored op lines.

One Lua script assigns the seqs and appends the lines, so stream order is
seq order; it also records an idempotency receipt with them
(``streaming.sources.writer``; ``Keys.ingest_receipt``, expiring after
``RECEIPT_SECONDS``). The evaluator reads it with the ``kwredis`` Spark source
(``streaming.spark.redis_source``). Nothing is archived: the ops live in
Redis only, and are lost with it, receipts included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

import orjson
import redis

from streaming.bus import Keys, connect
from streaming.seqs import assigned_seq
from streaming.stored_lines import line_seq

from .writer import RECEIPT_SECONDS, Receipt, SourceWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamReader

__all__ = ["LINE_FIELD", "RedisStreamWriter", "read_redis_stream", "redis_stream_last_id", "RedisStreamSource",
           "REDIS_STREAM"]

LINE_FIELD = "line"

# KEYS: seq counter, ops stream, ingest clock, then the receipt's key if any. ARGV: the new clock ("" to
# leave it), the receipt's JSON after its "first" field and its expiry in seconds (both "" without a
# receipt), then the op lines (compact JSON objects, never "{}").
_APPEND = """
local n = #ARGV - 3
local first = redis.call('INCRBY', KEYS[1], n) - n
for i = 1, n do
  local body = string.sub(ARGV[i + 3], 2)
  redis.call('XADD', KEYS[2], '*', 'line', '{"seq":' .. (first + i - 1) .. ',' .. body)
end
if ARGV[1] ~= '' then
  redis.call('SET', KEYS[3], ARGV[1])
end
if KEYS[4] then
  redis.call('SET', KEYS[4], '{"first":' .. first .. ',' .. ARGV[2], 'EX', ARGV[3])
end
return first
"""


class RedisStreamWriter(SourceWriter):
    """Appends ops to a stream's Redis stream, seqs assigned and the ingest clock set in one atomic step."""

    def __init__(self, client: redis.Redis, stream_id: int, key: str | None = None):
        super().__init__(client, stream_id)
        self.key = key or Keys.stream_ops(stream_id)
        self._script = client.register_script(_APPEND)

    def append(self, ops: Sequence[str], clock: float | None, receipt: tuple[str, str] | None = None) -> int:
        for op in ops:
            if not op.startswith("{") or op.replace(" ", "") == "{}":
                raise ValueError("an op must be a non-empty compact JSON object")
        keys = [Keys.stream_seq(self.stream_id), self.key, Keys.stream_clock(self.stream_id)]
        tail, expiry = "", ""
        if receipt is not None:
            key, digest = receipt
            keys.append(Keys.ingest_receipt(self.stream_id, key))
            tail = orjson.dumps({"digest": digest, "count": len(ops)}).decode()[1:]
            expiry = str(int(RECEIPT_SECONDS))
        return int(self._script(keys=keys, args=["" if clock is None else repr(clock), tail, expiry, *ops]))

    def receipt(self, key: str) -> Receipt | None:
        recorded = self.client.get(Keys.ingest_receipt(self.stream_id, key))
        return Receipt.from_json(orjson.loads(recorded)) if recorded is not None else None

    def answer(self, key: str, receipt: Receipt, answer: dict[str, Any]) -> None:
        done = Receipt(receipt.digest, receipt.first, receipt.count, answer)
        self.client.set(Keys.ingest_receipt(self.stream_id, key), orjson.dumps(done.to_json()),
                        ex=int(RECEIPT_SECONDS), xx=True)


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


class RedisStreamSource:
    """The Redis kind, as a stream's source (``Stream.source_kind``) and as what its evaluators read."""

    name = "redis"
    label = "Redis stream"
    captured = False
    has_landing_directory = False
    checkpoint = "query"

    def spec(self, stream_id: int, landing_root: str) -> dict[str, Any]:
        return {"kind": self.name, "key": Keys.stream_ops(stream_id)}

    def writer(self, client: redis.Redis, stream_id: int, landing_root: str) -> RedisStreamWriter:
        return RedisStreamWriter(client, stream_id)

    def prune(self, stream_id: int, landing_root: str, keep_seconds: float, now: float) -> int | None:
        return None

    def reader(self, spark: "SparkSession", source: dict[str, Any], redis_url: str,
               applied_key: str | None) -> "DataStreamReader":
        reader = spark.readStream.format("kwredis").option("url", redis_url).option("key", source["key"])
        return reader.option("appliedKey", applied_key) if applied_key is not None else reader

    def row_reader(self, client: redis.Redis) -> None:
        return None

    def recover(self, source: dict[str, Any], offset: dict[str, Any], applied_seq: int, redis_url: str,
                evaluator_id: int) -> tuple[list[str], bool]:
        until = offset.get("id", "0-0")
        if until == "0-0":
            return [], False
        entries = read_redis_stream(connect(redis_url), source["key"], "0-0", until, count=10_000_000)
        return [line for _, line in entries if line_seq(line) > applied_seq], False

    def catch_up(self, source: dict[str, Any], applied_seq: int) -> list[str]:
        return []

    def replay(self, source: dict[str, Any], evaluator_id: int, upto: int) -> Iterator[str] | None:
        return None

    def input_seq(self, client: redis.Redis, stream_id: int, source: dict[str, Any]) -> int:
        return assigned_seq(client, stream_id)

    def raw(self, source: dict[str, Any]) -> dict[str, Any]:
        return source


REDIS_STREAM = RedisStreamSource()
