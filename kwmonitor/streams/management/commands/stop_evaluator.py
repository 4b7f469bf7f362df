"""``manage.py stop_evaluator STREAM``: stop a stream's evaluator and keep it stopped."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from kwmonitor.streams.models import Evaluator
from kwmonitor.streams.supervisor import Supervisor

from ._evaluators import describe, evaluator_of


class Command(BaseCommand):
    help = "Stop the evaluator of a stream (name or id): SIGTERM, then SIGKILL after the stop timeout."

    def add_arguments(self, parser) -> None:
        parser.add_argument("stream", help="stream name or id")

    def handle(self, *args, **options) -> None:
        evaluator = self.stop(options["stream"])
        self.stdout.write(self.style.SUCCESS(describe(evaluator)))

    def stop(self, stream: str) -> Evaluator:
        return Supervisor().stop(evaluator_of(stream).pk)
