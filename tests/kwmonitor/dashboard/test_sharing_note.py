"""A query's sharing note follows the plan: an edit shows once the evaluator adopted the new plan (with no
batch needed), a disabled query claims no class. The real evaluator on the plans the web tier writes."""

from __future__ import annotations

import html

import pytest

from kwmonitor.streams.models import Evaluator
from kwmonitor.streams.plans import publish_plan
from streaming import bus
from streaming.evaluator import GroupEvaluator

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_the_sharing_note_follows_edits_and_disabling(query, user, redis_client, client):
    publish_plan(query.stream_id)  # into the test's Redis, flushed after the query was saved
    evaluator = GroupEvaluator(redis_client, query.stream.evaluator.pk)
    evaluator.start()
    client.force_login(user)

    def note() -> str:
        return html.unescape(" ".join(client.get(f"/queries/{query.pk}/sharing/").content.decode().split()))

    assert note().startswith("Rides on sharing class 0 (dress, texas, evaluated with Tmax 4), alone so far")
    assert f"/queries/{query.pk}/sharing/" in client.get(f"/queries/{query.pk}/").content.decode()

    query.keywords, query.tmax = "summer hat", 3
    query.save()
    version = Evaluator.objects.get(pk=evaluator.evaluator_id).plan_version
    assert note() == (f"The evaluator has not adopted the stream's plan version {version} yet: "
                      "the class is reported as soon as it has.")
    assert evaluator.refresh_plan()  # between batches, as the evaluator's heartbeat thread does: no op needed
    assert note().startswith("Rides on sharing class 1 (hat, summer, evaluated with Tmax 3), alone so far")

    query.enabled = False
    query.save()
    assert note() == "Disabled: in no sharing class; its results are kept as they were when it was disabled."
    assert evaluator.refresh_plan()
    report = bus.read_sharing_report(redis_client, query.stream_id)
    assert report is not None and report.plan_version == evaluator.session.plan_version and report.classes == []
    assert note().startswith("Disabled")
