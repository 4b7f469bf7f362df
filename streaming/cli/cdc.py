"""``python -m streaming cdc``: capture a PostgreSQL publication into an NDJSON op file (docs/sources.md).

Writes the stream schema of the publication's tables (``--schema-out``), then
appends to ``--out`` one insert per row of a snapshot consistent with the
slot, then every committed change in commit order. The capture's state (the
slot's position and the live rows) is kept beside the file, in
``OPS.state`` (SQLite): started again with the same slot and file after any
kill, the file holds every committed change exactly once. Runs until
SIGTERM/SIGINT, or ``--idle-exit`` seconds without a change (exit 0).

The DSN is libpq's (``host=… dbname=… user=…`` or a ``postgresql://`` URL);
leave the password out of it and libpq reads ``PGPASSWORD`` or ``~/.pgpass``.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import orjson
import psycopg

from ..capture.capture import Capture, CaptureConfig
from ..capture.catalog import CatalogError, Publication
from ..capture import CaptureError
from ..capture.pgoutput import format_lsn
from ..capture.sinks import FileSink
from ..capture.state import CaptureState, StateBusy
from ..sources import write_atomic

__all__ = ["HELP", "add_arguments", "main", "state_path"]

HELP = "capture a PostgreSQL publication (snapshot, then every committed change) into an NDJSON op file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dsn", required=True, help="libpq connection string of the database")
    parser.add_argument("--publication", required=True, help="the publication whose tables are captured")
    parser.add_argument("--slot", required=True, help="logical replication slot (created if missing)")
    parser.add_argument("--schema-out", required=True, help="where the stream schema of the tables is written")
    parser.add_argument("--out", required=True, help="NDJSON op file, appended to (its state: OUT.state)")
    parser.add_argument("--idle-exit", type=float, default=None, metavar="SECONDS",
                        help="exit 0 after this many seconds without a change (default: run until stopped)")
    parser.add_argument("--batch-ops", type=int, default=10_000, help="ops sealed together at most (default 10000)")
    parser.add_argument("--batch-seconds", type=float, default=0.2,
                        help="longest a whole transaction waits for others before it is sealed (default 0.2)")


def state_path(out: str | Path) -> Path:
    """The capture state kept beside an op file."""
    out = Path(out)
    return out.with_name(out.name + ".state")


def main(args: argparse.Namespace) -> int:
    config = CaptureConfig(dsn=args.dsn, publication=args.publication, slot=args.slot, idle_exit=args.idle_exit,
                           batch_ops=args.batch_ops, batch_seconds=args.batch_seconds)

    def write_schema(publication: Publication) -> None:
        write_atomic(Path(args.schema_out), orjson.dumps(publication.schema_document(), option=orjson.OPT_INDENT_2))
        for note in publication.notes:
            print(f"note: {note}", file=sys.stderr)

    try:
        state = CaptureState(state_path(args.out))
    except StateBusy as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    capture = Capture(config, FileSink(args.out, state), on_schema=write_schema)
    signal.signal(signal.SIGTERM, lambda *_: capture.stop())
    signal.signal(signal.SIGINT, lambda *_: capture.stop())
    try:
        capture.run()
    except (CaptureError, CatalogError, psycopg.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        state.close()
    progress = capture.progress
    print(f"{progress.ops} ops stored through LSN {format_lsn(progress.lsn)} ({progress.transactions} transactions "
          "this run)", file=sys.stderr)
    return 0
