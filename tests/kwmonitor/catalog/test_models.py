import pytest

from kwmonitor.catalog.models import Attribute, ForeignKey, Relation, Schema
from streaming.schema import SchemaError

pytestmark = pytest.mark.django_db


def test_import_then_export_gives_the_document_back(demo_schema_doc):
    schema = Schema.import_document(demo_schema_doc)
    assert schema.to_document() == demo_schema_doc
    assert schema.graph().relations["Group"].foreign_keys[1].target == "Product"


def test_invalid_document_writes_nothing(demo_schema_doc):
    demo_schema_doc["relations"][2]["foreign_keys"][0]["references"] = "Nope"
    with pytest.raises(SchemaError, match="unknown relation 'Nope'"):
        Schema.import_document(demo_schema_doc)
    assert not Schema.objects.exists() and not Relation.objects.exists()


def test_import_of_an_existing_name_needs_replace(demo_schema_doc, ecommerce_schema):
    with pytest.raises(SchemaError, match="already exists"):
        Schema.import_document(demo_schema_doc)
    demo_schema_doc["relations"] = demo_schema_doc["relations"][:2]
    replaced = Schema.import_document(demo_schema_doc, replace=True)
    assert replaced.pk == ecommerce_schema.pk
    assert replaced.to_document() == demo_schema_doc
    assert ForeignKey.objects.count() == 0
    assert Attribute.objects.filter(relation__schema=replaced).count() == 6


def test_rows_that_break_the_schema_fail_validation(ecommerce_schema):
    Attribute.objects.filter(relation__name="Order", name="cid").update(type="text")
    with pytest.raises(SchemaError, match="Order.cid is text but Customer.cid is int"):
        ecommerce_schema.graph()
