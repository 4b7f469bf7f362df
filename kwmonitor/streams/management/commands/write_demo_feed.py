"""``manage.py write_demo_feed FILE``: the demo's op lines (a shifting E-commerce stream and a few bad lines)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from kwmonitor.streams.demo import demo_feed


class Command(BaseCommand):
    help = ("Write the demo feed: E-commerce ops whose distribution shifts every --shift-every ops (so the ASC "
            "monitor rearranges) with a bad line (a future dead letter) after every --bad-every ops.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path, help="NDJSON file to write")
        parser.add_argument("--ops", type=int, default=20_000, help="number of ops (bad lines come on top)")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--shift-every", type=int, default=400, help="ops per season (0: no shift)")
        parser.add_argument("--bad-every", type=int, default=250, help="ops between two bad lines (0: none)")

    def handle(self, *args, **options) -> None:
        path: Path = options["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = demo_feed(options["ops"], options["seed"], options["shift_every"], options["bad_every"])
        with path.open("w", encoding="utf-8") as out:
            written = sum(out.write(line + "\n") > 0 for line in lines)
        self.stdout.write(f"{path}: {written} lines")
