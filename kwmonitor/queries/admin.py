"""Admin for saved keyword queries: validation, predicates inline, NT/CN preview."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html

from streaming.schema import SchemaError

from kwmonitor.streams.connection import redis_client

from .apt_view import render_apt
from .forms import PredicateFormSet
from .models import AggregateSubscription, KeywordQuery, Predicate, WXQuerySubscription
from .preview import preview_counts
from .sharing import sharing_note


class PredicateInline(admin.TabularInline):
    model = Predicate
    formset = PredicateFormSet
    fields = ("relation", "attribute", "op", "value")
    extra = 0


@admin.register(KeywordQuery)
class KeywordQueryAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "schema", "stream", "keywords", "tmax", "window_seconds", "enabled", "updated")
    list_filter = ("enabled", "schema", "stream")
    search_fields = ("name", "keywords")
    list_select_related = ("owner", "schema", "stream")
    readonly_fields = ("preview", "sharing", "created", "updated")
    fields = ("name", "owner", "schema", "stream", "keywords", "tmax", "window_seconds", "enabled", "preview",
              "sharing", "created", "updated")
    inlines = [PredicateInline]

    def get_changeform_initial_data(self, request):
        return {"owner": request.user.pk, **super().get_changeform_initial_data(request)}

    @admin.display(description="NTs and CNs")
    def preview(self, obj: KeywordQuery) -> str:
        if obj.pk is None:
            return "shown once saved"
        if obj.is_filter:
            return ("filter subscription: no network templates or candidate networks, "
                    "its results are the tuples that satisfy its predicates")
        keywords = obj.keyword_list()
        try:
            doc = obj.schema.graph().to_dict()
        except SchemaError as exc:
            return f"no preview: {exc}"
        result = preview_counts(doc, keywords, obj.tmax)
        if result.error:
            return f"no preview: {result.error}"
        text = f"{result.nts} network templates, {result.cns} candidate networks ({result.seconds:.2f} s)"
        if result.too_many:
            return format_html(
                '<strong class="errornote">{} — above the limit of {}: evaluation will be slow; lower Tmax or the keywords.</strong>',
                text, settings.QUERY_CN_WARNING,
            )
        return text

    @admin.display(description="sharing class")
    def sharing(self, obj: KeywordQuery) -> str:
        if obj.pk is None or obj.stream_id is None:
            return "shown once saved on a stream"
        found, reason = sharing_note(redis_client(), obj)
        return found.describe() if found is not None else reason

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        query = form.instance
        if query.is_filter:
            return
        try:
            doc = query.schema.graph().to_dict()
        except SchemaError:
            return
        result = preview_counts(doc, query.keyword_list(), query.tmax)
        if result.too_many:
            self.message_user(
                request,
                f"{query.name!r} has {result.cns} candidate networks (limit {settings.QUERY_CN_WARNING}): "
                "its evaluation will be slow.",
                messages.WARNING,
            )


@admin.register(AggregateSubscription)
class AggregateSubscriptionAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "stream", "aggregate", "attribute", "source_query", "source_relation", "window",
                    "step", "window_kind", "having", "enabled")
    list_filter = ("enabled", "stream", "aggregate", "window_kind")
    search_fields = ("name", "source_relation", "attribute")
    list_select_related = ("owner", "stream", "source_query")
    readonly_fields = ("created", "updated")
    fields = ("name", "owner", "stream", "source_query", "source_relation", "aggregate", "attribute", "window", "step",
              "window_kind", "having", "predicates", "enabled", "created", "updated")

    def get_changeform_initial_data(self, request):
        return {"owner": request.user.pk, **super().get_changeform_initial_data(request)}


@admin.register(WXQuerySubscription)
class WXQuerySubscriptionAdmin(admin.ModelAdmin):
    """WXQuery subscriptions: compiled on save (errors name line and column), APT and back-translation shown."""

    list_display = ("name", "owner", "stream", "enabled", "updated")
    list_filter = ("enabled", "stream")
    search_fields = ("name", "text")
    list_select_related = ("owner", "stream")
    readonly_fields = ("abstraction_tree", "back_translation", "dashboard", "created", "updated")
    fields = ("name", "owner", "stream", "text", "enabled", "abstraction_tree", "back_translation", "dashboard",
              "created", "updated")

    class Media:
        css = {"all": ("kwmonitor/css/apt.css",)}

    def get_changeform_initial_data(self, request):
        return {"owner": request.user.pk, **super().get_changeform_initial_data(request)}

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "stream":
            from kwmonitor.streams.models import Stream

            kwargs["queryset"] = Stream.objects.filter(item_format="xml")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "text":
            field.widget.attrs.update({"rows": 12, "cols": 90, "spellcheck": "false", "class": "vLargeTextField"})
        return field

    @admin.display(description="APT")
    def abstraction_tree(self, obj: WXQuerySubscription) -> str:
        if obj.pk is None:
            return "shown once saved"
        try:
            return render_apt(obj.abstraction())
        except ValueError as exc:  # the stream's DTD or name changed since it was saved
            return f"does not compile any more: {exc}"

    @admin.display(description="back-translation (the WXQuery of its APT)")
    def back_translation(self, obj: WXQuerySubscription) -> str:
        if obj.pk is None:
            return "shown once saved"
        try:
            return format_html('<pre class="wxquery">{}</pre>', obj.back_translation())
        except ValueError as exc:
            return f"does not compile any more: {exc}"

    @admin.display(description="results")
    def dashboard(self, obj: WXQuerySubscription) -> str:
        if obj.pk is None:
            return "-"
        url = reverse("dashboard:subscription", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, url)
