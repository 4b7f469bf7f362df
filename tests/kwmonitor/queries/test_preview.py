import pytest
from django.core.cache import cache

from kwmonitor.queries.preview import preview_counts


@pytest.fixture(autouse=True)
def empty_cache():
    cache.clear()
    yield
    cache.clear()


def test_counts_match_the_engine(demo_schema_doc):
    from streaming.cn import generate_cns
    from streaming.cn.templates import count_nts
    from streaming.schema import Schema

    result = preview_counts(demo_schema_doc, ["dress", "texas"], 5)
    assert result.error == ""
    assert result.nts == count_nts(2, 5)
    assert result.cns == len(generate_cns(Schema.from_dict(demo_schema_doc), 2, 5)) == 80
    assert preview_counts(demo_schema_doc, ["dress", "texas"], 5) == result  # from the cache


def test_a_count_that_takes_too_long_gives_up_with_a_reason(demo_schema_doc):
    result = preview_counts(demo_schema_doc, ["a", "b", "c", "d", "e", "f"], 10, timeout=0.05)
    assert result.cns is None and result.timed_out and "gave up after" in result.error
    assert preview_counts(demo_schema_doc, ["a", "b", "c", "d", "e", "f"], 10, timeout=0.05) == result  # remembered


def test_too_many_is_judged_against_the_setting(demo_schema_doc, settings):
    settings.QUERY_CN_WARNING = 79
    assert preview_counts(demo_schema_doc, ["dress", "texas"], 5).too_many
    settings.QUERY_CN_WARNING = 80
    assert not preview_counts(demo_schema_doc, ["dress", "texas"], 5).too_many
