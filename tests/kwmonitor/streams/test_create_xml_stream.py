"""``manage.py create_xml_stream``: schema from the mapping, stream checked as in the admin, nothing on error."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from kwmonitor.catalog.models import Schema
from kwmonitor.streams.models import Stream
from streaming.workloads.photons import PHOTONS_DTD, PHOTONS_MAPPING

pytestmark = pytest.mark.django_db


@pytest.fixture
def files(tmp_path):
    (tmp_path / "photons.dtd").write_text(PHOTONS_DTD)
    (tmp_path / "mapping.json").write_text(json.dumps(PHOTONS_MAPPING))
    return tmp_path


def test_creates_the_schema_and_the_stream(files):
    out = io.StringIO()
    call_command("create_xml_stream", "photons", dtd=files / "photons.dtd", mapping=files / "mapping.json", stdout=out)
    stream = Stream.objects.get(name="photons")
    assert stream.is_xml and stream.dtd == PHOTONS_DTD and stream.xml_mapping == PHOTONS_MAPPING
    assert [r["name"] for r in stream.schema.graph().to_dict()["relations"]] == ["Photon"]
    assert f"POST /ingest/{stream.pk}/ (Content-Type: application/xml)" in out.getvalue()


def test_a_mapping_that_does_not_fit_the_dtd_writes_nothing(files):
    bad = {"relations": [{"name": "Photon", "path": "", "key": "pid", "attributes": {"e": {"path": "energy"}}}]}
    (files / "mapping.json").write_text(json.dumps(bad))
    with pytest.raises(CommandError, match="'energy' is not an element holding text"):
        call_command("create_xml_stream", "photons", dtd=files / "photons.dtd", mapping=files / "mapping.json")
    assert not Schema.objects.exists() and not Stream.objects.exists()
