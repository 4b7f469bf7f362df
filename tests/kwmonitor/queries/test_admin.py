import pytest
from django.urls import reverse

from kwmonitor.queries.models import KeywordQuery

pytestmark = pytest.mark.django_db

ADD = reverse("admin:queries_keywordquery_add")


def form(schema, staff_user, predicates=(), **fields):
    data = {
        "name": "dress in texas", "owner": staff_user.pk, "schema": schema.pk, "stream": "",
        "keywords": "dress texas", "tmax": 5, "window_seconds": "", "enabled": "on",
        "predicates-TOTAL_FORMS": len(predicates), "predicates-INITIAL_FORMS": 0,
        "predicates-MIN_NUM_FORMS": 0, "predicates-MAX_NUM_FORMS": 1000,
    }
    for i, (relation, attribute, op, value) in enumerate(predicates):
        data.update({f"predicates-{i}-relation": relation, f"predicates-{i}-attribute": attribute,
                     f"predicates-{i}-op": op, f"predicates-{i}-value": value})
    data.update(fields)
    return data


def test_staff_adds_a_query_with_predicates(staff_client, staff_user, ecommerce_schema):
    response = staff_client.post(ADD, form(ecommerce_schema, staff_user, [("Product", "price", "between", "[10, 50]")],
                                           keywords="Dress Texas"))
    assert response.status_code == 302, response.content.decode()[:3000]
    query = KeywordQuery.objects.get()
    assert query.keywords == "dress texas"
    assert [p.plan_entry() for p in query.predicates.all()] == [
        {"relation": "Product", "attribute": "price", "op": "between", "value": [10.0, 50.0]}
    ]


def test_admin_rejects_bad_keywords_tmax_and_predicates_of_a_new_query(staff_client, staff_user, ecommerce_schema):
    page = staff_client.post(ADD, form(ecommerce_schema, staff_user, [("Order", "note", ">=", "3")],
                                       keywords="dress dress", tmax=11)).content.decode()
    assert "keyword &#x27;dress&#x27; is given twice" in page
    assert "Ensure this value is less than or equal to 10." in page
    assert "Order.note: expected text, got 3" in page
    page = staff_client.post(ADD, form(ecommerce_schema, staff_user, [("Order", "colour", "=", '"red"')])).content.decode()
    assert "unknown attribute &#x27;colour&#x27; of Order" in page
    assert not KeywordQuery.objects.exists()


def test_change_page_previews_nt_and_cn_counts_with_a_warning_above_the_limit(
    staff_client, staff_user, ecommerce_schema, settings
):
    query = KeywordQuery.objects.create(owner=staff_user, name="q", schema=ecommerce_schema, keywords="dress texas", tmax=5)
    url = reverse("admin:queries_keywordquery_change", args=[query.pk])
    page = staff_client.get(url).content.decode()
    assert "5 network templates, 80 candidate networks" in page and "above the limit" not in page
    settings.QUERY_CN_WARNING = 50
    page = staff_client.get(url).content.decode()
    assert "above the limit of 50" in page
    response = staff_client.post(url, form(ecommerce_schema, staff_user), follow=True)
    assert "has 80 candidate networks (limit 50)" in response.content.decode()


def test_non_staff_cannot_open_the_query_admin(user_client):
    assert user_client.get(ADD).status_code == 302


def test_staff_adds_a_filter_subscription_and_its_page_says_so(staff_client, staff_user, ecommerce_schema):
    response = staff_client.post(ADD, form(ecommerce_schema, staff_user, [("Product", "price", ">=", "40")], keywords=""))
    assert response.status_code == 302, response.content.decode()[:3000]
    query = KeywordQuery.objects.get()
    assert query.is_filter and query.plan_entry()["keywords"] == []
    page = staff_client.get(reverse("admin:queries_keywordquery_change", args=[query.pk])).content.decode()
    assert "filter subscription: no network templates or candidate networks" in page
    assert "candidate networks (" not in page


def test_admin_rejects_a_query_with_neither_keywords_nor_predicates(staff_client, staff_user, ecommerce_schema):
    page = staff_client.post(ADD, form(ecommerce_schema, staff_user, keywords="  ")).content.decode()
    assert "A query needs keywords, or at least one predicate (a filter subscription" in page
    assert not KeywordQuery.objects.exists()


def test_admin_keeps_a_filter_subscription_from_losing_its_last_predicate(staff_client, staff_user, ecommerce_schema):
    query = KeywordQuery.objects.create(owner=staff_user, name="q", schema=ecommerce_schema, keywords="", tmax=5)
    predicate = query.predicates.create(relation="Product", attribute="price", op=">=", value=40.0)
    url = reverse("admin:queries_keywordquery_change", args=[query.pk])
    data = form(ecommerce_schema, staff_user, [("Product", "price", ">=", "40")], keywords="")
    data.update({"predicates-INITIAL_FORMS": 1, "predicates-0-id": predicate.pk, "predicates-0-query": query.pk,
                 "predicates-0-DELETE": "on"})
    page = staff_client.post(url, data).content.decode()
    assert "A query needs keywords, or at least one predicate" in page
    assert query.predicates.count() == 1
    # with keywords again the predicate may go: it is a keyword query
    data["keywords"] = "dress"
    assert staff_client.post(url, data).status_code == 302
    assert query.predicates.count() == 0 and KeywordQuery.objects.get().keywords == "dress"
