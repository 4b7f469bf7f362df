"""WXQuery subscriptions in the admin and the JSON API: compiled on save, errors with their place,
APT and back-translation shown, plans carry them, the page and its feed show their result items."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from kwmonitor.accounts.models import ApiToken
from kwmonitor.queries.models import WXQuerySubscription
from kwmonitor.streams.plans import build_plan
from streaming import bus
from streaming.events import SubscriptionResult
from streaming.workloads.photons import PAPER_QUERIES

from ..dashboard.test_consumers import communicator, receive, session_cookie

pytestmark = pytest.mark.django_db

BAD = 'for $p in stream("photons")/photons/photon\nwhere $p/coord >= 1 return $p'


@pytest.fixture
def subscription(photons_stream, user):
    return WXQuerySubscription.objects.create(owner=user, name="rxj", stream=photons_stream, text=PAPER_QUERIES["q3"])


def test_a_subscription_that_does_not_compile_is_refused_with_its_place(photons_stream, user, ecommerce_schema):
    from kwmonitor.streams.models import Stream

    sub = WXQuerySubscription(owner=user, name="bad", stream=photons_stream, text=BAD)
    with pytest.raises(ValidationError) as caught:
        sub.full_clean()
    assert caught.value.message_dict["text"][0].startswith("line 2, column 7: /photons/photon/coord must hold text")
    shop = Stream.objects.create(name="shop", schema=ecommerce_schema)
    with pytest.raises(ValidationError, match="takes NDJSON ops"):
        WXQuerySubscription(owner=user, name="x", stream=shop, text=PAPER_QUERIES["q3"]).full_clean()


def test_an_xml_stream_needs_a_dtd_and_a_mapping_of_its_schema(photons_stream):
    photons_stream.xml_mapping = {"relations": [{"name": "Photon", "path": "", "key": "pid",
                                                 "attributes": {"en": {"path": "en", "type": "int"}}}]}
    with pytest.raises(ValidationError, match="relation 'Photon' of the mapping is not in schema"):
        photons_stream.full_clean()
    photons_stream.xml_mapping = {"relations": [{"name": "Photon", "path": "", "key": "pid",
                                                 "attributes": {"en": {"path": "energy"}}}]}
    with pytest.raises(ValidationError, match="'energy' is not an element holding text"):
        photons_stream.full_clean()
    photons_stream.dtd = '<!ENTITY x "y">'
    with pytest.raises(ValidationError) as caught:
        photons_stream.full_clean()
    assert "dtd" in caught.value.message_dict


def test_the_plan_carries_the_dtd_and_the_enabled_subscriptions(subscription, photons_stream, user):
    WXQuerySubscription.objects.create(owner=user, name="off", stream=photons_stream, text=PAPER_QUERIES["q4"],
                                       enabled=False)
    plan = build_plan(photons_stream.evaluator, 3).model_dump(mode="json", by_alias=True)
    assert plan["stream"]["dtd"] == photons_stream.dtd
    assert plan["subscriptions"] == [{"id": subscription.pk, "text": PAPER_QUERIES["q3"]}]


def test_the_admin_shows_errors_with_their_place_and_the_apt_as_a_tree(staff_client, photons_stream, subscription):
    add = reverse("admin:queries_wxquerysubscription_add")
    response = staff_client.post(add, {"name": "bad", "owner": subscription.owner_id, "stream": photons_stream.pk,
                                       "text": BAD, "enabled": "on"})
    assert response.status_code == 200
    assert "line 2, column 7: /photons/photon/coord must hold text" in response.content.decode()
    page = staff_client.get(reverse("admin:queries_wxquerysubscription_change", args=[subscription.pk]))
    html = page.content.decode()
    tree = html[html.index('<div class="apt">'):]
    tree = tree[:tree.index("</div>")]
    assert re.search(r'<span class="apt-name">en</span> <span class="apt-out"', tree)
    assert '<span class="apt-note">σ: (/photons/photon/coord/cel/dec &gt;= -48.0 and ' in tree
    assert "style=" not in tree and "<script" not in tree
    assert 'for $p in stream(&quot;photons&quot;)' in html  # the back-translation
    assert "kwmonitor/css/apt.css" in html


def test_the_api_creates_lists_and_reads_with_a_token(photons_stream, user, staff_user, redis_client):
    url = reverse("api:subscriptions")
    payload = {"name": "vela", "stream": photons_stream.pk, "text": PAPER_QUERIES["q4"]}
    _, token = ApiToken.issue(user, "tests")
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    refused = api.post(url, json.dumps(payload), content_type="application/json")
    assert refused.status_code == 404 and refused.json()["field"] == "stream"  # a stream the user may not see
    _, staff_token = ApiToken.issue(staff_user, "tests")
    staff = Client(HTTP_AUTHORIZATION=f"Token {staff_token}")
    bad = staff.post(url, json.dumps({**payload, "text": BAD}), content_type="application/json")
    assert bad.status_code == 400
    assert {k: bad.json()[k] for k in ("field", "line", "column")} == {"field": "text", "line": 2, "column": 7}
    assert bad.json()["error"].startswith("line 2, column 7")
    created = staff.post(url, json.dumps(payload), content_type="application/json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["apt"]["type"] == "apt" and body["back_translation"].startswith("<photons>")
    assert body["feed"] == f"/ws/subscriptions/{body['id']}/" and body["owner"] == staff_user.username
    assert api.get(url).json() == {"subscriptions": []}
    WXQuerySubscription.objects.create(owner=user, name="rxj", stream=photons_stream, text=PAPER_QUERIES["q3"])
    mine = api.post(url, json.dumps({**payload, "name": "mine"}), content_type="application/json")
    assert mine.status_code == 201  # the user sees the stream through a subscription of theirs
    assert [s["name"] for s in api.get(url).json()["subscriptions"]] == ["rxj", "mine"]
    assert api.get(reverse("api:subscription", args=[body["id"]])).status_code == 404
    assert staff.get(reverse("api:subscription", args=[body["id"]])).json()["text"] == PAPER_QUERIES["q4"]
    assert Client(HTTP_AUTHORIZATION="Token nope").get(url).status_code == 401
    assert Client().get(url).status_code == 401


def test_a_session_post_needs_the_csrf_token(photons_stream, staff_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    payload = json.dumps({"name": "vela", "stream": photons_stream.pk, "text": PAPER_QUERIES["q4"]})
    assert client.post(reverse("api:subscriptions"), payload, content_type="application/json").status_code == 403
    client.get(reverse("dashboard:overview"))
    csrf = client.cookies[settings.CSRF_COOKIE_NAME].value
    response = client.post(reverse("api:subscriptions"), payload, content_type="application/json",
                           HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 201


def test_others_see_neither_the_subscription_nor_its_page(subscription, django_user_model, client):
    other = django_user_model.objects.create_user("bob", "bob@example.com", "bob-password-1")
    client.force_login(other)
    assert client.get(reverse("dashboard:subscription", args=[subscription.pk])).status_code == 404
    assert client.get(reverse("api:subscription", args=[subscription.pk])).status_code == 404


def test_the_page_shows_text_apt_and_back_translation(subscription, user_client, redis_client):
    html = user_client.get(reverse("dashboard:subscription", args=[subscription.pk])).content.decode()
    assert '<ul class="apt-tree">' in html and 'id="back-translation"' in html
    assert f"/ws/subscriptions/{subscription.pk}/?replay=200" in html
    assert "style=" not in html


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_the_feed_replays_then_follows_result_items(subscription, user, django_user_model, redis_client):
    def result(seq: int) -> SubscriptionResult:
        return SubscriptionResult(subscription=subscription.pk, stream=subscription.stream_id, seq=seq,
                                  item=f"<rxj><en>{seq}</en></rxj>", ts=1.0)

    bus.publish_subscription_results(redis_client, [result(1), result(2)])
    other = session_cookie(django_user_model.objects.create_user("bob", "bob@example.com", "bob-password-1"))
    mine = session_cookie(user)

    async def run() -> list[dict]:
        refused = communicator(f"/ws/subscriptions/{subscription.pk}/", other)
        assert not (await refused.connect())[0]
        ws = communicator(f"/ws/subscriptions/{subscription.pk}/?replay=1", mine)
        assert (await ws.connect())[0]
        first = await receive(ws, 1)
        bus.publish_subscription_results(redis_client, [result(3)])
        later = await receive(ws, 1)
        await ws.disconnect()
        ws = communicator(f"/ws/subscriptions/{subscription.pk}/?after={first[0]['id']}", mine)
        assert (await ws.connect())[0]
        resumed = await receive(ws, 1)
        await ws.disconnect()
        return first + later + resumed

    messages = asyncio.run(run())
    assert [(m["type"], m["seq"]) for m in messages] == [("subscription.result", 2), ("subscription.result", 3),
                                                         ("subscription.result", 3)]
    assert messages[1]["item"] == "<rxj><en>3</en></rxj>" and messages[1]["id"] == messages[2]["id"]


def test_the_overview_and_the_stream_page_link_the_subscription(subscription, user_client, redis_client):
    page = reverse("dashboard:subscription", args=[subscription.pk])
    assert page in user_client.get(reverse("dashboard:overview")).content.decode()
    assert page in user_client.get(reverse("dashboard:stream", args=[subscription.stream_id])).content.decode()


@pytest.mark.redis
def test_the_page_says_what_the_evaluator_reported(subscription, photons_stream, user_client, redis_client):
    from streaming.events import BatchMetrics

    page = reverse("dashboard:subscription", args=[subscription.pk])
    assert "no batch from the stream's evaluator yet" in user_client.get(page).content.decode()

    def report(wxquery: dict) -> None:
        bus.publish_stream_event(redis_client, photons_stream.pk, BatchMetrics(
            evaluator=1, stream=photons_stream.pk, batch_id=0, input_rows=1, rows_per_second=1.0, duration_ms=1.0,
            state={"stream": {"wxquery": wxquery}}, ts=1.0))

    report({"subscriptions": 3, "groups": 2, "subscriptions_sharing": 1, "errors": {}})
    html = user_client.get(page).content.decode()
    assert 'id="subscription-state">evaluated</span>' in html and "3 subscriptions of the stream in 2 shared groups" in html
    report({"subscriptions": 0, "errors": {str(subscription.pk): "line 1, column 9: unknown stream 'x'"}})
    html = user_client.get(page).content.decode()
    assert 'id="subscription-state">error</span>' in html and "line 1, column 9: unknown stream &#x27;x&#x27;" in html


def test_the_stream_admin_saves_an_xml_stream_and_names_a_mapping_that_is_not_the_schemas(staff_client, photons_stream):
    from streaming.workloads.photons import PHOTONS_DTD, PHOTONS_MAPPING

    url = reverse("admin:streams_stream_change", args=[photons_stream.pk])
    form = {"name": "photons", "schema": photons_stream.schema_id, "item_format": "xml", "dtd": PHOTONS_DTD,
            "xml_mapping": json.dumps(PHOTONS_MAPPING), "source_kind": "landing", "evaluator_processes": 1}
    assert staff_client.post(url, form).status_code == 302
    wrong = {"relations": [{"name": "Hit", "path": "", "key": "hid", "attributes": {"en": {"path": "en"}}}]}
    response = staff_client.post(url, {**form, "xml_mapping": json.dumps(wrong)})
    assert response.status_code == 200
    assert "relation &#x27;Hit&#x27; of the mapping is not in schema &#x27;photons&#x27;" in response.content.decode()


def test_the_stream_admin_takes_the_dtd_and_the_mapping_as_files(staff_client, photons_stream):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from streaming.workloads.photons import PHOTONS_DTD, PHOTONS_MAPPING

    url = reverse("admin:streams_stream_change", args=[photons_stream.pk])
    form = {"name": "photons", "schema": photons_stream.schema_id, "item_format": "xml", "dtd": "",
            "xml_mapping": "null", "source_kind": "landing", "evaluator_processes": 1,
            "dtd_file": SimpleUploadedFile("photons.dtd", PHOTONS_DTD.encode()),
            "mapping_file": SimpleUploadedFile("mapping.json", json.dumps(PHOTONS_MAPPING).encode())}
    assert staff_client.post(url, form).status_code == 302
    photons_stream.refresh_from_db()
    assert photons_stream.dtd == PHOTONS_DTD and photons_stream.xml_mapping == PHOTONS_MAPPING
    bad = {**form, "dtd_file": SimpleUploadedFile("x.dtd", b'<!ENTITY x "y">'),
           "mapping_file": SimpleUploadedFile("m.json", json.dumps(PHOTONS_MAPPING).encode())}
    response = staff_client.post(url, bad)
    assert response.status_code == 200 and "entity" in response.content.decode().lower()
