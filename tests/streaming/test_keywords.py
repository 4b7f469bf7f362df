"""Keyword tokens and the keyword-set mask of a tuple (docs/schema.md, "Keywords")."""

from __future__ import annotations

import pytest

from streaming.keywords import KeywordError, KeywordSet, parse_keywords, tokens, tuple_tokens
from streaming.schema import load_schema

from tests.examples import ECOMMERCE


def test_tokens_casefold_and_split_on_underscore():
    assert tokens("Summer-dress, TEXAS_2 Straße") == ["summer", "dress", "texas", "2", "strasse"]


def test_parse_keywords():
    assert parse_keywords("Dress texas") == ("dress", "texas")
    assert parse_keywords(["a", "B"]) == ("a", "b")
    for bad in ("dress dress", "", "a-b", "x_y"):
        with pytest.raises(KeywordError):
            parse_keywords(bad)


def test_mask_uses_searchable_attributes_only():
    schema = load_schema(ECOMMERCE)
    ks = KeywordSet("dress texas")
    customer = schema.relations["Customer"]
    assert ks.mask(customer, {"cid": 1, "name": "Ann Dress", "state": "Texas"}) == 0b11
    assert ks.mask(customer, {"cid": 1, "name": "dresses", "state": None}) == 0
    order = schema.relations["Order"]
    assert tuple_tokens(order, {"oid": 1, "cid": 2, "pid": 3, "note": "Gift"}) == {"gift"}
    assert ks.names(0b10) == ["texas"]
