"""Op sources of a stream: where ops are written and where the evaluators read them.

One module per kind, each with its writer, its Spark reader, what is
recovered from it after a stop and how its archive is pruned:

- :mod:`.landing` — a landing directory of NDJSON files (the HTTP ingest
  writes it);
- :mod:`.redis_stream` — a Redis stream (the HTTP ingest writes it);
- :mod:`.postgres` — a PostgreSQL publication, whose capture
  (``streaming.capture``) writes a landing directory;
- :mod:`.derived` — the landing directory the stream's pre-processor writes.

:mod:`.registry` looks the kinds up by name (a stream's ``source_kind``, a
plan's ``source["kind"]``); nothing else compares kinds. Writers of every
kind take turns under the stream's lock (:mod:`.writer`); stored lines and
their seqs are ``streaming.stored_lines`` and ``streaming.seqs``.
"""

from streaming.seqs import applied_seq_of
from streaming.stored_lines import SourceError, line_seq, split_seq, stamp

from .landing import (LandingFile, LandingWriter, archived_lines_after, is_landing_file, landing_archive,
                      landing_directory, landing_file_name, landing_receipts, landing_file_seq, landing_files, landing_files_through,
                      landing_pruned, next_landing_seq, prune_archive, read_landing, unapplied_landing_lines,
                      write_atomic)
from .redis_stream import LINE_FIELD, RedisStreamWriter, read_redis_stream, redis_stream_last_id
from .registry import input_kind, input_seq, prune_archives, stream_kind, writer_for
from .writer import RECEIPT_SECONDS, Receipt, SourceWriter, WriteTurn, ingest_clock

__all__ = [
    "LINE_FIELD",
    "SourceError",
    "stamp",
    "split_seq",
    "line_seq",
    "applied_seq_of",
    "WriteTurn",
    "SourceWriter",
    "Receipt",
    "RECEIPT_SECONDS",
    "LandingFile",
    "LandingWriter",
    "RedisStreamWriter",
    "ingest_clock",
    "writer_for",
    "stream_kind",
    "input_kind",
    "input_seq",
    "prune_archives",
    "landing_directory",
    "landing_file_name",
    "is_landing_file",
    "landing_file_seq",
    "landing_archive",
    "landing_receipts",
    "prune_archive",
    "landing_pruned",
    "next_landing_seq",
    "landing_files",
    "landing_files_through",
    "read_landing",
    "unapplied_landing_lines",
    "archived_lines_after",
    "write_atomic",
    "read_redis_stream",
    "redis_stream_last_id",
]
