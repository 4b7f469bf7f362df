from django.conf import settings

from kwmonitor.celery import app


def test_beat_schedule_names_registered_tasks_and_messages_are_json_only():
    app.loader.import_default_modules()
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert {entry["task"] for entry in schedule.values()} == {
        "kwmonitor.streams.tasks.supervise", "kwmonitor.streams.tasks.persist_history",
    }
    for entry in schedule.values():
        assert entry["task"] in app.tasks and entry["schedule"] <= 5
    assert {"kwmonitor.streams.tasks.start_evaluator", "kwmonitor.streams.tasks.stop_evaluator"} <= set(app.tasks)
    assert (app.conf.task_serializer, app.conf.result_serializer, list(app.conf.accept_content)) == ("json", "json", ["json"])
    assert app.conf.broker_url.startswith("redis://")
