"""Admin for schemas: relations inline (attributes and foreign keys inline on a
relation), import from and export to the schema JSON document."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.text import slugify

from streaming.schema import Schema as SchemaGraph
from streaming.schema import SchemaError

from .models import Attribute, ForeignKey, Relation, Schema


class SchemaImportForm(forms.Form):
    document = forms.FileField(label="Schema JSON file", help_text="The schema JSON document (docs/schema.md).")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    replace = forms.BooleanField(required=False, help_text="Overwrite a schema of the same name.")

    def clean(self):
        data = super().clean()
        upload = data.get("document")
        if upload is None:
            return data
        try:
            doc = json.loads(upload.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise forms.ValidationError(f"not a JSON document: {exc}") from None
        try:
            graph = SchemaGraph.from_dict(doc)
        except SchemaError as exc:
            raise forms.ValidationError(str(exc)) from None
        if not data.get("replace") and Schema.objects.filter(name=graph.name).exists():
            raise forms.ValidationError(f"schema {graph.name!r} already exists: tick replace to overwrite it")
        data["doc"] = doc
        return data

    def save(self) -> Schema:
        data = self.cleaned_data
        return Schema.import_document(data["doc"], description=data.get("description", ""), replace=data.get("replace", False))


class RelationInline(admin.TabularInline):
    model = Relation
    fields = ("name", "key", "position")
    extra = 0
    show_change_link = True


class AttributeInline(admin.TabularInline):
    model = Attribute
    fields = ("name", "type", "position")
    extra = 0


class ForeignKeyInline(admin.TabularInline):
    model = ForeignKey
    fk_name = "relation"
    fields = ("name", "column", "references", "position")
    extra = 0

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "references":
            relation_id = request.resolver_match.kwargs.get("object_id") if request.resolver_match else None
            schema_id = Relation.objects.filter(pk=relation_id).values_list("schema_id", flat=True).first()
            if schema_id is not None:
                kwargs["queryset"] = Relation.objects.filter(schema_id=schema_id)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Schema)
class SchemaAdmin(admin.ModelAdmin):
    list_display = ("name", "relation_count", "validity", "updated")
    search_fields = ("name", "description")
    readonly_fields = ("validity", "created", "updated")
    fields = ("name", "description", "validity", "created", "updated")
    inlines = [RelationInline]
    actions = ["export_json"]
    change_list_template = "admin/catalog/schema/change_list.html"

    @admin.display(description="relations")
    def relation_count(self, obj: Schema) -> int:
        return obj.relations.count()

    @admin.display(description="validation")
    def validity(self, obj: Schema) -> str:
        if obj.pk is None:
            return "-"
        try:
            graph = obj.graph()
        except SchemaError as exc:
            return f"invalid: {exc}"
        return f"valid: {len(graph.relations)} relations, {len(graph.foreign_keys)} foreign keys"

    def get_urls(self):
        return [
            path("import/", self.admin_site.admin_view(self.import_view), name="catalog_schema_import"),
        ] + super().get_urls()

    def import_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            return redirect("admin:index")
        form = SchemaImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            try:
                schema = form.save()
            except SchemaError as exc:  # created meanwhile under the same name
                form.add_error(None, str(exc))
            else:
                self.message_user(request, f"Imported schema {schema.name!r}.", messages.SUCCESS)
                return redirect(reverse("admin:catalog_schema_change", args=[schema.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": "Import a schema",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/catalog/schema/import.html", context)

    @admin.action(description="Export the selected schema as JSON")
    def export_json(self, request: HttpRequest, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one schema to export.", messages.WARNING)
            return None
        schema = queryset.get()
        try:
            doc = schema.graph().to_dict()
        except SchemaError as exc:
            self.message_user(request, f"Schema {schema.name!r} is invalid, not exported: {exc}", messages.ERROR)
            return None
        response = HttpResponse(json.dumps(doc, indent=1) + "\n", content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{slugify(schema.name) or "schema"}.json"'
        return response


@admin.register(Relation)
class RelationAdmin(admin.ModelAdmin):
    list_display = ("name", "schema", "key", "position")
    list_filter = ("schema",)
    search_fields = ("name",)
    inlines = [AttributeInline, ForeignKeyInline]
