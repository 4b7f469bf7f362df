"""What the pages let a user see and load: schemas, error pages, the favicon, the Content-Security-Policy."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.redis, pytest.mark.django_db]


def test_a_user_sees_only_the_schemas_of_their_queries_and_streams(client, query, django_user_model, redis_client,
                                                                  demo_schema_doc):
    from kwmonitor.catalog.models import Schema

    other = Schema.import_document(dict(demo_schema_doc, name="private"), description="someone else's")
    bob = django_user_model.objects.create_user("bob", "bob@example.com", "bob-password-1")
    client.force_login(bob)
    assert client.get(f"/schemas/{query.schema_id}/").status_code == 404
    assert client.get(f"/schemas/{other.pk}/").status_code == 404
    assert "ecommerce" not in client.get("/").content.decode()

    client.force_login(query.owner)
    assert client.get(f"/schemas/{query.schema_id}/").status_code == 200
    assert client.get(f"/schemas/{other.pk}/").status_code == 404
    overview = client.get("/").content.decode()
    assert f'href="/schemas/{query.schema_id}/"' in overview and f'href="/schemas/{other.pk}/"' not in overview


def test_staff_see_every_schema(staff_client, query, redis_client, demo_schema_doc):
    from kwmonitor.catalog.models import Schema

    other = Schema.import_document(dict(demo_schema_doc, name="private"))
    assert staff_client.get(f"/schemas/{other.pk}/").status_code == 200


def test_not_found_is_a_styled_page(user_client, redis_client, settings):
    settings.DEBUG = False
    response = user_client.get("/queries/999999/")
    html = response.content.decode()
    assert response.status_code == 404
    assert "kwmonitor/css/kwmonitor.css" in html and "Back to the overview" in html and ">404<" in html


def test_forbidden_is_a_styled_page(rf, user):
    from django.views.defaults import permission_denied

    request = rf.get("/admin/")
    request.user = user
    response = permission_denied(request, exception=None)
    html = response.content.decode()
    assert response.status_code == 403 and ">403<" in html and "kwmonitor/css/kwmonitor.css" in html


def test_the_favicon_is_served(client, user_client, redis_client):
    html = user_client.get("/").content.decode()
    href = re.search(r'<link rel="icon" href="([^"]+)"', html).group(1)
    assert href.endswith("favicon.svg")
    redirect = client.get("/favicon.ico")
    assert redirect.status_code == 301 and redirect["Location"] == href


@pytest.mark.parametrize("path", ["/", "/accounts/login/", "/admin/login/"])
def test_every_page_has_a_policy_without_inline_script_or_style(client, user_client, redis_client, path):
    response = (client if "login" in path else user_client).get(path)
    policy = dict(part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";") if part.strip())
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'" and policy["default-src"] == "'self'"
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"


@pytest.mark.parametrize("template", ["/", "/queries/{query}/", "/streams/{stream}/", "/schemas/{schema}/"])
def test_pages_carry_no_inline_script_or_style(user_client, query, redis_client, template):
    html = user_client.get(template.format(query=query.pk, stream=query.stream_id, schema=query.schema_id)).content.decode()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    for attributes, body in scripts:
        assert 'src="' in attributes or 'type="application/json"' in attributes, attributes
        assert 'src="' not in attributes or not body.strip()
    assert not re.search(r"\sstyle=", html)
    assert not re.search(r"\son[a-z]+=", html)
