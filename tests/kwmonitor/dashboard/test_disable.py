"""Disabling a query keeps its results as they were, as its page says; enabling it again brings them up to date.

The real evaluator (no Spark: batches handed to it as the Spark driver does) on the plans the web tier
writes, the owner's clicks on the query page, and the query's websocket feed."""

from __future__ import annotations

import asyncio
import json

import pytest

from kwmonitor.streams.plans import publish_plan
from streaming import bus
from streaming.evaluator import GroupEvaluator, group_keywords
from streaming.parsed import parse_stored_line
from streaming.schema import Schema
from streaming.sources import stamp
from tests.streaming.test_evaluator import OPS, reference

from .test_consumers import communicator, session_cookie

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

LINES = [stamp(i, json.dumps(op, separators=(",", ":"))) for i, op in enumerate(OPS)]


def batch(evaluator: GroupEvaluator, batch_id: int, lines: list[str]) -> None:
    """What the Spark driver does with a micro-batch: parse with the plan's keywords, apply."""
    assert evaluator.session.plan is not None
    schema = Schema.from_dict(evaluator.session.plan.stream.schema_)
    keywords = group_keywords(bus.read_plan(evaluator.client, evaluator.evaluator_id))
    evaluator.apply_batch(batch_id, [parse_stored_line(line, schema, keywords) for line in lines])


def snapshot(query_id: int, user) -> dict:
    cookie = session_cookie(user)

    async def first() -> dict:
        ws = communicator(f"/ws/queries/{query_id}/", cookie)
        assert (await ws.connect())[0]
        message = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return message

    return asyncio.run(first())


def test_a_disabled_query_keeps_its_results_as_they_were_and_its_page_says_so(query, user, redis_client, client):
    publish_plan(query.stream_id)  # into the test's Redis, flushed after the query was saved
    evaluator = GroupEvaluator(redis_client, query.stream.evaluator.pk)
    evaluator.start()
    batch(evaluator, 0, LINES[:18])
    kept = {r.key for r in bus.read_snapshot(redis_client, query.pk)[1]}
    assert kept and kept == reference(OPS[:18], tmax=4)[1]
    changes = redis_client.xlen(bus.Keys.changes(query.pk))

    client.force_login(user)
    client.post(f"/queries/{query.pk}/enabled/", {"enabled": "off"})
    assert evaluator.refresh_plan()  # the evaluator's heartbeat thread adopts the plan between batches
    batch(evaluator, 1, LINES[18:])  # ops that add and remove results of "dress texas"

    assert {r["key"] for r in snapshot(query.pk, user)["results"]} == kept
    assert redis_client.xlen(bus.Keys.changes(query.pk)) == changes + 1  # the query.updated announcement only
    page = client.get(f"/queries/{query.pk}/").content.decode()
    assert "results kept as they were" in page
    assert f'<div class="value" id="count-live">{len(kept)}</div>' in page

    client.post(f"/queries/{query.pk}/enabled/", {"enabled": "on"})
    assert evaluator.refresh_plan()
    now = reference(OPS, tmax=4)[1]  # what `python -m streaming run` ends with
    assert now != kept and {r["key"] for r in snapshot(query.pk, user)["results"]} == now

    query.delete()  # a deleted query's results go
    evaluator.refresh_plan()
    assert bus.read_snapshot(redis_client, query.pk)[1] == []
