"""The E-commerce demo: schema, a user, a stream and saved queries (``manage.py load_demo``), and its feed.

Every demo query has a predicate on Product, and two also on Customer, so the
ASC stage has work: Products priced 60 to 100 satisfy no query and are
dropped before any keyword engine. The feed (``manage.py write_demo_feed``)
alternates a sale season (cheap products, Texan customers) with a premium one
(dear products, Oregonians), so the dropping ratio shifts and the monitor
rearranges its sequences, and it carries a few bad lines that become dead
letters at ingest. Two queries share the keywords {dress, texas}, so they
share one sharing class, and three aggregate subscriptions give the
dashboards live tiles.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from streaming.ops import op_to_dict
from streaming.workloads import ecommerce

from django.contrib.auth import get_user_model
from django.db import transaction

from kwmonitor.catalog.models import Schema
from kwmonitor.queries.models import AggregateSubscription, KeywordQuery, Predicate
from kwmonitor.streams.models import Stream

__all__ = ["DEMO_DIR", "DEMO_QUERIES", "DEMO_AGGREGATES", "BAD_LINES", "Demo", "load_demo", "demo_queries",
           "demo_feed"]

DEMO_DIR = Path(__file__).resolve().parent

# (name, keywords, tmax, window seconds, predicates)
DEMO_QUERIES = [
    ("dress in texas, on sale", "dress texas", 5, 3600.0, [("Product", "price", "<", 60)]),
    ("wedding scarf over $100", "wedding scarf", 3, 1800.0, [("Product", "price", ">=", 100)]),
    ("boots to oregon", "boots oregon", 4, 3600.0,
     [("Product", "price", ">=", 100), ("Customer", "state", "=", "Oregon")]),
    ("gifts from Texans", "gift", 3, 1800.0, [("Product", "price", "<", 60), ("Customer", "state", "=", "Texas")]),
    ("dress in texas, under $30", "texas dress", 4, 1800.0, [("Product", "price", "<", 30)]),
]

# (name, source query name or None, source relation, aggregate, attribute, window s, step s, having)
DEMO_AGGREGATES = [
    ("average price, last 10 min", None, "Product", "avg", "price", 600, 60, ""),
    ("dress-in-texas results born per 10 min", "dress in texas, on sale", "", "count", "", 600, 60, ""),
    ("orders per 5 min, when busy", None, "Order", "count", "", 300, 60, ">= 50"),
]

# Lines a careless client sends: each becomes a dead letter at ingest, with its reason.
BAD_LINES = [
    '{"op":"insert","relation":"Customer","tuple":{"cid":',
    '{"op":"insert","relation":"Product","tuple":{"pid":"seven","title":"Silk scarf","price":30.0},"ts":1.0}',
    '{"op":"insert","relation":"Shipment","tuple":{"sid":1},"ts":1.0}',
    '{"op":"upsert","relation":"Order","key":1,"ts":1.0}',
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
        if not stream.user_queries:  # the demo's users write their own queries on it
            stream.user_queries = True
            stream.save(update_fields=["user_queries"])
        queries = demo_queries(stream, user)
    return Demo(username, password, schema, stream, queries)


def demo_queries(stream: Stream, user) -> list[KeywordQuery]:
    """The demo's queries and aggregate subscriptions on ``stream`` (made, or brought back to their definition)."""
    queries = []
    for name, keywords, tmax, window, predicates in DEMO_QUERIES:
        query, _ = KeywordQuery.objects.get_or_create(
            name=name, stream=stream,
            defaults={"owner": user, "schema": stream.schema, "keywords": keywords, "tmax": tmax,
                      "window_seconds": window},
        )
        wanted = [(r, a, o, v) for r, a, o, v in predicates]
        if [(p.relation, p.attribute, p.op, p.value) for p in query.predicates.all()] != wanted:
            query.predicates.all().delete()
            for relation, attribute, op, value in predicates:
                Predicate.objects.create(query=query, relation=relation, attribute=attribute, op=op, value=value)
        queries.append(query)
    by_name = {q.name: q for q in queries}
    for name, query_name, relation, aggregate, attribute, window, step, having in DEMO_AGGREGATES:
        AggregateSubscription.objects.get_or_create(
            name=name, stream=stream,
            defaults={"owner": user, "source_query": by_name.get(query_name) if query_name else None,
                      "source_relation": relation, "aggregate": aggregate, "attribute": attribute,
                      "window": window, "step": step, "having": having})
    return queries


def demo_feed(ops: int | None, seed: int = 7, shift_every: int = 400, bad_every: int = 250,
              after: float | None = None) -> Iterator[str]:
    """The demo's NDJSON lines: the shifting E-commerce workload with a bad line after every ``bad_every`` ops.

    ``ops`` None: endless (fresh keys and growing timestamps, so windows and results keep changing).
    ``after``: leave out the ops up to that ``ts`` and their bad lines (a feeder going on where its stream is).
    """
    workload = ecommerce.build(ops, seed, shift_every=shift_every)
    for n, op in enumerate(workload.ops(), 1):
        if after is not None and op.ts <= after:
            continue
        yield json.dumps(op_to_dict(op), separators=(",", ":"))
        if bad_every and n % bad_every == 0:
            yield BAD_LINES[(n // bad_every - 1) % len(BAD_LINES)]
