"""The evaluator of item subscriptions agrees with a real XQuery 3.1 processor (Saxon-HE) on the same text.

Without windows, a WXQuery subscription is plain XQuery once ``stream("photons")``
reads a document of the items; Saxon evaluates it independently of our code.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from lxml import etree

from streaming.wxquery.run import run_subscriptions
from streaming.wxquery.translate import compile_text
from streaming.workloads.photons import PAPER_QUERIES

from .strategies import dtds, item_subscriptions, photon_streams

saxonche = pytest.importorskip("saxonche")


@pytest.fixture(scope="module")
def saxon():
    with saxonche.PySaxonProcessor(license=False) as processor:
        yield processor


def saxon_results(processor, text: str, items: list[etree._Element]) -> list[str]:
    document = "<photons>" + "".join(etree.tostring(i, encoding="unicode") for i in items) + "</photons>"
    query = "declare variable $stream external;\n" + re.sub(r'stream\("photons"\)', "$stream", text)
    xq = processor.new_xquery_processor()
    xq.set_parameter("stream", processor.parse_xml(xml_text=document))
    xq.set_query_content(query)
    out = xq.run_query_to_string()
    assert out is not None, xq.error_message
    root = etree.fromstring(out.split("?>", 1)[1] if out.startswith("<?xml") else out)
    return [etree.tostring(child, encoding="unicode") for child in root]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(item_subscriptions(), photon_streams())
def test_item_subscriptions_agree_with_saxon(saxon, text, items):
    ours = run_subscriptions([("q", compile_text(text, dtds))], items, "none", dtds).results["q"]
    assert ours == saxon_results(saxon, text, [i for _, i in items])


@pytest.mark.parametrize("name", ["q3", "q4"])
def test_paper_queries_agree_with_saxon(saxon, name):
    from streaming.workloads.photons import photon_items
    items = [etree.fromstring(x) for x in photon_items(300, seed=5)]
    ours = run_subscriptions([(name, compile_text(PAPER_QUERIES[name], dtds))], [("photons", i) for i in items],
                             "widen", dtds).results[name]
    assert ours and ours == saxon_results(saxon, PAPER_QUERIES[name], items)
