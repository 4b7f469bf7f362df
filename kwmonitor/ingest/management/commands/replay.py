"""``manage.py replay FILE --stream ID [--rate N]``: feed an NDJSON op file into a stream."""

from __future__ import annotations

import time
from itertools import islice
from pathlib import Path
from typing import Callable, TextIO

from django.core.management.base import BaseCommand, CommandError

from kwmonitor.ingest.service import IngestClosed, IngestResult, Ingestor
from kwmonitor.streams.models import Stream


class Replayer:
    """Sends a file's lines through the stream's :class:`Ingestor` at ``rate`` ops/s (0: unpaced)."""

    def __init__(self, stream: Stream, rate: float = 0.0, batch_size: int | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        if rate < 0:
            raise ValueError("rate must be >= 0")
        self.ingestor = Ingestor(stream)
        self.rate = rate
        self.batch_size = batch_size or (max(1, min(1000, int(rate / 20))) if rate else 1000)
        self.sleep = sleep
        self.clock = clock

    def run(self, lines: TextIO) -> IngestResult:
        total = IngestResult()
        start = self.clock()
        sent = 0
        while True:
            chunk = list(islice(lines, self.batch_size))
            if not chunk:
                return total
            if self.rate:
                wait = start + sent / self.rate - self.clock()
                if wait > 0:
                    self.sleep(wait)
            result = self.ingestor.ingest(chunk, first_line=sent + 1)
            total.seqs += result.seqs
            total.errors += result.errors
            sent += len(chunk)


class Command(BaseCommand):
    help = "Replay an NDJSON file of ops into a stream's source (validated like the ingest endpoint)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="NDJSON ops, one per line")
        parser.add_argument("--stream", type=int, required=True, help="stream id")
        parser.add_argument("--rate", type=float, default=0.0, help="ops per second (0: as fast as possible)")
        parser.add_argument("--batch-size", type=int, default=None, help="lines per write (default: rate/20, at most 1000)")

    def handle(self, *args, **options):
        stream = Stream.objects.select_related("schema").filter(pk=options["stream"]).first()
        if stream is None:
            raise CommandError(f"no stream with id {options['stream']}")
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            replayer = Replayer(stream, options["rate"], options["batch_size"])
        except IngestClosed as exc:
            raise CommandError(str(exc)) from None
        started = time.monotonic()
        with path.open(encoding="utf-8") as lines:
            result = replayer.run(lines)
        elapsed = time.monotonic() - started
        for error in result.errors:
            self.stderr.write(f"{path}:{error.line}: {error.reason}")
        seqs = f" (seq {result.seqs[0]}..{result.seqs[-1]})" if result.seqs else ""
        self.stdout.write(
            f"{result.accepted} ops accepted{seqs}, {len(result.errors)} rejected, "
            f"{elapsed:.1f} s ({result.accepted / elapsed if elapsed > 0 else 0:.0f} ops/s)"
        )
