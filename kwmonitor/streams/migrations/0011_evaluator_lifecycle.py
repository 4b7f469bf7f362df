"""An evaluator's row keeps the supervisor's lifecycle only: ``status`` becomes ``lifecycle`` (launched,
stopping, stopped, failed) with the time it was recorded; ``heartbeat_at`` and ``running_plan_version``, copies
of the heartbeat, go (the heartbeat in Redis is the live status, ``kwmonitor.streams.liveness``)."""

from django.db import migrations, models
from django.db.models import F

#: the statuses of a launched process, which only its heartbeat can tell apart
_LAUNCHED = ("starting", "restarting", "running")


def to_lifecycle(apps, schema_editor) -> None:
    apps.get_model("streams", "Evaluator").objects.filter(lifecycle__in=_LAUNCHED).update(
        lifecycle="launched", lifecycle_at=F("started_at"))


def to_status(apps, schema_editor) -> None:
    apps.get_model("streams", "Evaluator").objects.filter(lifecycle="launched").update(lifecycle="starting")


class Migration(migrations.Migration):

    dependencies = [
        ('streams', '0010_resultevent_query_seq'),
    ]

    operations = [
        migrations.RenameField(model_name='evaluator', old_name='status', new_name='lifecycle'),
        migrations.AddField(
            model_name='evaluator',
            name='lifecycle_at',
            field=models.DateTimeField(blank=True, help_text='When the supervisor recorded it: a heartbeat written before a launch, stop or failure recorded later is out of date.', null=True),
        ),
        migrations.AlterField(
            model_name='evaluator',
            name='lifecycle',
            field=models.CharField(choices=[('launched', 'launched'), ('stopping', 'stopping'), ('stopped', 'stopped'), ('failed', 'failed')], default='stopped', help_text="What the supervisor last did with the process: launched it, is stopping it, stopped it, or saw it fail (last error, next restart). Whether it runs now is its heartbeat's word, never stored here.", max_length=16),
        ),
        migrations.RemoveField(model_name='evaluator', name='heartbeat_at'),
        migrations.RemoveField(model_name='evaluator', name='running_plan_version'),
        migrations.AlterField(
            model_name='evaluator',
            name='pid',
            field=models.IntegerField(blank=True, help_text='The process the supervisor launched (none once it stopped or failed).', null=True, verbose_name='launched pid'),
        ),
        migrations.AlterField(
            model_name='evaluator',
            name='host',
            field=models.CharField(blank=True, help_text='The host it was launched on.', max_length=255, verbose_name='launched on'),
        ),
        migrations.AlterField(
            model_name='evaluator',
            name='started_at',
            field=models.DateTimeField(blank=True, help_text='When the supervisor last launched it.', null=True),
        ),
        migrations.RunPython(to_lifecycle, to_status),
    ]
