import json

import pytest
from django.urls import reverse

from kwmonitor.streams.models import Evaluator, ResultEvent, Stream

pytestmark = pytest.mark.django_db


def test_stream_evaluator_and_history_pages_load_for_staff(staff_client, shop):
    evaluator = Evaluator.objects.get(stream=shop)
    for name, args in [
        ("admin:streams_stream_changelist", []), ("admin:streams_stream_change", [shop.pk]),
        ("admin:streams_stream_add", []), ("admin:streams_evaluator_changelist", []),
        ("admin:streams_evaluator_change", [evaluator.pk]), ("admin:streams_resultevent_changelist", []),
        ("admin:streams_metricsample_changelist", []), ("admin:streams_deadletterrecord_changelist", []),
        ("admin:streams_droppingsample_changelist", []), ("admin:streams_rearrangementrecord_changelist", []),
        ("admin:queries_keywordquery_changelist", []),
    ]:
        assert staff_client.get(reverse(name, args=args)).status_code == 200, name
    page = staff_client.get(reverse("admin:streams_stream_change", args=[shop.pk])).content.decode()
    assert shop.ingest_token in page and f"/ingest/{shop.pk}/" in page


def test_non_staff_is_refused(user_client, shop):
    for name in ("admin:streams_stream_changelist", "admin:streams_evaluator_changelist", "admin:streams_resultevent_changelist"):
        response = user_client.get(reverse(name))
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_history_is_read_only(staff_client, shop, staff_user):
    query = shop.queries.first()
    event = ResultEvent.objects.create(query=query, entry_id="1-0", seq=0, type="result.add", result={})
    assert staff_client.get(reverse("admin:streams_resultevent_add")).status_code == 403
    assert staff_client.post(reverse("admin:streams_resultevent_delete", args=[event.pk]), {"post": "yes"}).status_code == 403
    assert ResultEvent.objects.filter(pk=event.pk).exists()


def test_regenerate_token_action(staff_client, shop):
    old = shop.ingest_token
    staff_client.post(reverse("admin:streams_stream_changelist"), {"action": "regenerate_token", "_selected_action": [shop.pk]})
    shop.refresh_from_db()
    assert shop.ingest_token != old and len(shop.ingest_token) >= 40


@pytest.mark.redis
def test_start_and_stop_actions_send_tasks_to_the_broker(staff_client, shop, redis_client):
    evaluator = Evaluator.objects.get(stream=shop)
    url = reverse("admin:streams_evaluator_changelist")
    response = staff_client.post(url, {"action": "start", "_selected_action": [evaluator.pk]}, follow=True)
    staff_client.post(url, {"action": "stop", "_selected_action": [evaluator.pk]})
    assert "Asked the workers to start 1 evaluator(s)." in response.content.decode()
    messages = [json.loads(raw) for raw in reversed(redis_client.lrange("celery", 0, -1))]
    assert [(m["headers"]["task"], m["headers"]["argsrepr"]) for m in messages] == [
        ("kwmonitor.streams.tasks.start_evaluator", f"({evaluator.pk},)"),
        ("kwmonitor.streams.tasks.stop_evaluator", f"({evaluator.pk},)"),
    ]
    assert all(m["content-type"] == "application/json" for m in messages)
    assert Stream.objects.count() == 1
