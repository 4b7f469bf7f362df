"""``manage.py narrow_stream STREAM``: narrow every sharing class of a stream now."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from kwmonitor.streams.models import Stream
from kwmonitor.streams.plans import request_narrowing

from ._evaluators import evaluator_of


class Command(BaseCommand):
    help = ("Narrow every sharing class of a stream (name or id) to what its current queries need, at the "
            "evaluator's next batch (classes are otherwise narrowed on demand by the cost rule of docs/sharing.md).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("stream", help="stream name or id")

    def handle(self, *args, **options) -> None:
        stream = self.narrow(options["stream"])
        self.stdout.write(self.style.SUCCESS(
            f"stream {stream.name!r}: narrowing requested (request {stream.narrow_requests}); "
            "the evaluator applies it at its next batch"))

    def narrow(self, name: str) -> Stream:
        return request_narrowing(evaluator_of(name).stream)

