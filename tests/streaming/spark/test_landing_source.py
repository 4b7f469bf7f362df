"""The ``kwlanding`` streaming source: exact read limits, balanced partitions, archive on commit, checkpoint resume."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from streaming import bus, sources
from streaming.spark.landing_source import MIN_PARTITION_OPS, LandingOpsReader


def land(directory: Path, first: int, count: int) -> str:
    """A landing file of ``count`` ops from seq ``first``, as ingest names it."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{first:020d}.ndjson"
    ops = [f'{{"op":"delete","relation":"A","key":{first + i},"ts":{first + i}}}' for i in range(count)]
    (directory / name).write_text("".join(sources.stamp(first + i, op) + "\n" for i, op in enumerate(ops)))
    return name


def seqs_of(reader: LandingOpsReader, start: dict, end: dict) -> list[list[int]]:
    return [[sources.split_seq(line)[0] for batch in reader.read(p) for line in batch.column("value").to_pylist()]
            for p in reader.partitions(start, end)]


@pytest.fixture
def landing(tmp_path):
    directory = tmp_path / "landing" / "7"
    return directory, sources.landing_archive(directory)


def test_read_limit_takes_whole_files_up_to_max_rows(landing):
    directory, archive = landing
    names = [land(directory, 0, 4), land(directory, 4, 3), land(directory, 7, 5), land(directory, 12, 2)]
    reader = LandingOpsReader(str(directory), str(archive), max_rows=7, partitions=2)
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadMaxRows(7)) == {"file": names[1]}  # 4 + 3 ops
    assert reader.latestOffset(start, ReadMaxRows(8)) == {"file": names[1]}  # a third file would make 12
    assert reader.latestOffset(start, ReadMaxRows(2)) == {"file": names[0]}  # at least one file
    assert reader.latestOffset({"file": names[1]}, ReadMaxRows(7)) == {"file": names[3]}  # 5 + 2, last file counted
    assert reader.latestOffset({"file": names[1]}, ReadMaxRows(6)) == {"file": names[2]}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"file": names[3]}
    assert reader.latestOffset({"file": names[3]}, ReadAllAvailable()) == {"file": names[3]}  # nothing new


def test_partitions_are_contiguous_balanced_and_cover_the_batch(landing):
    directory, archive = landing
    size = MIN_PARTITION_OPS // 2
    names = [land(directory, size * i, size) for i in range(7)]
    reader = LandingOpsReader(str(directory), str(archive), max_rows=None, partitions=3)
    parts = seqs_of(reader, {"file": names[0]}, {"file": names[6]})  # 6 files, 3 x MIN_PARTITION_OPS ops
    assert [len(p) for p in parts] == [2 * size] * 3 and sum(parts, []) == list(range(size, 7 * size))
    parts = seqs_of(reader, {"file": names[1]}, {"file": names[6]})  # 5 files: 2 parts, 3 + 2 files
    assert [len(p) for p in parts] == [3 * size, 2 * size] and sum(parts, []) == list(range(2 * size, 7 * size))
    # a small batch is one task: a task's fixed cost would exceed the parsing it shares out
    assert seqs_of(reader, {"file": names[3]}, {"file": names[6]}) == [list(range(4 * size, 7 * size))]
    assert reader.partitions({"file": names[6]}, {"file": names[6]}) == []


def test_commit_archives_committed_files_and_leftovers_only(landing):
    directory, archive = landing
    names = [land(directory, 0, 2), land(directory, 2, 2), land(directory, 4, 2)]
    reader = LandingOpsReader(str(directory), str(archive), max_rows=None, partitions=2)
    reader.commit({"file": names[1]})  # also the first file, as if a crash had come before its commit
    assert sorted(p.name for p in archive.iterdir()) == names[:2]
    assert sorted(p.name for p in directory.iterdir()) == names[2:]
    assert [sources.split_seq(line)[0] for line in sources.read_landing(directory)] == list(range(6))
    reader.commit(reader.initialOffset())
    assert sorted(p.name for p in directory.iterdir()) == names[2:]


@pytest.mark.redis
def test_commit_follows_the_consumers_in_redis_as_they_are_at_each_commit(landing, redis_client, redis_url):
    """A running reader started for one consumer: a consumer added meanwhile (a new evaluator, the
    pre-processor) holds files back from the next commit on; one removed no longer does."""
    directory, archive = landing
    names = [land(directory, 0, 2), land(directory, 2, 2), land(directory, 4, 2)]
    consumers = bus.Keys.landing_consumers(7, "raw")
    first, added = bus.Keys.evaluator_state(1), bus.Keys.evaluator_state(2)
    reader = LandingOpsReader(str(directory), str(archive), max_rows=None, partitions=2,
                              applied=(redis_url, [first], consumers))
    redis_client.hset(first, "seq", 3)
    reader.commit({"file": names[2]})  # no set yet: the keys it was started with
    assert sorted(p.name for p in archive.iterdir()) == names[:2]
    bus.write_landing_consumers(redis_client, 7, "raw", [1, 2])
    redis_client.hset(first, "seq", 5)
    reader.commit({"file": names[2]})  # evaluator 2 has applied nothing yet
    assert sorted(p.name for p in directory.iterdir()) == names[2:]
    bus.write_landing_consumers(redis_client, 7, "raw", [2])
    redis_client.hset(added, "seq", 5)
    redis_client.hset(first, "seq", 1)  # no longer a consumer
    reader.commit({"file": names[2]})
    assert sorted(p.name for p in archive.iterdir()) == names


def test_the_archived_ops_a_consumer_missed_are_the_newest_archived_ones_past_its_seq(landing):
    directory, archive = landing
    for first in (0, 3, 6):
        land(archive, first, 3)
    land(directory, 9, 2)
    assert [sources.split_seq(line)[0] for line in sources.archived_lines_after(directory, 4)] == [5, 6, 7, 8]
    assert [sources.split_seq(line)[0] for line in sources.archived_lines_after(directory, 5)] == [6, 7, 8]
    assert sources.archived_lines_after(directory, 8) == []


def test_an_offset_of_sparks_file_source_reads_every_file_left(landing):
    directory, archive = landing
    names = [land(directory, 0, 2), land(directory, 2, 2)]
    reader = LandingOpsReader(str(directory), str(archive), max_rows=None, partitions=2)
    legacy = {"logOffset": 12}
    end = reader.latestOffset(legacy, ReadAllAvailable())
    assert end == {"file": names[1]}
    assert sum(seqs_of(reader, legacy, end), []) == [0, 1, 2, 3]
    reader.commit(legacy)  # nothing to move for an offset that names no file
    assert sorted(p.name for p in directory.iterdir()) == names


def test_available_now_stops_at_the_files_present_when_it_started(landing):
    directory, archive = landing
    first = land(directory, 0, 3)
    reader = LandingOpsReader(str(directory), str(archive), max_rows=None, partitions=2)
    reader.prepareForTriggerAvailableNow()
    land(directory, 3, 3)
    assert reader.latestOffset(reader.initialOffset(), ReadAllAvailable()) == {"file": first}


def test_an_ordinary_file_or_a_temporary_one_is_not_read(landing):
    directory, archive = landing
    name = land(directory, 0, 2)
    (directory / ".00000000000000000002.abc.tmp").write_text("partial")
    (directory / "notes.ndjson").write_text("{}\n")
    reader = LandingOpsReader(str(directory), str(archive), max_rows=None, partitions=2)
    assert reader.latestOffset(reader.initialOffset(), ReadAllAvailable()) == {"file": name}


@pytest.mark.spark
def test_spark_reads_in_order_resumes_from_the_checkpoint_and_archives(spark, landing, tmp_path):
    from streaming.spark.job import source_frame

    directory, archive = landing
    for first in range(0, 10, 2):
        land(directory, first, 2)

    def run(max_rows=None):
        batches: list[list[int]] = []

        def collect(frame, _batch_id):
            batches.append([sources.split_seq(row.value)[0] for row in frame.collect()])

        query = (source_frame(spark, {"kind": "landing", "path": str(directory)}, "", max_rows)
                 .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "ck"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None
        return batches

    assert run(max_rows=4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert sorted(p.name for p in directory.iterdir()) == [f"{8:020d}.ndjson"]  # the last batch's, until the next
    for first in range(10, 16, 3):
        land(directory, first, 3)
    assert run() == [list(range(10, 16))]
    assert run() == []
    assert [sources.split_seq(line)[0] for line in sources.read_landing(directory)] == list(range(16))
