"""``manage.py feed_postgres FILE --stream NAME [--rate N]``: write an NDJSON op file into a captured stream's
tables as SQL (the demo's feeder of its PostgreSQL-sourced stream)."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from kwmonitor.streams.demo.postgres import TableFeeder
from kwmonitor.streams.models import Stream


class Command(BaseCommand):
    help = ("Apply an NDJSON op file to the tables of a PostgreSQL-sourced stream as INSERTs and DELETEs, at "
            "--rate ops/s (lines that are not ops of its schema, or that the database refuses, are skipped).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--stream", required=True, help="stream name or id")
        parser.add_argument("--rate", type=float, default=0.0, help="ops per second (0: as fast as possible)")

    def handle(self, *args, **options) -> None:
        key = options["stream"]
        stream = Stream.objects.filter(**({"pk": int(key)} if key.isdigit() else {"name": key})).first()
        if stream is None or not stream.is_captured:
            raise CommandError(f"no PostgreSQL-sourced stream {key!r}")
        if not options["file"].is_file():
            raise CommandError(f"{options['file']}: no such file")
        started = time.monotonic()
        try:
            feeder = TableFeeder(stream, options["rate"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        with options["file"].open(encoding="utf-8") as lines:
            result = feeder.run(lines)
        elapsed = time.monotonic() - started
        for reason in result.skipped[:20]:
            self.stderr.write(f"skipped: {reason}")
        self.stdout.write(f"{result.applied} ops applied, {len(result.skipped)} skipped, {elapsed:.1f} s")
