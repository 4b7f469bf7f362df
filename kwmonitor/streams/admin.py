"""Admin for streams, evaluators (start/stop through Celery) and the read-only history.

An evaluator's live status is its heartbeat's, read through
:func:`kwmonitor.streams.liveness.read_liveness` like on every page; its row
holds only what the supervisor did (the lifecycle).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.urls import reverse
from django.utils.html import format_html
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from kwmonitor.catalog.models import Schema
from streaming.capture.catalog import CatalogError
from streaming.schema import Schema as SchemaGraph
from streaming.schema import SchemaError
from streaming.sources import ingest_clock
from streaming.sources.registry import STREAM_KINDS

from .connection import redis_client
from .liveness import Liveness, read_liveness
from .models import (
    DeadLetterRecord,
    DroppingSample,
    Evaluator,
    MetricSample,
    RearrangementRecord,
    ResultEvent,
    Stream,
    SubscriptionResultRecord,
)
from .plans import request_narrowing
from .postgres import SourceUnreachable, publication_of
from .tasks import start_evaluator, stop_evaluator


UPLOAD_MAX_BYTES = 1 << 20


class StreamForm(forms.ModelForm):
    """A stream; an XML stream's DTD and mapping may also be uploaded as files (they replace the text fields); a
    PostgreSQL source's schema may be made from the publication's tables (read from the catalog on save)."""

    dtd_file = forms.FileField(required=False, label="DTD file", help_text="Replaces the DTD above (UTF-8 text).")
    mapping_file = forms.FileField(required=False, label="mapping file",
                                   help_text="Replaces the mapping above (a JSON document).")
    schema_from_catalog = forms.BooleanField(
        required=False, label="Create the schema from the catalog",
        help_text="PostgreSQL source: make (or remake) the stream's schema, named after the stream, from the "
                  "publication's tables: each table a relation keyed by its primary key, its columns typed, its "
                  "foreign keys between published tables. Remaking it means resetting the stream.")
    #: (schema document, what the catalog left out), read by clean() when the box is ticked
    catalog: tuple[dict, tuple[str, ...]] | None = None

    class Meta:
        model = Stream
        fields = "__all__"

    def _upload(self, name: str) -> str | None:
        upload = self.files.get(name)
        if upload is None:
            return None
        if upload.size > UPLOAD_MAX_BYTES:
            raise forms.ValidationError({name: f"larger than {UPLOAD_MAX_BYTES} bytes"})
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError({name: "not UTF-8 text"}) from None

    def clean(self):
        cleaned = super().clean()
        dtd = self._upload("dtd_file")
        if dtd is not None:
            cleaned["dtd"] = dtd
        mapping = self._upload("mapping_file")
        if mapping is not None:
            try:
                cleaned["xml_mapping"] = json.loads(mapping)
            except ValueError as exc:
                raise forms.ValidationError({"mapping_file": f"not JSON: {exc}"}) from None
        if cleaned.get("schema_from_catalog"):
            self.catalog = self._read_catalog(cleaned)
            self.instance.schema_from_catalog = True
        return cleaned

    def _read_catalog(self, cleaned: dict) -> tuple[dict, tuple[str, ...]]:
        """The schema document of the publication's tables, named after the stream, and what it left out."""
        kind = STREAM_KINDS.get(cleaned.get("source_kind", ""))
        if kind is None or not kind.captured:  # the capture's publication has the catalog
            raise forms.ValidationError({"schema_from_catalog": "Only a PostgreSQL source has a catalog to read."})
        probe = Stream(name=cleaned.get("name") or "", source_dsn_env=cleaned.get("source_dsn_env") or "",
                       source_publication=cleaned.get("source_publication") or "")
        try:
            publication = publication_of(probe)
            doc = dict(publication.schema_document(), name=probe.name)
            SchemaGraph.from_dict(doc)
        except (SourceUnreachable, CatalogError, SchemaError) as exc:
            raise forms.ValidationError({"source_publication": str(exc)}) from None
        existing = Schema.objects.filter(name=probe.name).first()
        if existing is not None:
            mine = self.instance.pk is not None and existing.pk == self.instance.schema_id
            if not mine or existing.streams.exclude(pk=self.instance.pk).exists():
                raise forms.ValidationError({"schema_from_catalog": (
                    f"A schema named {probe.name!r} exists and belongs to something else: rename the stream or "
                    "that schema.")})
        return doc, publication.notes


@admin.register(Stream)
class StreamAdmin(admin.ModelAdmin):
    form = StreamForm
    list_display = ("name", "schema", "item_format", "source_kind", "user_queries", "evaluator_status", "created")
    list_filter = ("item_format", "source_kind", "schema")
    search_fields = ("name",)
    readonly_fields = ("ingest_token", "ingest_url", "source", "placement", "ingest_clock", "created")
    fieldsets = (
        (None, {"fields": ("name", "schema", "item_format", "dtd", "dtd_file", "xml_mapping", "mapping_file",
                           "source_kind", "user_queries", "evaluator_processes", "preprocess", "placement",
                           "ingest_token", "ingest_url", "source", "created")}),
        ("PostgreSQL source", {
            "fields": ("source_dsn_env", "source_publication", "source_slot", "schema_from_catalog"),
            "description": "For a stream whose source is a PostgreSQL publication: its capture follows the slot and "
                           "turns each committed change of the publication's tables into ops (docs/sources.md).",
        }),
        ("Clock guard", {
            "fields": ("ts_min", "ts_max", "max_clock_jump", "ingest_clock"),
            "description": "Timestamps (ts, seconds) the stream takes. An op outside the range, or whose ts jumps "
                           "further past the stream clock than the largest jump, is a dead letter with the reason, "
                           "at ingest and in the evaluator; the other ops are kept. A change reaches ingest at "
                           "once and the running evaluator at its next batch.",
        }),
    )
    actions = ["regenerate_token", "narrow"]

    def save_model(self, request, obj: Stream, form, change) -> None:
        """A schema read from the catalog is made (or remade) in the same transaction as the stream."""
        if form.catalog is not None:
            doc, notes = form.catalog
            obj.schema = Schema.import_document(doc, description=f"The tables of PostgreSQL publication "
                                                                 f"{obj.source_publication!r}.", replace=True)
            relations = ", ".join(r["name"] for r in doc["relations"])
            self.message_user(request, f"Schema {doc['name']!r} made from the catalog: {relations}.", messages.SUCCESS)
            for note in notes:
                self.message_user(request, f"Left out of the schema: {note}.", messages.WARNING)
        super().save_model(request, obj, form, change)

    @admin.display(description="evaluator")
    def evaluator_status(self, obj: Stream) -> str:
        evaluator = Evaluator.objects.filter(stream=obj, role="primary").first()
        return f"{_live(evaluator).status} (wants {evaluator.desired})" if evaluator else "-"

    @admin.display(description="ingest endpoint")
    def ingest_url(self, obj: Stream) -> str:
        if not obj.pk:
            return "-"
        if obj.is_captured:
            return "closed: the capture of the PostgreSQL publication is the stream's only writer"
        body = "application/xml items" if obj.is_xml else "application/x-ndjson ops"
        return f"POST {reverse('ingest:ingest', args=[obj.pk])} ({body}) with Authorization: Bearer <ingest token>"

    @admin.display(description="ingest clock")
    def ingest_clock(self, obj: Stream) -> str:
        """The largest ts stored so far, which ingest judges clock jumps against."""
        if not obj.pk:
            return "-"
        try:
            clock = ingest_clock(redis_client(), obj.pk)
        except RedisError as exc:
            return f"unknown: Redis does not answer ({exc})"
        if clock is None:
            return "none yet: the next op is judged by the range only"
        try:
            when = f", {datetime.fromtimestamp(clock, timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
        except (OverflowError, OSError, ValueError):  # not a time a date can be made of
            when = ""
        return f"{clock!r}{when} (the largest ts stored so far)"

    @admin.display(description="source")
    def source(self, obj: Stream) -> str:
        return str(obj.source_spec()) if obj.pk else "-"

    @admin.action(description="Regenerate the ingest token")
    def regenerate_token(self, request, queryset):
        for stream in queryset:
            stream.regenerate_token()
        self.message_user(request, f"New ingest token for {queryset.count()} stream(s).", messages.SUCCESS)

    @admin.action(description="Narrow sharing classes now")
    def narrow(self, request, queryset):
        for stream in queryset:
            request_narrowing(stream)
        self.message_user(request, f"Narrowing requested for {queryset.count()} stream(s): the evaluators apply it "
                                   "at their next batch.", messages.SUCCESS)


def _enqueue(modeladmin, request, queryset, task, verb: str) -> None:
    """Start or stop primaries; a secondary evaluator or pre-processor follows its stream's primary."""
    ids = list(queryset.filter(role="primary").values_list("pk", flat=True))
    followers = queryset.exclude(role="primary").count()
    if followers:
        modeladmin.message_user(request, f"{followers} secondary evaluator(s) or pre-processor(s) left alone: they "
                                         "follow their stream's primary evaluator.", messages.WARNING)
    try:
        for evaluator_id in ids:
            task.delay(evaluator_id)
    except OperationalError as exc:  # the broker does not answer
        modeladmin.message_user(request, f"Could not reach the task queue: {exc}", messages.ERROR)
        return
    modeladmin.message_user(request, f"Asked the workers to {verb} {len(ids)} evaluator(s).", messages.SUCCESS)


def _live(evaluator: Evaluator) -> Liveness:
    """The evaluator's liveness, read once per object shown (Redis away: said so, as the status)."""
    cached = getattr(evaluator, "_liveness", None)
    if cached is None:
        try:
            cached = read_liveness(redis_client(), [evaluator])[0]
        except RedisError as exc:
            cached = Liveness(status="unknown", detail=f"Redis does not answer: {exc}")
        evaluator._liveness = cached  # type: ignore[attr-defined]
    return cached


class LiveStatusFilter(admin.SimpleListFilter):
    """The evaluators whose live status (their heartbeat's, :mod:`kwmonitor.streams.liveness`) is the one chosen."""

    title = "status now"
    parameter_name = "now"

    def lookups(self, request, model_admin) -> list[tuple[str, str]]:
        return [(s, s) for s in ("running", "starting", "restarting", "stalled", "unresponsive", "failed", "stopping",
                                 "stopped")]

    def queryset(self, request, queryset: QuerySet) -> QuerySet:
        if self.value() is None:
            return queryset
        evaluators = list(queryset)
        try:
            lives = read_liveness(redis_client(), evaluators)
        except RedisError as exc:
            messages.error(request, f"Cannot tell the status now: Redis does not answer ({exc}).")
            return queryset.none()
        return queryset.filter(pk__in=[e.pk for e, live in zip(evaluators, lives) if live.status == self.value()])


@admin.register(Evaluator)
class EvaluatorAdmin(admin.ModelAdmin):
    list_display = (
        "__str__", "role", "desired", "status_now", "process_now", "lifecycle", "pid", "host", "started_at",
        "plan_version", "restarts", "last_error",
    )
    list_filter = (LiveStatusFilter, "lifecycle", "desired", "role")
    readonly_fields = ["status_now", "detail_now", "process_now", *(f.name for f in Evaluator._meta.fields)]
    actions = ["start", "stop"]

    @admin.display(description="status now")
    def status_now(self, obj: Evaluator) -> str:
        """What it does now, from its heartbeat (the detail on hover)."""
        live = _live(obj)
        return format_html('<span title="{}">{}</span>', live.detail, live.status)

    @admin.display(description="detail now")
    def detail_now(self, obj: Evaluator) -> str:
        return _live(obj).detail or "-"

    @admin.display(description="process now")
    def process_now(self, obj: Evaluator) -> str:
        """The process its current heartbeat comes from, and the plan it runs ("-": no current heartbeat)."""
        live = _live(obj)
        if not live.beating:
            return "-"
        return f"pid {live.pid} on {live.host or '?'}, plan v{live.plan_version}"

    def has_add_permission(self, request) -> bool:
        return False  # created with the stream, as its configuration asks

    @admin.action(description="Start the selected evaluators")
    def start(self, request, queryset):
        _enqueue(self, request, queryset, start_evaluator, "start")

    @admin.action(description="Stop the selected evaluators")
    def stop(self, request, queryset):
        _enqueue(self, request, queryset, stop_evaluator, "stop")


class HistoryAdmin(admin.ModelAdmin):
    """Read-only: history is written by the persister only."""

    list_per_page = 50

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ResultEvent)
class ResultEventAdmin(HistoryAdmin):
    list_display = ("query", "type", "seq", "entry_id", "created")
    list_filter = ("type", "query")


@admin.register(SubscriptionResultRecord)
class SubscriptionResultRecordAdmin(HistoryAdmin):
    list_display = ("subscription", "seq", "item", "entry_id", "created")
    list_filter = ("subscription",)
    search_fields = ("item",)


@admin.register(MetricSample)
class MetricSampleAdmin(HistoryAdmin):
    list_display = ("stream", "batch_id", "input_rows", "rows_per_second", "duration_ms", "dead_letters", "ts")
    list_filter = ("stream",)


@admin.register(DeadLetterRecord)
class DeadLetterRecordAdmin(HistoryAdmin):
    list_display = ("stream", "seq", "reason", "ts")
    list_filter = ("stream",)
    search_fields = ("reason", "line")


@admin.register(DroppingSample)
class DroppingSampleAdmin(HistoryAdmin):
    list_display = ("stream", "relation", "period", "tuples", "dropped", "ratio", "ts")
    list_filter = ("stream", "relation")


@admin.register(RearrangementRecord)
class RearrangementRecordAdmin(HistoryAdmin):
    list_display = ("stream", "relation", "old_sequence", "new_sequence", "d_init", "d_cur", "mu", "ts")
    list_filter = ("stream", "relation")
