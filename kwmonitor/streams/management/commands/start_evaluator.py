"""``manage.py start_evaluator STREAM``: run a stream's evaluator (supervised from then on)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from kwmonitor.streams.models import Evaluator
from kwmonitor.streams.supervisor import Supervisor

from ._evaluators import describe, evaluator_of


class Command(BaseCommand):
    help = (
        "Start the evaluator of a stream (name or id) now and mark it to be kept running: "
        "the supervise task restarts it if it dies."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("stream", help="stream name or id")

    def handle(self, *args, **options) -> None:
        evaluator = self.start(options["stream"])
        self.stdout.write(self.style.SUCCESS(describe(evaluator, launched=True)))

    def start(self, stream: str) -> Evaluator:
        return Supervisor().start(evaluator_of(stream).pk)
