"""Tokenizer and keyword-set classification (docs/schema.md, "Keywords").

A tuple *contains* keyword ``k`` iff ``k`` (casefolded) equals one of its
tokens, the tokens being ``re.findall(r"[^\\W_]+", value.casefold())`` over the
searchable attributes of its relation.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from .schema import Relation

__all__ = ["KeywordError", "tokens", "tuple_tokens", "parse_keywords", "KeywordSet"]

_TOKEN = re.compile(r"[^\W_]+")


class KeywordError(ValueError):
    """A query's keywords are not distinct single tokens."""


def tokens(value: str) -> list[str]:
    """The tokens of one text value, in order.

    >>> tokens("Summer-dress, TEXAS_2")
    ['summer', 'dress', 'texas', '2']
    """
    return _TOKEN.findall(value.casefold())


def tuple_tokens(relation: Relation, values: Mapping[str, Any]) -> set[str]:
    """The set of tokens over a tuple's searchable attributes."""
    out: set[str] = set()
    for attr in relation.searchable:
        value = values.get(attr)
        if isinstance(value, str):
            out.update(_TOKEN.findall(value.casefold()))
    return out


def parse_keywords(keywords: str | Iterable[str]) -> tuple[str, ...]:
    """Normalise a query's keywords: a space-separated string or a list.

    Each keyword must be one token; they must be distinct after casefolding.
    The order given is kept (keyword ``i`` is bit ``1 << i`` of a mask).

    >>> parse_keywords("Dress texas")
    ('dress', 'texas')
    """
    items = keywords.split() if isinstance(keywords, str) else list(keywords)
    out: list[str] = []
    for item in items:
        toks = tokens(item) if isinstance(item, str) else []
        if len(toks) != 1 or toks[0] != item.casefold():
            raise KeywordError(f"keyword {item!r} is not a single token (letters and digits only)")
        if toks[0] in out:
            raise KeywordError(f"keyword {item!r} is given twice")
        out.append(toks[0])
    if not out:
        raise KeywordError("a query needs at least one keyword")
    return tuple(out)


class KeywordSet:
    """The keywords of one query, classifying tuples by the subset they contain."""

    def __init__(self, keywords: str | Sequence[str]):
        self.keywords = parse_keywords(keywords)
        self.bit = {k: 1 << i for i, k in enumerate(self.keywords)}
        self.full = (1 << len(self.keywords)) - 1

    def __len__(self) -> int:
        return len(self.keywords)

    def mask_of_tokens(self, toks: Iterable[str]) -> int:
        """Bitmask of the query keywords among ``toks``."""
        bit = self.bit
        mask = 0
        for t in toks:
            mask |= bit.get(t, 0)
        return mask

    def mask(self, relation: Relation, values: Mapping[str, Any]) -> int:
        """Bitmask of the query keywords the tuple contains (bit i = keyword i)."""
        return self.mask_of_tokens(tuple_tokens(relation, values))

    def names(self, mask: int) -> list[str]:
        """The keywords of a mask, in query order."""
        return [k for i, k in enumerate(self.keywords) if mask >> i & 1]
