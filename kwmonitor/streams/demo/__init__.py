"""The E-commerce demo: schema, a user, a stream and saved queries (``manage.py load_demo``)."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from kwmonitor.catalog.models import Schema
from kwmonitor.queries.models import KeywordQuery, Predicate
from kwmonitor.streams.models import Stream

__all__ = ["DEMO_DIR", "DEMO_QUERIES", "Demo", "load_demo"]

DEMO_DIR = Path(__file__).resolve().parent

# (name, keywords, tmax, window seconds, predicates)
DEMO_QUERIES = [
    ("dress in texas", "dress texas", 5, 3600.0, []),
    ("wedding scarf over $40", "wedding scarf", 3, 1800.0, [("Product", "price", ">=", 40)]),
    ("boots to oregon", "boots oregon", 4, 3600.0, []),
]


@dataclass
class Demo:
    username: str
    password: str | None  # None: an existing user's password was kept
    schema: Schema
    stream: Stream
    queries: list[KeywordQuery]


def load_demo(username: str = "demo", password: str | None = None, stream_name: str = "shop",
              source_kind: str = "landing") -> Demo:
    """Create what is missing of the demo (idempotent); a new user gets ``password`` or a generated one."""
    with transaction.atomic():
        schema = Schema.objects.filter(name="ecommerce").first()
        if schema is None:
            schema = Schema.import_document(json.loads((DEMO_DIR / "schema.json").read_text()),
                                            description="The paper's E-commerce schema (demo).")
        users = get_user_model().objects
        user = users.filter(username=username).first()
        if user is None:
            password = password or secrets.token_urlsafe(9)
            user = users.create_superuser(username, f"{username}@example.com", password)
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
        stream, _ = Stream.objects.get_or_create(name=stream_name, defaults={"schema": schema, "source_kind": source_kind})
        queries = []
        for name, keywords, tmax, window, predicates in DEMO_QUERIES:
            query, created = KeywordQuery.objects.get_or_create(
                name=name, stream=stream,
                defaults={"owner": user, "schema": schema, "keywords": keywords, "tmax": tmax, "window_seconds": window},
            )
            if created:
                for relation, attribute, op, value in predicates:
                    Predicate.objects.create(query=query, relation=relation, attribute=attribute, op=op, value=value)
            queries.append(query)
    return Demo(username, password, schema, stream, queries)
