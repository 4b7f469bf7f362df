"""The paper's synthetic workload (Sect. 7, Table 3; the generator of [21] used by [26]).

* Schema: a random tree of ``relations`` relations (``|E| = |V| - 1``), each
  joining at most 4 others; each edge is one foreign key whose holder side is
  drawn at random. Every relation has an int key ``id``, its FK columns and
  one searchable ``text`` attribute.
* Stream: every second, one insert into every relation (key = 1, 2, ...).
  An FK value is drawn uniformly among the last ``sel`` keys of the
  referenced relation (join selectivity ``1/sel``). Each of the keywords
  appears in a tuple's text with independent probability ``kwf``; the rest of
  the text is a filler token. Deletions come from the sliding window ``W``,
  which the engine applies (``--window-seconds``), as in the paper.

Deterministic for a given ``seed``.
"""

from __future__ import annotations

import random
from typing import Any, Iterator

from ..ops import Op
from . import Workload

__all__ = ["KEYWORDS", "tree_schema_doc", "build"]

KEYWORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
MAX_DEGREE = 4


def tree_schema_doc(relations: int, seed: int = 0) -> dict[str, Any]:
    """A random tree schema of ``relations`` relations, each joining at most 4 others."""
    if relations < 1:
        raise ValueError("a schema needs at least one relation")
    rng = random.Random(f"schema-{seed}")
    degree = [0] * relations
    docs = [{"name": f"R{i}", "key": "id", "attributes": {"id": "int", "text": "text"}, "foreign_keys": []}
            for i in range(relations)]
    for i in range(1, relations):
        parent = rng.choice([j for j in range(i) if degree[j] < MAX_DEGREE])
        degree[parent] += 1
        degree[i] += 1
        holder, target = (i, parent) if rng.random() < 0.5 else (parent, i)
        column = f"r{target}"
        docs[holder]["attributes"][column] = "int"
        docs[holder]["foreign_keys"].append({"name": column, "column": column, "references": f"R{target}"})
    for doc in docs:
        if not doc["foreign_keys"]:
            del doc["foreign_keys"]
    return {"name": f"synthetic-{relations}", "relations": docs}


def build(relations: int = 15, seconds: int = 3600, kwf: float = 0.01, sel: int = 1000,
          keywords: tuple[str, ...] = KEYWORDS, seed: int = 0, window_seconds: float = 1200,
          m: int = 3, tmax: int = 4) -> Workload:
    """The synthetic workload; the defaults are the paper's (W = 20 min, KWF = 0.01, sel = 1000)."""
    if sel < 1 or not 0 <= kwf <= 1 or seconds < 0:
        raise ValueError("need sel >= 1, 0 <= kwf <= 1 and seconds >= 0")
    doc = tree_schema_doc(relations, seed)
    fks = [[(fk["column"], int(fk["references"][1:])) for fk in d.get("foreign_keys", [])] for d in doc["relations"]]

    def ops() -> Iterator[Op]:
        rng = random.Random(f"stream-{seed}")
        rand, randint = rng.random, rng.randint
        inserted = [0] * relations
        for second in range(seconds):
            ts = float(second)
            for r in range(relations):
                key = inserted[r] + 1
                words = [f"w{randint(0, 999)}"]
                for word in keywords:
                    if rand() < kwf:
                        words.append(word)
                values: dict[str, Any] = {"id": key, "text": " ".join(words)}
                for column, target in fks[r]:
                    n = inserted[target]
                    values[column] = randint(max(1, n - sel + 1), n) if n else None
                inserted[r] = key
                yield Op("insert", f"R{r}", key, values, ts)

    query = {"keywords": " ".join(keywords[:m]), "tmax": tmax, "window_seconds": window_seconds}
    return Workload(doc, ops, query)
