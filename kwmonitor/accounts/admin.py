"""Admin for API tokens: a new token is shown once, in the confirmation message."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created", "last_used"]
    list_filter = ["user"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = ["prefix", "created", "last_used"]
    fields = ["user", "name", "prefix", "created", "last_used"]
    actions = ["regenerate"]

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        token = None if change else obj.assign_new_token()
        super().save_model(request, obj, form, change)
        if token is not None:
            self._show(request, obj, token)

    @admin.action(description="Replace the token of the selected rows (the old ones stop working)")
    def regenerate(self, request: HttpRequest, queryset: Any) -> None:
        for row in queryset:
            token = row.assign_new_token()
            row.save(update_fields=["key", "prefix"])
            self._show(request, row, token)

    @staticmethod
    def _show(request: HttpRequest, row: ApiToken, token: str) -> None:
        messages.warning(request, f"Token “{row.name}” for {row.user}: {token} — copy it now, it is not shown again.")
