"""``manage.py feed_demo --stream NAME [--rate N] [--ops N]``: feed the demo's ops into a stream until stopped."""

from __future__ import annotations

from itertools import islice
from typing import Iterator

from django.core.management.base import BaseCommand, CommandError

from kwmonitor.ingest.management.commands.replay import Replayer
from kwmonitor.ingest.service import IngestClosed
from kwmonitor.streams.connection import redis_client
from kwmonitor.streams.demo import demo_feed
from kwmonitor.streams.demo.postgres import TableFeeder
from kwmonitor.streams.models import Stream
from streaming.sources import ingest_clock

LINES_PER_REPORT = 1000


class Command(BaseCommand):
    help = (
        "Feed the demo's E-commerce ops into a stream at --rate ops/s until stopped (or for --ops ops), generated "
        "as they are sent: fresh keys and growing timestamps, so its windows, results and dropping ratios keep "
        "changing, the season shifting every --shift-every ops and a bad line (a dead letter) after every "
        "--bad-every. It starts after the stream's ingest clock, so a feeder started again goes on where the "
        "stream is (`reset_stream` starts the demo over). A PostgreSQL-sourced stream gets the ops as SQL on its "
        "tables, from the start of the feed (rows already there are skipped). One line per 1,000 lines sent."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--stream", required=True, help="stream name or id")
        parser.add_argument("--rate", type=float, default=20.0, help="ops per second (0: as fast as possible)")
        parser.add_argument("--ops", type=int, default=0, help="ops to send, bad lines on top (0: until stopped)")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--shift-every", type=int, default=400, help="ops per season (0: no shift)")
        parser.add_argument("--bad-every", type=int, default=250, help="ops between two bad lines (0: none)")

    def handle(self, *args, **options) -> None:
        key = options["stream"]
        stream = Stream.objects.select_related("schema").filter(
            **({"pk": int(key)} if key.isdigit() else {"name": key})).first()
        if stream is None:
            raise CommandError(f"no stream {key!r}")
        if options["rate"] < 0:
            raise CommandError("--rate must be >= 0")
        try:
            self.feed(stream, options["rate"], options["ops"] or None, options["seed"], options["shift_every"],
                      options["bad_every"])
        except (IngestClosed, ValueError) as exc:
            raise CommandError(str(exc)) from None

    def lines(self, stream: Stream, ops: int | None, seed: int, shift_every: int, bad_every: int) -> Iterator[str]:
        """The demo feed from where the stream is: after its ingest clock (a captured stream: from the start)."""
        after = None if stream.is_captured else ingest_clock(redis_client(), stream.pk)
        if after is not None:
            self.stdout.write(f"the stream's clock is at ts {after:g}: the feed goes on after it")
        return demo_feed(ops, seed, shift_every, bad_every, after=after)

    def feed(self, stream: Stream, rate: float, ops: int | None, seed: int = 7, shift_every: int = 400,
             bad_every: int = 250) -> None:
        lines = self.lines(stream, ops, seed, shift_every, bad_every)
        if stream.is_captured:
            feeder = TableFeeder(stream, rate)
            while chunk := list(islice(lines, LINES_PER_REPORT)):
                result = feeder.run(chunk)
                self.stdout.write(f"{result.applied} ops applied, {len(result.skipped)} skipped")
                self.stdout.flush()
            return
        replayer = Replayer(stream, rate, batch_size=max(1, min(1000, int(rate))) if rate else None)
        while chunk := list(islice(lines, LINES_PER_REPORT)):
            result = replayer.run(iter(chunk))
            seqs = f" (seq {result.seqs[0]}..{result.seqs[-1]})" if result.seqs else ""
            self.stdout.write(f"{result.accepted} ops accepted{seqs}, {len(result.errors)} rejected")
            self.stdout.flush()
