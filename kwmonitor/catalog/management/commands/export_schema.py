"""``manage.py export_schema NAME [-o FILE]``: write a schema's JSON document."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from kwmonitor.catalog.models import Schema
from streaming.schema import SchemaError


class Command(BaseCommand):
    help = "Export a schema as its JSON document (to stdout, or to a file with -o)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="schema name")
        parser.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")

    def handle(self, *args, **options) -> None:
        text = self.export(options["name"])
        if options["output"]:
            options["output"].write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")

    def export(self, name: str) -> str:
        schema = Schema.objects.filter(name=name).first()
        if schema is None:
            raise CommandError(f"no schema named {name!r}")
        try:
            return json.dumps(schema.graph().to_dict(), indent=1) + "\n"
        except SchemaError as exc:
            raise CommandError(f"schema {name!r} is invalid: {exc}") from None
