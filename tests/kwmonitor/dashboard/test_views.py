"""Dashboard pages: login required, visibility, and pages rendered with their data."""

from __future__ import annotations

import json
import re
import time

import pytest

from streaming import bus
from streaming.events import BatchMetrics, EvaluatorStatus

from .conftest import added

pytestmark = [pytest.mark.redis, pytest.mark.django_db]

PAGES = ["/", "/queries/{query}/", "/streams/{stream}/", "/schemas/{schema}/"]


def page(template: str, query) -> str:
    return template.format(query=query.pk, stream=query.stream_id, schema=query.schema_id)


@pytest.mark.parametrize("template", PAGES)
def test_login_required(client, query, template):
    response = client.get(page(template, query))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize("template", PAGES)
def test_pages_render_for_the_owner(user_client, query, redis_client, template):
    response = user_client.get(page(template, query))
    assert response.status_code == 200
    assert b"kwmonitor" in response.content


def test_another_users_query_and_stream_are_not_found(client, query, django_user_model, redis_client):
    client.force_login(django_user_model.objects.create_user("bob", "bob@example.com", "bob-password-1"))
    assert client.get(f"/queries/{query.pk}/").status_code == 404
    assert client.get(f"/streams/{query.stream_id}/").status_code == 404
    overview = client.get("/").content.decode()
    assert query.name not in overview and "shop" not in overview


def test_staff_see_every_query(staff_client, query, redis_client):
    assert staff_client.get(f"/queries/{query.pk}/").status_code == 200
    assert query.name in staff_client.get("/").content.decode()


def test_overview_shows_live_counts_liveness_and_both_rates(user_client, query, redis_client, client):
    q, s = query.pk, query.stream_id
    bus.publish_changes(redis_client, q, [added(q, 1), added(q, 2)])
    evaluator = query.stream.evaluator
    bus.publish_stream_event(redis_client, s, EvaluatorStatus(evaluator=evaluator.pk, stream=s, status="running", ts=1.0))
    last = bus.publish_stream_event(
        redis_client, s,
        BatchMetrics(evaluator=1, stream=s, batch_id=3, input_rows=120, rows_per_second=42.5, duration_ms=81.0, ts=2.0),
    )
    html = user_client.get("/").content.decode()
    row = re.search(rf'<tr data-stream="{s}">.*?</tr>', html, re.S).group(0)
    # no heartbeat: the last "running" event does not make it running; nothing ingested: idle, no stale rate
    assert 'class="badge stopped"' in row and "42.5" not in row and '<span class="idle">idle</span>' in row
    assert "81 ms" in row and ">120<" in row
    assert "Input ops/s" in html and "Processing rows/s" in html
    assert re.search(r'<td class="num" data-field="live">2</td>\s*</tr>', html)  # two live results of the query
    config = json.loads(re.search(r'<script id="overview-config" type="application/json">(.*?)</script>', html).group(1))
    assert config == [{"stream": s, "after": last}]

    bus.write_heartbeat(redis_client, EvaluatorStatus(evaluator=evaluator.pk, stream=s, status="running", pid=7, ts=time.time()))
    bus.record_ingest(redis_client, s, 50)
    row = re.search(rf'<tr data-stream="{s}">.*?</tr>', user_client.get("/").content.decode(), re.S).group(0)
    assert 'class="badge running"' in row and "42.5" in row and ">5.0<" in row  # 50 ops over the 10 s window


def test_query_page_carries_its_feed_and_rate_history(user_client, query, redis_client):
    q = query.pk
    bus.publish_changes(redis_client, q, [added(q, 1), added(q, 2)])
    html = user_client.get(f"/queries/{q}/").content.decode()
    assert '<span class="chip">dress</span>' in html and '<span class="chip">texas</span>' in html
    assert 'id="count-live">2<' in html
    config = json.loads(re.search(r'<script id="query-config" type="application/json">(.*?)</script>', html).group(1))
    assert config["feed"] == f"/ws/queries/{q}/" and config["config"]["keywords"] == ["dress", "texas"]
    assert sum(adds for _, adds, _ in config["rates"]) == 2


def test_page_text_is_escaped(user_client, query, redis_client):
    query.name = "<script>alert(1)</script>"
    query.save()
    html = user_client.get(f"/queries/{query.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_schema_page_draws_every_relation_and_foreign_key(user_client, query, demo_schema_doc, redis_client):
    html = user_client.get(f"/schemas/{query.schema_id}/").content.decode()
    for rel in demo_schema_doc["relations"]:
        assert f'data-relation="{rel["name"]}"' in html
        for fk in rel.get("foreign_keys", []):
            assert f'data-fk="{rel["name"]}.{fk["name"]}"' in html


def test_filter_subscription_pages_render_one_tuple_results(user_client, query, redis_client):
    from streaming.events import ResultAdded, ResultView, TupleView, result_key

    query.keywords = ""
    query.save()
    query.predicates.create(relation="Product", attribute="price", op=">=", value=40.0)
    q = query.pk
    view = ResultView(key=result_key([["Product", 1]], []), edges=[], tuples=[
        TupleView(relation="Product", key=1, values={"pid": 1, "title": "Summer dress", "price": 40.0})])
    bus.publish_changes(redis_client, q, [ResultAdded(query=q, seq=3, result=view)])
    html = user_client.get(f"/queries/{q}/").content.decode()
    assert '<span class="chip">filter subscription</span>' in html and 'id="query-tmax-item" hidden' in html
    assert 'id="count-live">1<' in html and "each tuple that satisfies the predicates" in html
    assert "Product.price &gt;= 40.0" in html
    config = json.loads(re.search(r'<script id="query-config" type="application/json">(.*?)</script>', html).group(1))
    assert config["config"]["keywords"] == []
    assert '<span class="chip">filter subscription</span>' in user_client.get("/").content.decode()
