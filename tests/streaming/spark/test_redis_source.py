"""The ``kwredis`` streaming source: ordered reads, read limits, checkpoint resume, trim on commit."""

from __future__ import annotations

import pytest

from streaming import sources
from streaming.bus import Keys

pytestmark = [pytest.mark.spark, pytest.mark.redis]

OPS = [f'{{"op":"delete","relation":"A","key":{i},"ts":{i}}}' for i in range(25)]


def run(spark, redis_url, checkpoint, max_rows=None):
    batches: list[list[int]] = []

    def collect(frame, batch_id):
        batches.append([sources.split_seq(row.value)[0] for row in frame.collect()])

    reader = spark.readStream.format("kwredis").option("url", redis_url).option("key", Keys.stream_ops(3))
    if max_rows:
        reader = reader.option("maxRows", str(max_rows))
    query = (reader.load().writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    return batches


def test_reads_in_order_resumes_from_the_checkpoint_and_trims(spark, redis_client, redis_url, tmp_path):
    writer = sources.RedisStreamWriter(redis_client, 3)
    writer.write(OPS[:10])
    assert run(spark, redis_url, tmp_path / "ck", max_rows=4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    # entries of committed batches are trimmed (Spark tells the source when it plans a later batch)
    left = [sources.split_seq(line)[0] for _, line in sources.read_redis_stream(redis_client, Keys.stream_ops(3), "0-0")]
    assert 0 < len(left) < 10 and left == list(range(10 - len(left), 10))
    writer.write(OPS[10:])
    assert run(spark, redis_url, tmp_path / "ck") == [list(range(10, 25))]
    assert run(spark, redis_url, tmp_path / "ck") == []
