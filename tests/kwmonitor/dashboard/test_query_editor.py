"""The dashboard's query editor: users write, edit, disable and delete their own queries, validated as the admin
validates them, previewed with counts, sharing class and cost; nobody touches another user's query."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from kwmonitor.queries.models import KeywordQuery, Predicate
from kwmonitor.streams.models import Stream
from streaming import bus
from streaming.events import SharingReport

pytestmark = [pytest.mark.django_db, pytest.mark.redis]


@pytest.fixture
def shop(ecommerce_schema, redis_client):
    return Stream.objects.create(name="shop", schema=ecommerce_schema, user_queries=True)


@pytest.fixture
def other(django_user_model):
    return django_user_model.objects.create_user("bea", "bea@example.com", "bea-password-1")


def post(**fields) -> dict:
    """The editor's form as the browser posts it: the query's fields and its predicates formset."""
    predicates = fields.pop("predicates", [])
    initial = fields.pop("initial", 0)
    data = {"name": "dresses", "keywords": "dress texas", "tmax": "4", "window_seconds": "", "enabled": "on",
            "predicates-TOTAL_FORMS": str(len(predicates)), "predicates-INITIAL_FORMS": str(initial),
            "predicates-MIN_NUM_FORMS": "0", "predicates-MAX_NUM_FORMS": "1000"}
    for i, predicate in enumerate(predicates):
        data.update({f"predicates-{i}-{k}": v for k, v in predicate.items()})
    data.update(fields)
    return data


def test_a_user_writes_a_query_with_predicates(user_client, user, shop):
    data = post(stream=str(shop.pk), predicates=[
        {"relation": "Product", "attribute": "price", "op": "<", "value": "60"},
        {"relation": "Customer", "attribute": "state", "op": "=", "value": '"Texas"'}])
    response = user_client.post(reverse("dashboard:query-new"), data)
    query = KeywordQuery.objects.get(name="dresses")
    assert response.status_code == 302 and response["Location"] == reverse("dashboard:query", args=[query.pk])
    assert (query.owner, query.schema, query.stream, query.keywords, query.tmax) == (user, shop.schema, shop,
                                                                                     "dress texas", 4)
    assert sorted((p.relation, p.attribute, p.op, p.value) for p in query.predicates.all()) == [
        ("Customer", "state", "=", "Texas"), ("Product", "price", "<", 60.0)]
    page = user_client.get(reverse("dashboard:query", args=[query.pk])).content.decode()
    assert "Saved &#x27;dresses&#x27;" in page and 'id="edit-query"' in page


@pytest.mark.parametrize("fields, message", [
    ({"keywords": "dress dress"}, "keyword"),
    ({"keywords": "summer-dress"}, "keyword"),
    ({"tmax": "11"}, "10"),
    ({"window_seconds": "0"}, "0.001"),
    ({"keywords": ""}, "A query needs keywords, or at least one predicate"),
    ({"predicates": [{"relation": "Product", "attribute": "colour", "op": "=", "value": '"red"'}]},
     "unknown attribute 'colour' of Product"),
    ({"predicates": [{"relation": "Product", "attribute": "price", "op": "<", "value": '"cheap"'}]},
     "Product.price: expected float, got 'cheap'"),
    ({"predicates": [{"relation": "Product", "attribute": "price", "op": "between", "value": "[90, 10]"}]},
     "low 90.0 is above high 10.0"),
    ({"predicates": [{"relation": "Nope", "attribute": "price", "op": "=", "value": "1"}]}, "unknown relation 'Nope'"),
])
def test_the_server_refuses_what_the_admin_refuses(user_client, shop, fields, message):
    response = user_client.post(reverse("dashboard:query-new"), post(stream=str(shop.pk), **fields))
    assert response.status_code == 200 and not KeywordQuery.objects.exists()
    assert message in response.content.decode().replace("&#x27;", "'")


def test_only_streams_open_to_user_queries_take_them(user_client, ecommerce_schema, redis_client):
    closed = Stream.objects.create(name="closed", schema=ecommerce_schema)
    assert 'id="no-stream"' in user_client.get(reverse("dashboard:query-new")).content.decode()
    assert 'id="new-query"' not in user_client.get(reverse("dashboard:overview")).content.decode()
    Stream.objects.create(name="open", schema=ecommerce_schema, user_queries=True)
    page = user_client.get(reverse("dashboard:query-new")).content.decode()
    assert ">open</option>" in page and ">closed</option>" not in page
    response = user_client.post(reverse("dashboard:query-new"), post(stream=str(closed.pk)))
    assert "Select a valid choice" in response.content.decode() and not KeywordQuery.objects.exists()


def test_a_user_never_sees_nor_edits_another_users_query(client, user, other, shop, staff_user):
    theirs = KeywordQuery.objects.create(owner=other, name="bea's secret", schema=shop.schema, stream=shop,
                                         keywords="gift", tmax=3)
    client.force_login(user)
    for name in ("query", "query-edit", "query-delete"):
        assert client.get(reverse(f"dashboard:{name}", args=[theirs.pk])).status_code == 404
    assert client.post(reverse("dashboard:query-enabled", args=[theirs.pk]), {"enabled": "off"}).status_code == 404
    assert client.post(reverse("dashboard:query-delete", args=[theirs.pk])).status_code == 404
    assert client.post(reverse("dashboard:query-edit", args=[theirs.pk]),
                       post(stream=str(shop.pk), name="taken")).status_code == 404
    assert client.post(reverse("dashboard:query-preview"), post(stream=str(shop.pk), query=str(theirs.pk))
                       ).status_code == 404
    assert "bea&#x27;s secret" not in client.get(reverse("dashboard:overview")).content.decode()
    theirs.refresh_from_db()
    assert (theirs.name, theirs.enabled) == ("bea's secret", True)
    client.force_login(staff_user)  # staff see and edit everyone's
    assert "bea&#x27;s secret" in client.get(reverse("dashboard:overview")).content.decode()
    response = client.post(reverse("dashboard:query-edit", args=[theirs.pk]),
                           post(stream=str(shop.pk), name="renamed by staff", keywords="gift"))
    assert response.status_code == 302
    theirs.refresh_from_db()
    assert theirs.name == "renamed by staff" and theirs.owner == other


def test_edit_disable_enable_and_delete(user_client, user, shop):
    query = KeywordQuery.objects.create(owner=user, name="mine", schema=shop.schema, stream=shop, keywords="dress",
                                        tmax=3)
    kept = Predicate.objects.create(query=query, relation="Product", attribute="price", op="<", value=60)
    gone = Predicate.objects.create(query=query, relation="Customer", attribute="state", op="=", value="Texas")
    data = post(stream=str(shop.pk), name="mine", keywords="dress boots", initial=2, predicates=[
        {"id": str(kept.pk), "relation": "Product", "attribute": "price", "op": ">=", "value": "100"},
        {"id": str(gone.pk), "relation": "Customer", "attribute": "state", "op": "=", "value": '"Texas"',
         "DELETE": "on"},
        {"relation": "Customer", "attribute": "state", "op": "!=", "value": '"Oregon"'}])
    assert user_client.post(reverse("dashboard:query-edit", args=[query.pk]), data).status_code == 302
    query.refresh_from_db()
    assert query.keywords == "dress boots"
    assert sorted((p.attribute, p.op, p.value) for p in query.predicates.all()) == [
        ("price", ">=", 100.0), ("state", "!=", "Oregon")]
    user_client.post(reverse("dashboard:query-enabled", args=[query.pk]), {"enabled": "off"})
    query.refresh_from_db()
    assert not query.enabled
    user_client.post(reverse("dashboard:query-enabled", args=[query.pk]), {"enabled": "on"})
    query.refresh_from_db()
    assert query.enabled
    assert "Delete mine?" in user_client.get(reverse("dashboard:query-delete", args=[query.pk])).content.decode()
    assert user_client.post(reverse("dashboard:query-delete", args=[query.pk])).status_code == 302
    assert not KeywordQuery.objects.filter(pk=query.pk).exists()


def report(stream: Stream, classes: list[dict], ops: int = 1000) -> SharingReport:
    return SharingReport(stream=stream.pk, evaluator=stream.evaluator.pk, sharing="widen", classes=classes,
                         totals={"ops": ops}, ts=time.time())


def test_the_preview_says_which_class_it_joins_and_what_it_costs(client, user, other, shop, redis_client):
    theirs = KeywordQuery.objects.create(owner=other, name="bea's dresses", schema=shop.schema, stream=shop,
                                         keywords="dress texas", tmax=5)
    Predicate.objects.create(query=theirs, relation="Product", attribute="price", op="<", value=60)
    bus.write_sharing_report(redis_client, report(shop, [
        {"class": 0, "properties": {"keywords": ["dress", "texas"]}, "members": [theirs.pk], "busy_seconds": 0.5}]))
    client.force_login(user)
    url = reverse("dashboard:query-preview")

    served = client.post(url, post(stream=str(shop.pk), tmax="4", predicates=[
        {"relation": "Product", "attribute": "price", "op": "<", "value": "30"}])).content.decode()
    assert "joins class {dress, texas} as it is" in served
    assert "shared with 1 other query: 1 of another user" in served and "bea" not in served  # unnamed: not hers
    assert "about <b>1000 µs</b> of evaluation per op for its class (now 500 µs)" in served
    assert "candidate networks" in served.lower() and "from" in served

    wider = client.post(url, post(stream=str(shop.pk), tmax="6")).content.decode()
    assert "joins class {dress, texas}, which widens to serve it" in wider

    alone = client.post(url, post(stream=str(shop.pk), keywords="boots oregon")).content.decode()
    assert "a new class of its own, {boots, oregon}" in alone and "(now" not in alone

    bad = client.post(url, post(stream=str(shop.pk), keywords="", predicates=[])).content.decode()
    assert "A query needs keywords, or at least one predicate" in bad
    assert not KeywordQuery.objects.filter(owner=user).exists()  # nothing saved by a preview


def test_the_preview_says_when_nothing_was_measured_yet(user_client, shop):
    page = user_client.post(reverse("dashboard:query-preview"), post(stream=str(shop.pk))).content.decode()
    assert "a new class of its own, {dress, texas}" in page
    assert "not measured yet: the evaluator of shop reports" in page and "µs" not in page
