"""The derived source: the landing directory the stream's pre-processor writes.

``{LANDING_DIR}/.derived/{stream_id}/`` holds one file of derived records
per batch of the raw source, named by the batch's first seq (docs/scaling.md,
"The pre-processor"), read with the landing source's ``kwlanding`` reader
and archived like it. A plan's derived source carries its raw source under
``raw``: the pre-processor reads that one. The records are decoded on the
driver (:class:`DerivedReader`), not parsed again by the executors.

Its archive is pruned by age like the landing archive (the same
``LANDING_ARCHIVE_HOURS``): nothing reads it again. A lost evaluator state is
never rebuilt from the derived stream (:meth:`DerivedSource.replay`) but from
the raw landing directory, whose own archive and pruned mark
(``refuse_pruned``) it leaves alone; the pre-processor never writes a file
again at or below its last derived seq, so no pruned file comes back.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

import orjson
import redis

from streaming.bus import Keys
from streaming.parsed import ParsedOp
from streaming.preprocess import derived_rows
from streaming.schema import Schema
from streaming.seqs import applied_seq_of

from .landing import committed_landing_lines, landing_reader, prune_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamReader

__all__ = ["derived_directory", "DerivedReader", "DerivedSource", "DERIVED"]


def derived_directory(landing_root: str | Path, stream_id: int) -> Path:
    """``{LANDING_DIR}/.derived/{stream_id}`` (the derived landing directory of a stream)."""
    return Path(landing_root) / ".derived" / str(stream_id)


class Reading(Protocol):
    """What a reader of derived records needs of its evaluator."""

    stream_id: int | None
    schema: Schema | None
    keywords: frozenset[str]


class DerivedReader:
    """Turns a batch of the pre-processor's derived records into an evaluator's rows.

    The vocabulary of each needs version comes from the stream's Redis hash
    (re-read when a record names a version not seen yet). A record's keyword
    hits are trusted, restricted to the evaluator's own keywords, only when
    every record of the batch was derived with a vocabulary holding all of
    them; otherwise (a query joined after the records were derived) the
    evaluator classifies the tuples itself.
    """

    def __init__(self, client: redis.Redis):
        self.client = client
        self.vocabularies: dict[int, tuple[str, ...]] = {}

    def _vocabularies(self, stream_id: int) -> dict[int, tuple[str, ...]]:
        raw = self.client.hgetall(Keys.stream_vocabularies(stream_id))
        self.vocabularies = {int(v): tuple(orjson.loads(words)) for v, words in raw.items()}
        return self.vocabularies

    def rows(self, evaluator: Reading, lines: list[str], version: int) -> tuple[list[ParsedOp], int | None]:
        """The rows, and ``version`` if their hits may be trusted (else None)."""
        assert evaluator.stream_id is not None and evaluator.schema is not None
        try:
            rows, versions = derived_rows(lines, self.vocabularies, evaluator.schema)
        except KeyError:  # a version written since the last read
            rows, versions = derived_rows(lines, self._vocabularies(evaluator.stream_id), evaluator.schema)
        own = evaluator.keywords
        if not all(own <= set(self.vocabularies.get(v, ())) for v in versions):
            return rows, None
        return [r if not r.hits else replace(r, hits=tuple(w for w in r.hits if w in own)) for r in rows], version


class DerivedSource:
    """The derived kind: what the evaluators of a stream with a pre-processor read."""

    name = "derived"
    checkpoint = "query-derived"  # its own offsets: raw and derived files do not start at the same seqs

    def spec(self, stream_id: int, landing_root: str | Path, consumers: list[int],
             raw: dict[str, Any]) -> dict[str, Any]:
        """The plan's source: the derived directory read by ``consumers``, over the ``raw`` source."""
        return {"kind": self.name, "path": str(derived_directory(landing_root, stream_id).resolve()),
                "consumers": consumers, "consumers_key": Keys.landing_consumers(stream_id, "derived"), "raw": raw}

    def prune(self, stream_id: int, landing_root: str | Path, keep_seconds: float, now: float) -> int:
        """Delete the derived directory's archived files older than ``keep_seconds``; how many."""
        return prune_archive(derived_directory(landing_root, stream_id), keep_seconds, now)

    def reader(self, spark: "SparkSession", source: dict[str, Any], redis_url: str,
               applied_key: str | None) -> "DataStreamReader":
        return landing_reader(spark, source, redis_url, applied_key)

    def row_reader(self, client: redis.Redis) -> DerivedReader:
        return DerivedReader(client)

    def recover(self, source: dict[str, Any], offset: dict[str, Any], applied_seq: int, redis_url: str,
                evaluator_id: int) -> tuple[list[str], bool]:
        return committed_landing_lines(source, offset, applied_seq), False

    def catch_up(self, source: dict[str, Any], applied_seq: int) -> list[str]:
        return []

    def replay(self, source: dict[str, Any], evaluator_id: int, upto: int) -> Iterator[str] | None:
        return None

    def input_seq(self, client: redis.Redis, stream_id: int, source: dict[str, Any]) -> int:
        """The pre-processor's last derived seq (what its raw consumers applied)."""
        return max((applied_seq_of(client, Keys.evaluator_state(p)) for p in source["raw"].get("consumers", [])),
                   default=-1)

    def raw(self, source: dict[str, Any]) -> dict[str, Any]:
        return source["raw"]


DERIVED = DerivedSource()
