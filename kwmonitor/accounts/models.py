"""Per-user API tokens: how programs (the feed client, scripts) authenticate a websocket.

Only a SHA-256 digest of each token is stored (``key``), so a database dump
does not hand out live credentials; the token itself is shown once, when it is
issued (admin or ``manage.py create_api_token``). ``prefix`` (its first
characters) tells tokens apart in lists.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import models
from django.utils import timezone

__all__ = ["ApiToken"]

PREFIX_LENGTH = 8


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'alerting script'.")
    key = models.CharField(max_length=64, unique=True, editable=False, help_text="SHA-256 digest of the token.")
    prefix = models.CharField(max_length=PREFIX_LENGTH, editable=False, help_text="First characters of the token.")
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "API token"
        ordering = ["user", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def assign_new_token(self) -> str:
        """Give this (unsaved or revoked) row a fresh token; returns the token, which is not stored."""
        token = secrets.token_urlsafe(30)
        self.key = self.digest(token)
        self.prefix = token[:PREFIX_LENGTH]
        return token

    @classmethod
    def issue(cls, user: AbstractBaseUser, name: str) -> tuple["ApiToken", str]:
        """Create a token for ``user``; returns the row and the token (shown once)."""
        row = cls(user=user, name=name)
        token = row.assign_new_token()
        row.save()
        return row, token

    @classmethod
    def user_for(cls, token: str) -> AbstractBaseUser | None:
        """The active user owning ``token`` (and record its use), or None."""
        row = cls.objects.select_related("user").filter(key=cls.digest(token)).first()
        if row is None or not row.user.is_active:
            return None
        cls.objects.filter(pk=row.pk).update(last_used=timezone.now())
        return row.user
