"""Fixtures of the dashboard tests: a stream with a query of its own user, and
the typed payloads a producer (the evaluator) publishes."""

from __future__ import annotations

import pytest

from streaming.events import ResultAdded, ResultRemoved, ResultView, TupleView, result_key


@pytest.fixture
def stream(ecommerce_schema):
    from kwmonitor.streams.models import Stream

    return Stream.objects.create(name="shop", schema=ecommerce_schema)


@pytest.fixture
def query(stream, user):
    from kwmonitor.queries.models import KeywordQuery

    return KeywordQuery.objects.create(
        owner=user, name="dress in texas", schema=stream.schema, stream=stream, keywords="dress texas", tmax=4
    )


def order_result(oid: int, cid: int = 1, pid: int = 1) -> ResultView:
    """The MTJNT Customer(cid) <- Order(oid) -> Product(pid) of the demo schema."""
    tuples = [["Customer", cid], ["Order", oid], ["Product", pid]]
    edges = [[["Order", oid], ["Customer", cid], "cid"], [["Order", oid], ["Product", pid], "pid"]]
    return ResultView(
        key=result_key(tuples, edges),
        tuples=[
            TupleView(relation="Customer", key=cid, values={"cid": cid, "name": "Ann Lee", "state": "Texas"}, hits=["texas"]),
            TupleView(relation="Order", key=oid, values={"oid": oid, "cid": cid, "pid": pid, "note": "gift"}),
            TupleView(relation="Product", key=pid, values={"pid": pid, "title": "Summer dress", "price": 40.0}, hits=["dress"]),
        ],
        edges=edges,
    )


def added(query_id: int, oid: int, seq: int | None = None) -> ResultAdded:
    return ResultAdded(query=query_id, seq=oid if seq is None else seq, result=order_result(oid))


def removed(query_id: int, oid: int, seq: int | None = None) -> ResultRemoved:
    return ResultRemoved(query=query_id, seq=oid if seq is None else seq, result=order_result(oid))


@pytest.fixture(autouse=True)
def quick_worker_ping(settings):
    """No worker runs in these tests: do not wait a whole second for its answer on every page."""
    settings.WORKER_PING_TIMEOUT_SECONDS = 0.2
