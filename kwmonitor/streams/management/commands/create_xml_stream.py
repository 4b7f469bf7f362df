"""``manage.py create_xml_stream NAME --dtd D.dtd --mapping M.json``: declare an XML stream in one step.

The stream's schema is the mapping's relations (``ItemMapping.schema``),
imported under the stream's name (or replaced with ``--replace``); the DTD and
mapping are checked as the admin checks them before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from pydantic import ValidationError as PydanticError

from kwmonitor.catalog.models import Schema
from kwmonitor.streams.models import SOURCE_KINDS, Stream
from streaming.schema import SchemaError
from streaming.xmlstream.mapping import ItemMapping


class Command(BaseCommand):
    help = ("Create an XML stream from its DTD and its mapping of items to relations; the stream's schema is "
            "made from the mapping. Prints the stream id and its ingest token.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="stream name (subscriptions read it as stream(\"NAME\"))")
        parser.add_argument("--dtd", type=Path, required=True, help="the DTD of the stream's document")
        parser.add_argument("--mapping", type=Path, required=True, help="the mapping JSON (docs/wxquery.md)")
        parser.add_argument("--source", choices=[k for k, _ in SOURCE_KINDS], default="landing")
        parser.add_argument("--replace", action="store_true", help="replace a schema of that name")

    def handle(self, *args, **options) -> None:
        try:
            dtd = options["dtd"].read_text(encoding="utf-8")
            mapping = json.loads(options["mapping"].read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        stream = self.create(options["name"], dtd, mapping, options["source"], options["replace"])
        self.stdout.write(f"stream {stream.pk} {stream.name!r}: POST /ingest/{stream.pk}/ "
                          f"(Content-Type: application/xml) with Authorization: Bearer {stream.ingest_token}")

    def create(self, name: str, dtd: str, mapping: dict, source: str = "landing", replace: bool = False) -> Stream:
        """The new stream (with its schema); :class:`CommandError` naming what is wrong, nothing written then."""
        if Stream.objects.filter(name=name).exists():
            raise CommandError(f"a stream named {name!r} exists")
        try:
            schema_doc = ItemMapping.model_validate(mapping).schema(name)
        except PydanticError as exc:
            raise CommandError(f"the mapping: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}") from None
        try:
            with transaction.atomic():
                schema = Schema.import_document(schema_doc, description=f"relations of the XML stream {name}",
                                                replace=replace)
                stream = Stream(name=name, schema=schema, source_kind=source, item_format="xml", dtd=dtd,
                                xml_mapping=mapping)
                stream.full_clean()
                stream.save()
        except SchemaError as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        return stream
