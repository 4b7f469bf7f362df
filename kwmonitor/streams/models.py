"""Streams, their evaluators, and the history persisted from the Redis bus.

A stream's primary evaluator serves its enabled queries; with
``evaluator_processes`` > 1 secondary evaluators take some of its sharing
classes (``streaming.placement``), and with ``preprocess`` a pre-processor
derives the stream once for all of them (``docs/scaling.md``). Evaluators
never touch the database: the web tier writes their plans to Redis and a
Celery beat task copies the event streams into the history tables.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from pydantic import ValidationError as PydanticError

from streaming.bus import Keys
from streaming.clock import MAX_CLOCK_JUMP, TS_MAX, TS_MIN, ClockGuard
from streaming.schema import SchemaError
from streaming.sources import landing_directory
from streaming.sources.derived import DERIVED, derived_directory
from streaming.sources.registry import STREAM_KINDS, stream_kind
from streaming.xmlstream.dtd import DTDError, StreamDTD
from streaming.xmlstream.mapping import ItemMapping, MappingError

__all__ = [
    "MAX_EVALUATOR_PROCESSES",
    "SOURCE_KINDS",
    "DSN_ENV_PREFIX",
    "ITEM_FORMATS",
    "new_ingest_token",
    "Stream",
    "Evaluator",
    "ResultEvent",
    "SubscriptionResultRecord",
    "MetricSample",
    "DeadLetterRecord",
    "DroppingSample",
    "RearrangementRecord",
    "AggregateValueRecord",
    "HistoryCursor",
]

MAX_EVALUATOR_PROCESSES = 8
SOURCE_KINDS = tuple((kind.name, kind.label) for kind in STREAM_KINDS.values())
#: A PostgreSQL source's DSN comes from an environment variable with this prefix (never from the database).
DSN_ENV_PREFIX = "KW_DSN_"
_DSN_ENV = re.compile(rf"{DSN_ENV_PREFIX}[A-Z0-9_]+")
_SLOT = re.compile(r"[a-z0-9_]{1,63}")
ITEM_FORMATS = (("json", "NDJSON ops"), ("xml", "XML items (a DTD and a mapping to relations)"))


def new_ingest_token() -> str:
    return secrets.token_urlsafe(32)


class Stream(models.Model):
    name = models.CharField(max_length=100, unique=True)
    schema = models.ForeignKey(
        "catalog.Schema", on_delete=models.PROTECT, related_name="streams", blank=True,
        help_text="A PostgreSQL source may have it made from the catalog instead (the box below).")
    source_kind = models.CharField(max_length=16, choices=SOURCE_KINDS, default="landing")
    source_dsn_env = models.CharField(
        "DSN variable", max_length=100, blank=True,
        help_text=f"PostgreSQL source: the environment variable ({DSN_ENV_PREFIX}…) holding the libpq connection "
                  "string of the database, set for the web, worker and beat processes (or in var/.env); the "
                  "DSN itself is never stored here.")
    source_publication = models.CharField(
        "publication", max_length=63, blank=True, help_text="PostgreSQL source: the publication whose tables the "
                                                           "stream watches (CREATE PUBLICATION … FOR TABLE …).")
    source_slot = models.CharField(
        "replication slot", max_length=63, blank=True,
        help_text="PostgreSQL source: the logical replication slot the capture creates and follows (a-z, 0-9, _).")
    ingest_token = models.CharField(
        max_length=64, unique=True, default=new_ingest_token,
        help_text="Bearer token of the ingest endpoint (regenerate it from the list's actions).",
    )
    item_format = models.CharField(
        max_length=8, choices=ITEM_FORMATS, default="json",
        help_text="What the ingest endpoint takes: NDJSON ops (application/x-ndjson) or XML items (application/xml).")
    dtd = models.TextField(
        blank=True, help_text="XML streams: the DTD of the stream's document, a root holding repeated item elements "
                              "(no entities, nothing external).")
    xml_mapping = models.JSONField(
        null=True, blank=True,
        help_text='XML streams: element paths of an item to relations and attributes, e.g. {"time": "det_time", '
                  '"relations": [{"name": "Photon", "path": "", "key": "pid", "attributes": {"en": '
                  '{"path": "en", "type": "float"}}}]}; its relations must be in the stream\'s schema.')
    xml_next_keys = models.JSONField(
        default=dict, blank=True, editable=False, help_text="The next generated key of each mapped relation.")
    user_queries = models.BooleanField(
        "open to user queries", default=False,
        help_text="Signed-in users may write their own keyword queries on this stream from the dashboard (its "
                  "schema is then shown to them); staff always may.")
    narrow_requests = models.PositiveIntegerField(
        default=0, help_text="Bumped to narrow every sharing class of the stream now (manage.py narrow_stream).")
    evaluator_processes = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_EVALUATOR_PROCESSES)],
        help_text="Evaluator processes (Spark applications) the stream's sharing classes are placed on; more than "
                  "one needs a landing-directory source.")
    preprocess = models.BooleanField(
        default=False, help_text="Run a pre-processor: one Spark application parses, classifies and filters the "
                                 "stream once and the evaluators read its derived stream (JSON streams with a "
                                 "landing-directory source). Changing it restarts the stream's evaluators.")
    placement = models.JSONField(
        default=dict, blank=True, editable=False,
        help_text="Where each query runs (query id -> evaluator id) and the class move in progress.")
    ts_min = models.FloatField(
        null=True, blank=True, default=TS_MIN, verbose_name="earliest ts",
        help_text=f"Ops with an earlier ts are dead letters (seconds; default {TS_MIN:.0f}, the year 1; empty: no "
                  "limit). Narrow it to the time your stream really has, e.g. 1500000000 (2017).")
    ts_max = models.FloatField(
        null=True, blank=True, default=TS_MAX, verbose_name="latest ts",
        help_text=f"Ops with a later ts are dead letters (seconds; default {TS_MAX:.0f}, the end of the year 9999; "
                  "empty: no limit).")
    max_clock_jump = models.FloatField(
        null=True, blank=True, default=MAX_CLOCK_JUMP, verbose_name="largest clock jump",
        help_text=f"An op whose ts is more than this many seconds past the stream clock is a dead letter (default "
                  f"{MAX_CLOCK_JUMP:.0f}, 30 days; empty: no limit). A stream that pauses longer needs a larger one.")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Save; an existing stream's ``placement`` is written only when named in ``update_fields``
        (it belongs to ``kwmonitor.streams.plans``, which updates it under the evaluators' row locks:
        an admin form or a stale instance must not write an old placement back)."""
        if self.pk is not None and not kwargs.get("force_insert") and kwargs.get("update_fields") is None:
            kwargs["update_fields"] = [f.attname for f in self._meta.concrete_fields
                                       if not f.primary_key and f.name != "placement"]
        super().save(*args, **kwargs)

    @property
    def is_xml(self) -> bool:
        return self.item_format == "xml"

    @property
    def is_captured(self) -> bool:
        """Ops come from a PostgreSQL publication's capture, which is the stream's only writer."""
        kind = STREAM_KINDS.get(self.source_kind)  # None: a value the field's validation refuses
        return kind is not None and kind.captured

    @property
    def has_landing_directory(self) -> bool:
        """Its ops are read from a landing directory (written by the ingest or by the capture)."""
        kind = STREAM_KINDS.get(self.source_kind)
        return kind is not None and kind.has_landing_directory

    def source_dsn(self) -> str:
        """The PostgreSQL source's DSN, from its environment variable; :class:`ValueError` if unset."""
        value = os.environ.get(self.source_dsn_env, "") if _DSN_ENV.fullmatch(self.source_dsn_env) else ""
        if not value:
            raise ValueError(f"the environment variable {self.source_dsn_env or '(none named)'} holding the DSN of "
                             f"stream {self.name!r} is not set in this process (set it for the web, worker and beat "
                             "processes, or in var/.env)")
        return value

    def stream_dtd(self) -> StreamDTD:
        """The stream's DTD; :class:`DTDError` if it does not describe a stream."""
        return StreamDTD.from_text(self.dtd)

    def item_mapping(self) -> ItemMapping:
        """The declared mapping, checked against the DTD (:class:`MappingError`, :class:`DTDError`)."""
        try:
            mapping = ItemMapping.model_validate(self.xml_mapping)
        except PydanticError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"]) or "mapping"
            raise MappingError(f"{where}: {error['msg']}") from None
        mapping.check(self.stream_dtd())
        return mapping

    @property
    def evaluator(self) -> "Evaluator":
        """The stream's primary evaluator (every stream has one)."""
        for evaluator in self.evaluators.all():  # the prefetched rows, when the caller prefetched them
            if evaluator.role == "primary":
                return evaluator
        raise Evaluator.DoesNotExist(f"stream {self.name!r} has no primary evaluator")

    def derived_path(self) -> Path:
        """The landing directory of the pre-processor's derived stream."""
        return derived_directory(settings.LANDING_DIR, self.pk)

    def clock_guard(self) -> ClockGuard:
        """The stream's guard against absurd timestamps (docs/ops.md, "The stream clock"); a range limit
        left empty is the largest float, which no finite ts passes."""
        return ClockGuard(ts_min=-sys.float_info.max if self.ts_min is None else self.ts_min,
                          ts_max=sys.float_info.max if self.ts_max is None else self.ts_max,
                          max_jump=self.max_clock_jump)

    def clean(self) -> None:
        """The clock guard is a range and a positive jump; scale-out needs a landing directory (and JSON ops
        for the pre-processor); a PostgreSQL source needs its DSN variable, publication and slot; an XML stream
        needs a DTD and a mapping whose relations are relations of the schema as they are."""
        self._clean_clock_guard()
        errors = self._postgres_errors() if self.is_captured else {}
        if not self.has_landing_directory and (self.evaluator_processes > 1 or self.preprocess):
            errors["source_kind"] = ("Several evaluators and the pre-processor read a landing directory: choose "
                                     "that source (or a PostgreSQL publication).")
        if self.schema_id is None and not getattr(self, "schema_from_catalog", False):
            errors["schema"] = "Choose the stream's schema (a PostgreSQL source may have it made from the catalog)."
        if errors:
            raise ValidationError(errors)
        if self.is_xml and self.preprocess:
            raise ValidationError({"preprocess": "The pre-processor derives JSON op streams, not XML items."})
        if not self.is_xml:
            return
        if not self.dtd.strip():
            raise ValidationError({"dtd": "An XML stream needs the DTD of its items."})
        try:
            self.stream_dtd()
        except DTDError as exc:
            raise ValidationError({"dtd": str(exc)}) from None
        if not self.xml_mapping:
            raise ValidationError({"xml_mapping": "An XML stream needs a mapping of its items to relations."})
        try:
            mapping = self.item_mapping()
        except (MappingError, DTDError) as exc:
            raise ValidationError({"xml_mapping": str(exc)}) from None
        if self.schema_id is None:
            return
        try:
            relations = self.schema.graph().to_dict()["relations"]
        except SchemaError as exc:
            raise ValidationError({"schema": f"schema {self.schema.name!r} is invalid: {exc}"}) from None
        by_name = {r["name"]: r for r in relations}
        for wanted in mapping.schema(self.schema.name)["relations"]:
            have = by_name.get(wanted["name"])
            if have is None or have["key"] != wanted["key"] or have["attributes"] != wanted["attributes"]:
                raise ValidationError({"xml_mapping": (
                    f"relation {wanted['name']!r} of the mapping is not in schema {self.schema.name!r} as "
                    f"the mapping makes it: key {wanted['key']!r}, attributes {wanted['attributes']}")})

    def _clean_clock_guard(self) -> None:
        """Every problem of the clock guard's settings at once, each on its field."""
        errors = {name: "Enter a finite number of seconds (leave it empty for no limit)."
                  for name in ("ts_min", "ts_max", "max_clock_jump")
                  if getattr(self, name) is not None and not math.isfinite(getattr(self, name))}
        low, high, jump = self.ts_min, self.ts_max, self.max_clock_jump
        if not errors and low is not None and high is not None and low > high:
            errors["ts_max"] = f"The latest ts ({high:g}) is before the earliest ts ({low:g}): no op could pass."
        if "max_clock_jump" not in errors and jump is not None and not jump > 0:
            errors["max_clock_jump"] = "The largest clock jump must be more than 0 seconds (leave it empty for no limit)."
        if errors:
            raise ValidationError(errors)

    def _postgres_errors(self) -> dict[str, str]:
        errors = {}
        if self.is_xml:
            errors["item_format"] = "A PostgreSQL publication's changes are NDJSON ops, not XML items."
        if not _DSN_ENV.fullmatch(self.source_dsn_env):
            errors["source_dsn_env"] = (f"Name the environment variable holding the DSN: {DSN_ENV_PREFIX} and "
                                        "capitals, digits or _ (e.g. KW_DSN_SHOP).")
        if not self.source_publication.strip():
            errors["source_publication"] = "Name the publication the stream watches."
        if not _SLOT.fullmatch(self.source_slot):
            errors["source_slot"] = "A slot name is 1 to 63 lower-case letters, digits or _."
        elif Stream.objects.filter(source_kind=self.source_kind, source_slot=self.source_slot,
                                   source_dsn_env=self.source_dsn_env).exclude(pk=self.pk).exists():
            errors["source_slot"] = "Another stream follows this slot of that database."
        return errors

    def landing_path(self) -> Path:
        return landing_directory(settings.LANDING_DIR, self.pk)

    def source_spec(self) -> dict[str, Any]:
        """Where ingest (or a PostgreSQL source's capture) lands the stream's ops (the raw source)."""
        return stream_kind(self.source_kind).spec(self.pk, settings.LANDING_DIR)

    def evaluator_source(self, consumers: list[int], preprocessor: int | None) -> dict[str, Any]:
        """What the evaluators read (the plan's ``source``): the raw source, or the derived stream with the
        raw one under ``raw``; ``consumers`` are the evaluators whose applied seqs gate archiving, and the
        raw source's consumer is the pre-processor when there is one. A landing directory's current
        consumers are also in Redis (``consumers_key``, :meth:`landing_consumers`), which a running reader
        follows."""
        readers = self.landing_consumers(consumers, preprocessor)
        if not readers:
            return self.source_spec()
        raw = dict(self.source_spec(), consumers=readers["raw"], consumers_key=Keys.landing_consumers(self.pk, "raw"))
        if not readers["derived"]:
            return raw
        return DERIVED.spec(self.pk, settings.LANDING_DIR, readers["derived"], raw)

    def landing_consumers(self, consumers: list[int], preprocessor: int | None) -> dict[str, list[int]]:
        """The processes reading each of the stream's landing directories ("raw", "derived")."""
        if not self.has_landing_directory:
            return {}
        if self.preprocess and preprocessor is not None:
            return {"raw": [preprocessor], "derived": consumers}
        return {"raw": consumers, "derived": []}

    def regenerate_token(self) -> str:
        self.ingest_token = new_ingest_token()
        self.save(update_fields=["ingest_token"])
        return self.ingest_token


class Evaluator(models.Model):
    """One process of a stream: its primary evaluator, a secondary one, or its pre-processor.

    The operator starts and stops the primary; the others follow it while
    the stream wants them (``evaluator_processes``, ``preprocess``). The row
    holds what the operator wants (``desired``) and what the supervisor did
    (``lifecycle``, the launch, the last error and restart): never what the
    process's heartbeat says, which is its live status
    (:mod:`kwmonitor.streams.liveness`).
    """

    DESIRED = (("running", "running"), ("stopped", "stopped"))
    LIFECYCLES = tuple((s, s) for s in ("launched", "stopping", "stopped", "failed"))
    ROLES = (("primary", "primary evaluator"), ("secondary", "secondary evaluator"), ("preprocessor", "pre-processor"),
             ("capture", "capture"))

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="evaluators")
    role = models.CharField(max_length=16, choices=ROLES, default="primary")
    slot = models.PositiveSmallIntegerField(default=0, help_text="Secondary evaluators: 1, 2, ...")
    desired = models.CharField(max_length=16, choices=DESIRED, default="stopped")
    lifecycle = models.CharField(
        max_length=16, choices=LIFECYCLES, default="stopped",
        help_text="What the supervisor last did with the process: launched it, is stopping it, stopped it, or saw "
                  "it fail (last error, next restart). Whether it runs now is its heartbeat's word, never stored "
                  "here.")
    lifecycle_at = models.DateTimeField(
        null=True, blank=True, help_text="When the supervisor recorded it: a heartbeat written before a launch, "
                                         "stop or failure recorded later is out of date.")
    pid = models.IntegerField("launched pid", null=True, blank=True,
                              help_text="The process the supervisor launched (none once it stopped or failed).")
    host = models.CharField("launched on", max_length=255, blank=True, help_text="The host it was launched on.")
    command = models.JSONField(default=list, blank=True, help_text="The command line the process was started with.")
    process_start = models.BigIntegerField(
        null=True, blank=True, help_text="Start time of the process (clock ticks since boot): tells a recycled pid apart."
    )
    started_at = models.DateTimeField(null=True, blank=True, help_text="When the supervisor last launched it.")
    plan_version = models.PositiveIntegerField(default=0, help_text="Version of the last plan written.")
    restarts = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0, help_text="Consecutive failures (sets the restart backoff).")
    next_restart_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["stream__name", "role", "slot"]
        constraints = [models.UniqueConstraint(fields=["stream", "role", "slot"], name="streams_evaluator_one_per_slot")]

    def __str__(self) -> str:
        if self.role == "preprocessor":
            return f"pre-processor of {self.stream.name}"
        if self.role == "capture":
            return f"capture of {self.stream.name}"
        if self.role == "secondary":
            return f"evaluator {self.slot + 1} of {self.stream.name}"
        return f"evaluator of {self.stream.name}"

    def process_order(self) -> tuple[int, int]:
        """Where the process comes among its stream's: the capture, the primary, the secondaries by slot, the
        pre-processor."""
        return ({"capture": -1, "primary": 0, "secondary": 1}.get(self.role, 2), self.slot)

    @property
    def wanted(self) -> bool:
        """Whether the stream's configuration wants this process (a retired secondary or pre-processor does not)."""
        if self.role == "preprocessor":
            return self.stream.preprocess
        if self.role == "capture":
            return self.stream.is_captured
        return self.role == "primary" or self.slot < self.stream.evaluator_processes

    def checkpoint_dir(self) -> Path:
        return Path(settings.CHECKPOINT_DIR) / str(self.pk)

    def capture_state_path(self) -> Path:
        """A capture's state (the slot's position and the live rows), in its checkpoint directory."""
        return self.checkpoint_dir() / "capture.sqlite3"


class ResultEvent(models.Model):
    """One add or remove of a query's change stream."""

    query = models.ForeignKey("queries.KeywordQuery", on_delete=models.CASCADE, related_name="result_events")
    entry_id = models.CharField(max_length=32)
    seq = models.BigIntegerField()
    type = models.CharField(max_length=16)
    result = models.JSONField()
    created = models.DateTimeField(default=timezone.now, help_text="When the change was published (from its stream id).")

    class Meta:
        ordering = ["query", "id"]
        constraints = [models.UniqueConstraint(fields=["query", "entry_id"], name="streams_resultevent_unique_entry")]
        # the history persister looks changes up by seq (those published again after Redis lost them)
        indexes = [models.Index(fields=["query", "seq"], name="streams_resultevent_query_seq")]


class SubscriptionResultRecord(models.Model):
    """One result item of a WXQuery subscription, copied from its Redis stream."""

    subscription = models.ForeignKey("queries.WXQuerySubscription", on_delete=models.CASCADE,
                                     related_name="result_records")
    entry_id = models.CharField(max_length=32)
    seq = models.BigIntegerField()
    item = models.TextField()
    created = models.DateTimeField(default=timezone.now, help_text="When the evaluator produced the item (its event's ts).")

    class Meta:
        ordering = ["subscription", "id"]
        constraints = [models.UniqueConstraint(fields=["subscription", "entry_id"],
                                               name="streams_subscriptionresult_unique_entry")]


class _StreamRecord(models.Model):
    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, related_name="+")
    entry_id = models.CharField(max_length=32)
    ts = models.DateTimeField()

    class Meta:
        abstract = True
        ordering = ["stream", "id"]


class MetricSample(_StreamRecord):
    batch_id = models.BigIntegerField()
    input_rows = models.BigIntegerField()
    rows_per_second = models.FloatField()
    duration_ms = models.FloatField()
    dead_letters = models.IntegerField(default=0)
    breakdown_ms = models.JSONField(default=dict)
    state = models.JSONField(default=dict)

    class Meta(_StreamRecord.Meta):
        constraints = [models.UniqueConstraint(fields=["stream", "entry_id"], name="streams_metricsample_unique_entry")]


class DeadLetterRecord(_StreamRecord):
    seq = models.BigIntegerField(null=True, blank=True)
    line = models.TextField()
    reason = models.TextField()

    class Meta(_StreamRecord.Meta):
        constraints = [models.UniqueConstraint(fields=["stream", "entry_id"], name="streams_deadletter_unique_entry")]


class DroppingSample(_StreamRecord):
    relation = models.CharField(max_length=100)
    period = models.BigIntegerField()
    tuples = models.BigIntegerField()
    dropped = models.BigIntegerField()
    ratio = models.FloatField()

    class Meta(_StreamRecord.Meta):
        constraints = [models.UniqueConstraint(fields=["stream", "entry_id"], name="streams_dropping_unique_entry")]


class RearrangementRecord(_StreamRecord):
    relation = models.CharField(max_length=100)
    old_sequence = models.JSONField()
    new_sequence = models.JSONField()
    d_init = models.FloatField()
    d_cur = models.FloatField()
    mu = models.FloatField()

    class Meta(_StreamRecord.Meta):
        constraints = [models.UniqueConstraint(fields=["stream", "entry_id"], name="streams_rearrangement_unique_entry")]


class AggregateValueRecord(_StreamRecord):
    """One emitted window value of an aggregate subscription."""

    aggregate = models.ForeignKey("queries.AggregateSubscription", on_delete=models.CASCADE, related_name="values")
    seq = models.BigIntegerField()
    window_end = models.FloatField()
    value = models.FloatField(null=True, blank=True)

    class Meta(_StreamRecord.Meta):
        constraints = [models.UniqueConstraint(fields=["stream", "entry_id"], name="streams_aggregatevalue_unique_entry")]


class HistoryCursor(models.Model):
    """The last Redis stream id copied into the history, per Redis key."""

    key = models.CharField(max_length=200, unique=True)
    last_id = models.CharField(max_length=32, default="0-0")

    def __str__(self) -> str:
        return f"{self.key} @ {self.last_id}"
