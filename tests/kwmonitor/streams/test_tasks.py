import os
import time

import pytest
from django.conf import settings

from kwmonitor.celery import app
from kwmonitor.streams.models import Stream
from kwmonitor.streams.tasks import prune_landing_archives
from streaming.sources import landing_archive


def test_beat_schedule_names_registered_tasks_and_messages_are_json_only():
    app.loader.import_default_modules()
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert {entry["task"]: entry["schedule"] for entry in schedule.values()} == {
        "kwmonitor.streams.tasks.supervise": 3.0, "kwmonitor.streams.tasks.persist_history": 5.0,
        "kwmonitor.streams.tasks.prune_landing_archives": 600.0,
        "kwmonitor.streams.tasks.watch_capture_slots": 15.0,
    }
    for entry in schedule.values():
        assert entry["task"] in app.tasks
    assert {"kwmonitor.streams.tasks.start_evaluator", "kwmonitor.streams.tasks.stop_evaluator"} <= set(app.tasks)
    assert (app.conf.task_serializer, app.conf.result_serializer, list(app.conf.accept_content)) == ("json", "json", ["json"])
    assert app.conf.broker_url.startswith("redis://")


@pytest.mark.redis
@pytest.mark.django_db
def test_archived_landing_files_older_than_the_retention_are_deleted(shop, settings, tmp_path):
    settings.LANDING_DIR = tmp_path / "landing"
    other = Stream.objects.create(name="sensors", schema=shop.schema, source_kind="redis")
    archive = landing_archive(shop.landing_path())
    archive.mkdir(parents=True)
    now = time.time()
    for first, age_hours in ((0, 30), (100, 25), (200, 23), (300, 0)):
        path = archive / f"{first:020d}.ndjson"
        path.write_text('{"seq":%d}\n' % first)
        os.utime(path, (now - age_hours * 3600, now - age_hours * 3600))
    (archive / ".00000000000000000400.x.tmp").write_text("")  # not an archived file
    shop.landing_path().mkdir()
    unarchived = shop.landing_path() / f"{400:020d}.ndjson"
    unarchived.write_text("{}\n")
    os.utime(unarchived, (now - 48 * 3600, now - 48 * 3600))  # not committed yet: never deleted

    settings.LANDING_ARCHIVE_HOURS = 0
    assert prune_landing_archives() == {}
    settings.LANDING_ARCHIVE_HOURS = 24
    assert prune_landing_archives() == {str(shop.pk): 2} and str(other.pk) not in prune_landing_archives()
    assert sorted(p.name for p in archive.iterdir()) == [".00000000000000000400.x.tmp", ".pruned",  # the mark
                                                         f"{200:020d}.ndjson", f"{300:020d}.ndjson"]
    assert unarchived.exists()


@pytest.mark.redis
@pytest.mark.django_db
def test_the_derived_streams_archive_is_pruned_with_the_landing_one(shop, settings, tmp_path):
    settings.LANDING_DIR = tmp_path / "landing"
    settings.LANDING_ARCHIVE_HOURS = 24
    archive = landing_archive(shop.derived_path())
    archive.mkdir(parents=True)
    now = time.time()
    for first, age_hours in ((0, 25), (100, 0)):
        path = archive / f"{first:020d}.ndjson"
        path.write_text('{"seq":%d,"k":"t"}\n' % first)
        os.utime(path, (now - age_hours * 3600, now - age_hours * 3600))
    assert prune_landing_archives() == {str(shop.pk): 1}
    assert sorted(p.name for p in archive.iterdir()) == [".pruned", f"{100:020d}.ndjson"]
