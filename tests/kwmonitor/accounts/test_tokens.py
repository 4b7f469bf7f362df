"""API tokens: stored as digests, shown once, resolved to active users only."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command

from kwmonitor.accounts.middleware import token_from_scope
from kwmonitor.accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def test_issue_stores_only_a_digest_and_resolves_the_token(user):
    row, token = ApiToken.issue(user, "script")
    assert token not in (row.key, row.prefix) and row.key == ApiToken.digest(token)
    assert row.prefix == token[:8]
    assert ApiToken.user_for(token) == user
    assert ApiToken.user_for(token + "x") is None
    row.refresh_from_db()
    assert row.last_used is not None


def test_inactive_users_tokens_do_not_authenticate(user):
    _, token = ApiToken.issue(user, "script")
    user.is_active = False
    user.save()
    assert ApiToken.user_for(token) is None


def test_token_is_read_from_the_header_first_then_the_query_string():
    assert token_from_scope({"headers": [(b"authorization", b"Token abc")], "query_string": b"token=def"}) == "abc"
    assert token_from_scope({"headers": [(b"authorization", b"Bearer abc")], "query_string": b"token=def"}) == "def"
    assert token_from_scope({"headers": [], "query_string": b"after=1-0"}) is None


def test_admin_shows_a_new_token_once(staff_client, user):
    response = staff_client.post(
        "/admin/accounts/apitoken/add/", {"user": user.pk, "name": "alerts"}, follow=True
    )
    assert response.status_code == 200
    shown = re.search(r"alerts.*?: (\S+) — copy it now", response.content.decode()).group(1)
    row = ApiToken.objects.get(name="alerts")
    assert row.key == ApiToken.digest(shown) and ApiToken.user_for(shown) == user
    assert shown not in staff_client.get(f"/admin/accounts/apitoken/{row.pk}/change/").content.decode()


def test_admin_action_replaces_the_token(staff_client, user):
    row, old = ApiToken.issue(user, "alerts")
    staff_client.post("/admin/accounts/apitoken/", {"action": "regenerate", "_selected_action": [row.pk]}, follow=True)
    assert ApiToken.user_for(old) is None
    row.refresh_from_db()
    assert row.key != ApiToken.digest(old)


def test_create_api_token_command_prints_a_working_token(user):
    out = StringIO()
    call_command("create_api_token", user.username, "--name", "cli", stdout=out)
    assert ApiToken.user_for(out.getvalue().strip()) == user
