import json

import pytest
from django.core.management import CommandError, call_command

from kwmonitor.catalog.models import Schema

pytestmark = pytest.mark.django_db

DEMO = "kwmonitor/streams/demo/schema.json"


def test_import_then_export_round_trip(tmp_path, demo_schema_doc, capsys):
    call_command("import_schema", DEMO, "--description", "shop")
    assert Schema.objects.get().description == "shop"
    out = tmp_path / "out.json"
    call_command("export_schema", "ecommerce", "-o", str(out))
    assert json.loads(out.read_text()) == demo_schema_doc


def test_import_errors_name_the_file_and_the_place(tmp_path, demo_schema_doc):
    bad = tmp_path / "bad.json"
    demo_schema_doc["relations"][0]["attributes"]["state"] = "string"
    bad.write_text(json.dumps(demo_schema_doc))
    with pytest.raises(CommandError, match=r"bad.json: relations\[0\] 'Customer'.attributes.state: unknown type 'string'"):
        call_command("import_schema", str(bad))
    with pytest.raises(CommandError, match="not JSON"):
        (tmp_path / "x.json").write_text("{")
        call_command("import_schema", str(tmp_path / "x.json"))
    call_command("import_schema", DEMO)
    with pytest.raises(CommandError, match="already exists"):
        call_command("import_schema", DEMO)
    call_command("import_schema", DEMO, "--replace")
    assert Schema.objects.count() == 1
    with pytest.raises(CommandError, match="no schema named 'nope'"):
        call_command("export_schema", "nope")
