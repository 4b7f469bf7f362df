"""``manage.py import_schema FILE [--replace]``: load a schema JSON document."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from kwmonitor.catalog.models import Schema
from streaming.schema import SchemaError


class Command(BaseCommand):
    help = "Import a schema JSON document (validated; nothing is written if it is invalid)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path, help="schema JSON file")
        parser.add_argument("--replace", action="store_true", help="overwrite a schema of the same name")
        parser.add_argument("--description", default="", help="description shown in the admin")

    def handle(self, *args, **options) -> None:
        schema = self.import_file(options["file"], options["replace"], options["description"])
        self.stdout.write(self.style.SUCCESS(f"imported schema {schema.name!r} ({schema.relations.count()} relations)"))

    def import_file(self, path: Path, replace: bool = False, description: str = "") -> Schema:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise CommandError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
        try:
            return Schema.import_document(doc, description=description, replace=replace)
        except SchemaError as exc:
            raise CommandError(f"{path}: {exc}") from None
