"""The demo runs until stopped: an endless, consistent, deterministic feed, and a feeder that goes on where its
stream is."""

from __future__ import annotations

import io
import json
from itertools import islice

import pytest
from django.core.management import call_command

from kwmonitor.streams.demo import BAD_LINES, DEMO_QUERIES, demo_feed
from streaming import sources

SMALLEST_WINDOW = min(window for _, _, _, window, _ in DEMO_QUERIES)


def test_the_endless_feed_keeps_producing_consistent_ops_past_the_old_end():
    live: dict[tuple[str, int], float] = {}  # (relation, key) -> ts of its insert
    last_ts = float("-inf")
    sale_prices, premium_prices = [], []
    for n, line in enumerate(islice(demo_feed(None, bad_every=0), 30_000)):  # the old feed ended at 20,000
        op = json.loads(line)
        assert op["ts"] > last_ts
        last_ts = op["ts"]
        if op["op"] == "insert":
            key = op["tuple"][{"Customer": "cid", "Product": "pid", "Order": "oid", "Group": "gid"}[op["relation"]]]
            assert (op["relation"], key) not in live, f"op {n}: insert of a live key"
            live[op["relation"], key] = op["ts"]
            if op["relation"] == "Product" and n >= 28_000:
                (sale_prices if n // 400 % 2 == 0 else premium_prices).append(op["tuple"]["price"])
        else:
            inserted = live.pop((op["relation"], op["key"]), None)
            assert inserted is not None, f"op {n}: delete of a missing key"
            assert op["ts"] - inserted < SMALLEST_WINDOW  # still in every demo query's window
    assert max(sale_prices) <= 60 < min(premium_prices)  # the seasons still shift late in the feed
    assert list(islice(demo_feed(None), 500)) == list(islice(demo_feed(None), 500))  # deterministic


def test_the_feed_after_a_ts_is_the_rest_of_the_same_feed():
    whole = list(demo_feed(1000))
    ts = json.loads(whole[600])["ts"]
    assert list(demo_feed(1000, after=ts)) == whole[601:]


@pytest.mark.django_db
def test_feed_demo_goes_on_where_its_stream_is(shop, settings, tmp_path):
    settings.LANDING_DIR = tmp_path

    def stored() -> list[dict]:
        return [op for _, op in map(sources.split_seq, sources.read_landing(tmp_path / str(shop.pk)))]

    out = io.StringIO()
    call_command("feed_demo", "--stream", "shop", "--rate", "0", "--ops", "300", stdout=out)
    assert out.getvalue().splitlines() == ["300 ops accepted (seq 0..299), 1 rejected"]
    good = [json.loads(line) for line in demo_feed(700) if line not in BAD_LINES]
    assert stored() == good[:300]
    out = io.StringIO()
    call_command("feed_demo", "--stream", str(shop.pk), "--rate", "0", "--ops", "700", stdout=out)
    assert out.getvalue().splitlines()[1] == "400 ops accepted (seq 300..699), 1 rejected"  # the bad line after op 500
    assert stored() == good  # nothing sent twice, nothing left out
