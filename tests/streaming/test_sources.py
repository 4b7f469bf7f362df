"""Op sources: seqs assigned once and in order, atomic landing files, Redis stream appends."""

import json
import os
import threading
import time

import pytest

from streaming import bus, sources
from streaming.bus import Keys
from streaming.sources.derived import derived_directory
from streaming.sources.landing import refuse_pruned

OPS = [
    json.dumps({"op": "insert", "relation": "A", "tuple": {"id": i, "t": "x"}, "ts": float(i)}, separators=(",", ":"))
    for i in range(5)
]





def test_stamp_puts_seq_first_and_split_inverts_it():
    line = sources.stamp(7, '{"op":"delete","relation":"A","key":1,"ts":2}')
    assert line.startswith('{"seq":7,')
    assert sources.split_seq(line) == (7, {"op": "delete", "relation": "A", "key": 1, "ts": 2})
    assert sources.stamp(3, "{ }") == '{"seq":3}'
    with pytest.raises(ValueError):
        sources.stamp(1, "[1]")


@pytest.mark.parametrize("bad", ["nope", "[1]", '{"op":"insert"}', '{"seq":-1}', '{"seq":true}', '{"seq":"3"}'])
def test_split_seq_rejects_lines_without_a_valid_seq(bad):
    with pytest.raises(sources.SourceError):
        sources.split_seq(bad)


@pytest.mark.redis
def test_landing_writer_assigns_consecutive_seqs_from_zero(redis_client, tmp_path):
    writer = sources.LandingWriter(redis_client, 3, tmp_path / "3")
    assert writer.write(OPS[:2]) == [0, 1]
    assert writer.write(OPS[2:]) == [2, 3, 4]
    assert writer.write([]) == []
    names = sorted(p.name for p in (tmp_path / "3").iterdir())
    assert names == [f"{0:020d}.ndjson", f"{2:020d}.ndjson"]
    lines = list(sources.read_landing(tmp_path / "3"))
    assert [sources.split_seq(line)[0] for line in lines] == [0, 1, 2, 3, 4]
    assert [sources.split_seq(line)[1] for line in lines] == [json.loads(op) for op in OPS]
    # the evaluator archives committed files (streaming.spark.landing_source)
    archive = sources.landing_archive(tmp_path / "3")
    archive.mkdir(parents=True)
    (tmp_path / "3" / f"{0:020d}.ndjson").rename(archive / f"{0:020d}.ndjson")
    assert list(sources.read_landing(tmp_path / "3")) == lines


@pytest.mark.redis
@pytest.mark.parametrize("archived", [0, 1, 2])
def test_seqs_go_on_after_the_stored_files_when_redis_lost_the_counter(redis_client, tmp_path, archived):
    writer = sources.LandingWriter(redis_client, 3, tmp_path / "3")
    writer.write(OPS[:2])
    writer.write(OPS[2:3])
    archive = sources.landing_archive(tmp_path / "3")
    archive.mkdir(parents=True)
    for name in sorted(p.name for p in (tmp_path / "3").iterdir())[:archived]:  # the evaluator archived them
        (tmp_path / "3" / name).rename(archive / name)
    redis_client.flushdb()
    assert writer.write(OPS[3:]) == [3, 4]
    assert [sources.split_seq(line)[0] for line in sources.read_landing(tmp_path / "3")] == [0, 1, 2, 3, 4]


@pytest.mark.redis
def test_seqs_survive_a_new_writer(redis_client, redis_url, tmp_path):
    sources.LandingWriter(redis_client, 3, tmp_path).write(OPS[:2])
    assert sources.LandingWriter(bus.connect(redis_url), 3, tmp_path).write(OPS[2:3]) == [2]


@pytest.mark.redis
def test_concurrent_landing_writers_publish_files_in_seq_order(redis_client, redis_url, tmp_path):
    """Under the lock, a file with lower seqs is visible before any file with higher seqs."""
    directory = tmp_path / "9"
    seen_orders: list[list[int]] = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            firsts = [int(p.name[:20]) for p in sorted(directory.glob("*.ndjson"))] if directory.exists() else []
            seen_orders.append(firsts)

    def write(n):
        w = sources.LandingWriter(bus.connect(redis_url), 9, directory)
        for _ in range(n):
            w.write(OPS[:3])

    watcher = threading.Thread(target=watch)
    watcher.start()
    writers = [threading.Thread(target=write, args=(20,)) for _ in range(4)]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    watcher.join()
    seqs = [sources.split_seq(line)[0] for line in sources.read_landing(directory)]
    assert seqs == list(range(240))
    for firsts in seen_orders:  # what a reader lists is always a prefix of the final order
        assert firsts == [3 * i for i in range(len(firsts))]


@pytest.mark.redis
def test_a_lock_left_by_a_writer_that_lost_redis_delays_the_next_write_but_never_fails_it(redis_client, tmp_path):
    """A writer whose release never reached Redis leaves the lock until it expires (across a Redis
    restart that persists it): the next writer waits past that expiry and stores its ops."""
    left = redis_client.lock(Keys.stream_lock(5), timeout=1.0)
    assert left.acquire(blocking=False)
    assert sources.LandingWriter(redis_client, 5, tmp_path / "5", lock_seconds=1.0).write(OPS[:2]) == [0, 1]
    assert [sources.split_seq(line)[0] for line in sources.read_landing(tmp_path / "5")] == [0, 1]


@pytest.mark.redis
def test_landing_ignores_hidden_temporary_files(redis_client, tmp_path):
    (tmp_path / ".00000000000000000000.abc.tmp").write_text('{"seq":0,"op":"partial"')
    sources.LandingWriter(redis_client, 1, tmp_path).write(OPS[:1])
    assert len(list(sources.read_landing(tmp_path))) == 1


@pytest.mark.redis
def test_redis_stream_writer_stamps_seqs_atomically(redis_client):
    writer = sources.RedisStreamWriter(redis_client, 4)
    assert writer.write(OPS[:3]) == [0, 1, 2]
    assert writer.write(OPS[3:]) == [3, 4]
    key = Keys.stream_ops(4)
    entries = sources.read_redis_stream(redis_client, key, "0-0")
    assert [sources.split_seq(line)[0] for _, line in entries] == [0, 1, 2, 3, 4]
    middle = entries[1][0]
    assert [sources.split_seq(line)[0] for _, line in sources.read_redis_stream(redis_client, key, middle)] == [2, 3, 4]
    assert [sources.split_seq(line)[0] for _, line in sources.read_redis_stream(redis_client, key, "0-0", entries[2][0])] == [0, 1, 2]
    assert sources.redis_stream_last_id(redis_client, key) == entries[-1][0]
    assert sources.redis_stream_last_id(redis_client, "kw:missing") == "0-0"
    with pytest.raises(ValueError):
        writer.write(["{}"])


@pytest.mark.redis
def test_both_sources_share_the_stream_counter(redis_client, tmp_path):
    sources.writer_for(redis_client, 5, "redis", tmp_path).write(OPS[:2])
    assert sources.writer_for(redis_client, 5, "landing", tmp_path).write(OPS[2:3]) == [2]
    assert (tmp_path / "5").is_dir()
    with pytest.raises(ValueError):
        sources.writer_for(redis_client, 5, "kafka", tmp_path)


@pytest.mark.redis
@pytest.mark.parametrize("kind", ["landing", "redis"])
def test_a_turn_reads_the_ingest_clock_and_its_store_advances_it_with_the_seqs(redis_client, tmp_path, kind):
    writer = sources.writer_for(redis_client, 6, kind, tmp_path)
    with writer.turn() as turn:
        assert turn.clock is None  # nothing stored yet
        assert turn.store(OPS[:2], 1.0) == [0, 1]
        with pytest.raises(RuntimeError):
            turn.store(OPS[2:3], 2.0)
    assert sources.ingest_clock(redis_client, 6) == 1.0
    with writer.turn() as turn:
        assert turn.clock == 1.0
        assert turn.store([], 9.0) == []  # nothing stored: the clock stays
    assert writer.write(OPS[2:3]) == [2]  # a plain write stores the lines and leaves the clock
    with writer.turn() as turn:
        assert turn.clock == 1.0
        assert turn.store(OPS[3:], 1e15) == [3, 4]
    assert redis_client.get(Keys.stream_clock(6)) == repr(1e15)


@pytest.mark.redis
@pytest.mark.parametrize("kind", ["landing", "redis"])
def test_a_turn_with_a_key_finds_the_receipt_of_a_body_stored_under_it(redis_client, tmp_path, kind):
    writer = sources.writer_for(redis_client, 8, kind, tmp_path)
    with writer.turn("batch-1") as turn:
        assert turn.previous is None
        assert turn.store(OPS[:2], 1.0, "digest-1") == [0, 1]
    with writer.turn("batch-1") as turn:
        assert turn.previous == sources.Receipt("digest-1", 0, 2)  # stored, not answered yet
    writer.answer("batch-1", sources.Receipt("digest-1", 0, 2), {"accepted": 2})
    with writer.turn("batch-1") as turn:
        assert turn.previous == sources.Receipt("digest-1", 0, 2, {"accepted": 2})
    with writer.turn("batch-2") as turn:
        assert turn.previous is None
        assert turn.store(OPS[2:3], 2.0, "digest-2") == [2]
    assert writer.receipt("batch-2") == sources.Receipt("digest-2", 2, 1)


@pytest.mark.redis
def test_a_landing_receipt_counts_only_once_its_file_is_placed_and_outlives_redis(redis_client, tmp_path, monkeypatch):
    """Killed between the receipt and the landing file: the body was not stored, its retry stores it. A
    placed body's receipt is in the landing directory's receipts, so a Redis that lost everything still
    finds it; a receipt whose seqs a restarted counter gave to another body is not that body's."""
    writer = sources.writer_for(redis_client, 9, "landing", tmp_path)

    def killed(landing):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(sources.LandingWriter, "place", lambda self, landing: killed(landing))
        with pytest.raises(KeyboardInterrupt), writer.turn("lost") as turn:
            turn.store(OPS[:2], 1.0, "d")
    assert writer.receipt("lost") is None  # the file was never placed
    redis_client.flushdb()  # the counter restarts after the newest file: none, so seq 0 again
    with writer.turn("other") as turn:
        assert turn.store(OPS[2:4], 1.0, "e") == [0, 1]
    assert writer.receipt("lost") is None  # seq 0's file holds another body
    redis_client.flushdb()
    with writer.turn("other") as turn:
        assert turn.previous == sources.Receipt("e", 0, 2)
    assert writer.write(OPS[:1]) == [2]
    assert sources.prune_archive(tmp_path / "9", 0.0, time.time() + 1) == 0
    assert writer.receipt("other") is None  # pruned with the archive


@pytest.mark.redis
def test_writers_take_turns_so_each_reads_the_clock_the_one_before_left(redis_client, redis_url, tmp_path):
    """A turn holds the stream's lock from reading the clock to storing: a second writer (either source)
    waits, then reads the clock the first one left."""
    first = sources.LandingWriter(redis_client, 7, tmp_path / "7")
    inside, seen = threading.Event(), []

    def second():
        inside.wait()
        with sources.RedisStreamWriter(bus.connect(redis_url), 7).turn() as turn:
            seen.append(turn.clock)
            turn.store(OPS[2:3], 30.0)

    other = threading.Thread(target=second)
    other.start()
    with first.turn() as turn:
        inside.set()
        other.join(0.5)
        assert other.is_alive() and not seen  # waiting for the lock
        turn.store(OPS[:2], 20.0)
    other.join()
    assert seen == [20.0]
    assert sources.ingest_clock(redis_client, 7) == 30.0


def test_a_landing_file_archived_by_another_consumer_meanwhile_is_left_out(tmp_path, monkeypatch):
    """Two consumers of one directory: the other archives the newest file between this one's listing and
    its read (seen with five evaluators over one landing directory). It was applied by all: not listed,
    and no lines of it are owed."""
    (tmp_path / sources.landing_file_name(0)).write_text(
        "".join(sources.stamp(i, '{"op":"insert"}') + "\n" for i in range(2)))
    newest = tmp_path / sources.landing_file_name(2)
    scandir = os.scandir

    def archived_after_listing(path):
        entries = list(scandir(path))
        assert newest.name in [e.name for e in entries]
        newest.unlink()
        return iter(entries)

    monkeypatch.setattr(os, "scandir", archived_after_listing)
    newest.write_text(sources.stamp(2, '{"op":"insert"}') + "\n")
    assert sources.landing_files_through(tmp_path, 4) == [sources.landing_file_name(0)]
    newest.write_text(sources.stamp(2, '{"op":"insert"}') + "\n")
    assert sources.unapplied_landing_lines(tmp_path, 1, newest.name) == []


def _archive_files(directory, ages_hours, now):
    """Archived landing files of ``directory``, one per age (hours before ``now``), first seqs 0, 100, ..."""
    archive = sources.landing_archive(directory)
    archive.mkdir(parents=True, exist_ok=True)
    for i, age in enumerate(ages_hours):
        path = archive / sources.landing_file_name(100 * i)
        path.write_text(sources.stamp(100 * i, '{"op":"insert"}') + "\n")
        os.utime(path, (now - age * 3600, now - age * 3600))
    return archive


@pytest.mark.parametrize("kind", ["landing", "postgres"])
def test_pruning_a_stream_prunes_its_derived_archive_and_leaves_the_raw_one_rebuildable(tmp_path, kind):
    now = time.time()
    raw = _archive_files(sources.landing_directory(tmp_path, 3), [1, 2], now)
    derived = _archive_files(derived_directory(tmp_path, 3), [30, 25, 23, 0], now)
    assert sources.prune_archives(kind, 3, tmp_path, 24 * 3600, now) == 2
    assert sorted(p.name for p in derived.iterdir()) == [
        ".pruned", sources.landing_file_name(200), sources.landing_file_name(300)]
    assert len(list(raw.iterdir())) == 2 and not sources.landing_pruned(sources.landing_directory(tmp_path, 3))
    refuse_pruned(1, str(sources.landing_directory(tmp_path, 3)))  # a lost state is still rebuilt from the raw ops
    _archive_files(sources.landing_directory(tmp_path, 3), [48], now)
    assert sources.prune_archives(kind, 3, tmp_path, 24 * 3600, now) == 1
    with pytest.raises(RuntimeError, match="cannot be rebuilt"):
        refuse_pruned(1, str(sources.landing_directory(tmp_path, 3)))


def test_a_redis_stream_keeps_no_archive_to_prune(tmp_path):
    now = time.time()
    derived = _archive_files(derived_directory(tmp_path, 3), [30], now)
    assert sources.prune_archives("redis", 3, tmp_path, 24 * 3600, now) is None
    assert len(list(derived.iterdir())) == 1
    with pytest.raises(ValueError, match="unknown source kind"):
        sources.prune_archives("kafka", 3, tmp_path, 24 * 3600, now)


def test_a_lost_state_is_rebuilt_from_stored_lines_read_as_they_are_taken(tmp_path):
    """An evaluator started on an empty Redis after Spark committed files: every stored op up to the
    committed file, archived ones first, handed over lazily (millions of ops are not held at once)."""
    directory = tmp_path / "3"
    archive = sources.landing_archive(directory)
    archive.mkdir(parents=True)
    directory.mkdir()
    (archive / sources.landing_file_name(0)).write_text("".join(sources.stamp(i, OPS[i]) + "\n" for i in range(2)))
    (directory / sources.landing_file_name(2)).write_text(sources.stamp(2, OPS[2]) + "\n\n")
    (directory / sources.landing_file_name(3)).write_text(sources.stamp(3, OPS[3]) + "\n")
    source = {"kind": "landing", "path": str(directory)}
    offset = {"file": sources.landing_file_name(2)}
    lines, rebuild = sources.input_kind(source).recover(source, offset, -1, "redis://unused", 1)
    assert rebuild and iter(lines) is lines  # an iterator, not a list
    first = next(lines)  # the files are listed
    (directory / sources.landing_file_name(2)).rename(archive / sources.landing_file_name(2))  # archived meanwhile
    assert [sources.split_seq(line)[0] for line in [first, *lines]] == [0, 1, 2]
