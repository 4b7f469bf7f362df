"""Issue an API token for a user and print it (it is stored only as a digest)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from kwmonitor.accounts.models import ApiToken


class Command(BaseCommand):
    help = "Issue an API token for USERNAME (for the feed client and other programs) and print it once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="feed client", help="What the token is for.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            user = get_user_model().objects.get_by_natural_key(options["username"])
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"no user named {options['username']!r}") from exc
        _, token = ApiToken.issue(user, options["name"])
        self.stdout.write(token)
