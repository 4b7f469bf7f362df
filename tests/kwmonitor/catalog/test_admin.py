import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from kwmonitor.catalog.models import Relation, Schema

pytestmark = pytest.mark.django_db


def upload(doc) -> SimpleUploadedFile:
    return SimpleUploadedFile("schema.json", json.dumps(doc).encode(), content_type="application/json")


def test_admin_pages_load_for_staff(staff_client, ecommerce_schema):
    order = Relation.objects.get(schema=ecommerce_schema, name="Order")
    for url in (
        reverse("admin:index"),
        reverse("admin:catalog_schema_changelist"),
        reverse("admin:catalog_schema_change", args=[ecommerce_schema.pk]),
        reverse("admin:catalog_schema_import"),
        reverse("admin:catalog_relation_change", args=[order.pk]),
    ):
        response = staff_client.get(url)
        assert response.status_code == 200, url
    page = staff_client.get(reverse("admin:catalog_schema_change", args=[ecommerce_schema.pk])).content.decode()
    assert "valid: 4 relations, 4 foreign keys" in page


def test_admin_refuses_non_staff(user_client, ecommerce_schema):
    response = user_client.get(reverse("admin:catalog_schema_change", args=[ecommerce_schema.pk]))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert user_client.get(reverse("admin:catalog_schema_import")).status_code == 302


def test_import_form_then_export_action_round_trip(staff_client, demo_schema_doc):
    response = staff_client.post(reverse("admin:catalog_schema_import"), {"document": upload(demo_schema_doc)})
    schema = Schema.objects.get(name="ecommerce")
    assert response.status_code == 302 and response["Location"].endswith(f"/{schema.pk}/change/")
    exported = staff_client.post(
        reverse("admin:catalog_schema_changelist"), {"action": "export_json", "_selected_action": [schema.pk]}
    )
    assert exported["Content-Disposition"] == 'attachment; filename="ecommerce.json"'
    assert json.loads(exported.content) == demo_schema_doc


def test_import_form_reports_a_bad_document_and_an_existing_name(staff_client, demo_schema_doc, ecommerce_schema):
    bad = dict(demo_schema_doc, name="other", relations=[{"name": "R", "key": "nope", "attributes": {"a": "int"}}])
    response = staff_client.post(reverse("admin:catalog_schema_import"), {"document": upload(bad)})
    assert response.status_code == 200
    assert "relations[0] &#x27;R&#x27;.key: &#x27;nope&#x27; is not an attribute" in response.content.decode()
    response = staff_client.post(reverse("admin:catalog_schema_import"), {"document": upload(demo_schema_doc)})
    assert "already exists" in response.content.decode()
    assert Schema.objects.count() == 1
    response = staff_client.post(
        reverse("admin:catalog_schema_import"), {"document": upload(demo_schema_doc), "replace": "on"}
    )
    assert response.status_code == 302 and Schema.objects.count() == 1
