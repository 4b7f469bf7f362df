import json
import re
import time

import pytest
from django.urls import reverse

from kwmonitor.streams.models import Evaluator, ResultEvent, Stream
from streaming import bus
from streaming.events import EvaluatorStatus

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
def test_the_evaluator_list_shows_and_filters_by_the_status_now(staff_client, shop, photons_stream, redis_client):
    beating, silent = Evaluator.objects.get(stream=shop), Evaluator.objects.get(stream=photons_stream)
    Evaluator.objects.update(desired="running", lifecycle="stopped")
    bus.write_heartbeat(redis_client, EvaluatorStatus(evaluator=beating.pk, stream=shop.pk, status="running", pid=7,
                                                      host="there", plan_version=3, ts=time.time()))
    url = reverse("admin:streams_evaluator_changelist")
    page = staff_client.get(url).content.decode()
    rows = dict(re.findall(r'name="_selected_action" value="(\d+)"[^>]*>(.*?)</tr>', page, re.S))
    assert '<span title="">running</span>' in rows[str(beating.pk)] and "pid 7 on there, plan v3" in rows[str(beating.pk)]
    assert '<span title="">stopped</span>' in rows[str(silent.pk)]
    running = staff_client.get(url, {"now": "running"}).content.decode()
    assert str(beating) in running and str(silent) not in running
    stopped = staff_client.get(url, {"now": "stopped"}).content.decode()
    assert str(silent) in stopped and str(beating) not in stopped


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


def _stream_form(shop, **changes) -> dict:
    """The stream's change form as the admin page posts it, with ``changes``."""
    data = {"name": shop.name, "schema": shop.schema_id, "item_format": "json", "dtd": "", "xml_mapping": "",
            "source_kind": "landing", "evaluator_processes": 1, "ts_min": "-62135596800", "ts_max": "253402300799",
            "max_clock_jump": "2592000"}
    data.update(changes)
    return data


@pytest.mark.redis
def test_the_clock_guard_is_shown_edited_and_checked_on_the_stream_page(staff_client, shop, redis_client):
    url = reverse("admin:streams_stream_change", args=[shop.pk])
    page = staff_client.get(url).content.decode()
    assert "Clock guard" in page and "largest clock jump" in page.lower()
    assert "none yet: the next op is judged by the range only" in page
    for changes, expected in [
        ({"ts_min": "100", "ts_max": "50", "max_clock_jump": "0"}, {
            "ts_max": "The latest ts (50) is before the earliest ts (100): no op could pass.",
            "max_clock_jump": "The largest clock jump must be more than 0 seconds (leave it empty for no limit)."}),
        ({"ts_max": "inf"}, {"ts_max": "Enter a number."}),
    ]:
        response = staff_client.post(url, _stream_form(shop, **changes))
        assert response.status_code == 200, changes  # the form again, with every error on its field
        assert {f: e[0] for f, e in response.context["adminform"].form.errors.items()} == expected
    response = staff_client.post(url, _stream_form(shop, ts_min="1500000000", ts_max="", max_clock_jump="3600"))
    assert response.status_code == 302
    shop.refresh_from_db()
    assert (shop.ts_min, shop.ts_max, shop.max_clock_jump) == (1.5e9, None, 3600.0)
    guard = shop.clock_guard()
    assert guard.refuse(1.4e9, None) and guard.refuse(1e300, None) is None and guard.refuse(1.6e9, 1.5e9)
    redis_client.set(bus.Keys.stream_clock(shop.pk), repr(1732000000.5))
    page = staff_client.get(url).content.decode()
    assert "1732000000.5, 2024-11-19 07:06:40 UTC (the largest ts stored so far)" in page


def test_a_stream_guard_with_no_finite_limit_is_refused_by_the_model(shop):
    from django.core.exceptions import ValidationError

    shop.max_clock_jump = float("nan")
    with pytest.raises(ValidationError) as raised:
        shop.full_clean()
    assert raised.value.message_dict["max_clock_jump"] == [
        "Enter a finite number of seconds (leave it empty for no limit)."]


def test_a_source_kind_that_is_not_one_is_refused_by_the_model(shop):
    from django.core.exceptions import ValidationError

    shop.source_kind = "kafka"
    with pytest.raises(ValidationError) as raised:
        shop.full_clean()
    assert "source_kind" in raised.value.message_dict and not shop.is_captured and not shop.has_landing_directory
