import pytest
from django.core.exceptions import ValidationError

from kwmonitor.queries.models import EMPTY_QUERY, KeywordQuery, Predicate
from kwmonitor.streams.models import Stream

pytestmark = pytest.mark.django_db


@pytest.fixture
def query(ecommerce_schema, user):
    return KeywordQuery(owner=user, name="q", schema=ecommerce_schema, keywords="Dress  TEXAS", tmax=5)


def errors(obj) -> dict:
    with pytest.raises(ValidationError) as info:
        obj.full_clean()
    return info.value.message_dict


def test_keywords_are_normalised(query):
    query.full_clean()
    assert query.keywords == "dress texas" and query.keyword_list() == ["dress", "texas"]


@pytest.mark.parametrize(
    "keywords, message",
    [("dress dress", "given twice"), ("summer-dress", "not a single token"), ("a_b", "not a single token")],
)
def test_bad_keywords_are_rejected(query, keywords, message):
    query.keywords = keywords
    assert message in errors(query)["keywords"][0]


@pytest.mark.parametrize("tmax", [0, 11])
def test_tmax_bounds(query, tmax):
    query.tmax = tmax
    assert "tmax" in errors(query)


def test_stream_must_carry_the_query_schema(query, ecommerce_schema, demo_schema_doc):
    from kwmonitor.catalog.models import Schema

    other = Schema.import_document(dict(demo_schema_doc, name="other"))
    query.stream = Stream.objects.create(name="elsewhere", schema=other)
    assert "carries schema 'other'" in errors(query)["stream"][0]
    query.stream = Stream.objects.create(name="shop", schema=ecommerce_schema)
    query.full_clean()


@pytest.mark.parametrize(
    "relation, attribute, op, value, field, message",
    [
        ("Nope", "price", ">=", 1, "relation", "unknown relation 'Nope'"),
        ("Product", "colour", "=", "red", "attribute", "unknown attribute 'colour' of Product"),
        ("Product", "price", ">=", "cheap", "value", "Product.price: expected float"),
        ("Product", "price", "between", [50, 10], "value", "low 50.0 is above high 10.0"),
        ("Product", "price", "between", 5, "value", "needs a list [low, high]"),
        ("Customer", "cid", "=", None, "value", "This field cannot be null."),
    ],
)
def test_bad_predicates_are_rejected(query, relation, attribute, op, value, field, message):
    query.save()
    predicate = Predicate(query=query, relation=relation, attribute=attribute, op=op, value=value)
    assert message in errors(predicate)[field][0]


def test_good_predicates_are_normalised_to_the_attribute_type(query):
    query.save()
    between = Predicate(query=query, relation="Product", attribute="price", op="between", value=[10, 50])
    between.full_clean()
    assert between.value == [10.0, 50.0]
    text = Predicate(query=query, relation="Customer", attribute="state", op="=", value="Texas")
    text.full_clean()
    assert text.plan_entry() == {"relation": "Customer", "attribute": "state", "op": "=", "value": "Texas"}


@pytest.mark.parametrize("keywords", ["", "   "])
def test_a_query_without_keywords_is_a_filter_subscription_when_it_has_a_predicate(query, keywords):
    query.keywords = keywords
    query.full_clean()  # the predicates come with the query (admin inline) or later: checked by check_content
    assert query.keywords == "" and query.is_filter and query.keyword_list() == []
    query.save()
    with pytest.raises(ValidationError) as info:
        query.check_content()
    assert info.value.message_dict == {"keywords": [EMPTY_QUERY]}
    Predicate.objects.create(query=query, relation="Product", attribute="price", op=">=", value=40.0)
    query.check_content()
    assert query.plan_entry()["keywords"] == []
    assert query.plan_entry()["predicates"] == [{"relation": "Product", "attribute": "price", "op": ">=", "value": 40.0}]
    assert str(query) == "q (filter subscription)"


def test_check_content_counts_the_predicates_it_is_given(query):
    query.check_content(0)  # keywords: predicates are optional
    query.keywords = ""
    query.check_content(2)
    with pytest.raises(ValidationError, match="needs keywords, or at least one predicate"):
        query.check_content(0)
    with pytest.raises(ValidationError):
        query.check_content()  # unsaved: no predicate yet
