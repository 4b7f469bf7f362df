"""``manage.py load_postgres_demo``: the demo's tables in PostgreSQL and the stream captured from them."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from kwmonitor.streams.demo.postgres import DSN_ENV, PUBLICATION, load_postgres_demo
from streaming.capture.catalog import CatalogError


class Command(BaseCommand):
    help = (f"Make the demo's tables (emptied) and publication {PUBLICATION!r} in the database of the environment "
            f"variable {DSN_ENV} (a PostgreSQL with wal_level=logical: DEMO_POSTGRES=1 make run starts one), and the "
            "stream captured from them with the demo's queries (idempotent).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="demo", help="owner of the demo queries (load_demo makes it)")
        parser.add_argument("--stream", default="shop-pg", help="name of the stream")

    def handle(self, *args, **options) -> None:
        try:
            stream = load_postgres_demo(options["username"], options["stream"])
        except (ValueError, CatalogError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"stream {stream.name!r} (id {stream.pk}) captures publication {PUBLICATION!r} of "
                          f"${DSN_ENV}")
