"""``manage.py load_demo``: the E-commerce demo schema, user, stream and queries."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from kwmonitor.streams.demo import load_demo


class Command(BaseCommand):
    help = (
        "Load the E-commerce demo (idempotent): the schema, a staff user (password generated unless given), "
        "the stream 'shop' and three saved keyword queries."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", help="password of the demo user (default: generated for a new user, kept otherwise)")
        parser.add_argument("--stream", default="shop", help="name of the demo stream")
        parser.add_argument("--source", choices=("landing", "redis"), default="landing", help="source kind of a new stream")

    def handle(self, *args, **options) -> None:
        demo = load_demo(options["username"], options["password"], options["stream"], options["source"])
        self.stdout.write(f"schema {demo.schema.name!r}, stream {demo.stream.name!r} (id {demo.stream.pk}), "
                          f"{len(demo.queries)} queries")
        password = demo.password if demo.password else "(unchanged)"
        self.stdout.write(self.style.SUCCESS(f"user {demo.username!r} password {password}"))
