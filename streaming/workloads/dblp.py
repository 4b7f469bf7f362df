"""A DBLP-shaped bibliography stream (paper Sect. 7.2, Fig. 12).

Author(aid, name), Paper(pid, title, year), Write(wid, aid, pid) and
Cite(cid, citing, cited) with two foreign keys to Paper. Papers arrive in
publication order, each followed by its Write tuples (returning or new
authors) and its Cite tuples (to earlier papers). Titles are built from the
vocabulary of computer-science titles, so the paper's query keywords
(analysis, design, system, networks, model; Table 5) occur with realistic
frequencies. Deterministic for a given ``seed``.
"""

from __future__ import annotations

import random
from typing import Any, Iterator

from ..ops import Op
from . import Workload
from .ecommerce import FIRST, LAST

__all__ = ["SCHEMA_DOC", "build"]

SCHEMA_DOC: dict[str, Any] = {
    "name": "dblp",
    "relations": [
        {"name": "Author", "key": "aid", "attributes": {"aid": "int", "name": "text"}},
        {"name": "Paper", "key": "pid", "attributes": {"pid": "int", "title": "text", "year": "int"}},
        {"name": "Write", "key": "wid", "attributes": {"wid": "int", "aid": "int", "pid": "int"},
         "foreign_keys": [{"name": "aid", "column": "aid", "references": "Author"},
                          {"name": "pid", "column": "pid", "references": "Paper"}]},
        {"name": "Cite", "key": "cid", "attributes": {"cid": "int", "citing": "int", "cited": "int"},
         "foreign_keys": [{"name": "citing", "column": "citing", "references": "Paper"},
                          {"name": "cited", "column": "cited", "references": "Paper"}]},
    ],
}

OPENERS = ("A", "An", "Towards", "On", "Efficient", "Scalable", "Adaptive", "Fast", "Robust", "Practical")
ADJECTIVES = ("distributed", "fuzzy", "object-oriented", "probabilistic", "parallel", "real-time", "secure",
              "incremental", "approximate", "semantic", "wireless", "neural", "relational", "temporal")
TOPICS = ("analysis", "design", "system", "networks", "model", "evaluation", "algorithm", "information",
          "data", "systems", "query processing", "keyword search", "data streams", "databases", "scheduling",
          "verification", "learning", "retrieval", "indexing", "caching", "routing", "compilers")
LINKS = ("for", "of", "in", "using", "with", "over")


def _title(rng: random.Random) -> str:
    words = [rng.choice(OPENERS), rng.choice(ADJECTIVES), rng.choice(TOPICS)]
    if rng.random() < 0.7:
        words += [rng.choice(LINKS), rng.choice(ADJECTIVES), rng.choice(TOPICS)]
    if rng.random() < 0.2:
        words += ["using", rng.choice(TOPICS)]
    return " ".join(words)


def build(papers: int = 2000, seed: int = 0, start_year: int = 1990) -> Workload:
    """``papers`` papers with their authorships and citations; suggested query ``analysis design system``."""

    def stream() -> Iterator[Op]:
        rng = random.Random(f"dblp-{seed}")
        authors = writes = cites = 0
        ts = 0.0
        for pid in range(1, papers + 1):
            ts += 1.0
            year = start_year + pid * 20 // max(papers, 1)
            yield Op("insert", "Paper", pid, {"pid": pid, "title": _title(rng), "year": year}, ts)
            for _ in range(rng.choice((1, 2, 2, 3, 3, 4))):
                if authors < 3 or rng.random() < 0.35:
                    authors += 1
                    aid = authors
                    yield Op("insert", "Author", aid, {"aid": aid, "name": f"{rng.choice(FIRST)} {rng.choice(LAST)}"}, ts)
                else:
                    aid = rng.randint(max(1, authors - 500), authors)
                writes += 1
                yield Op("insert", "Write", writes, {"wid": writes, "aid": aid, "pid": pid}, ts)
            for _ in range(rng.choice((0, 0, 1, 1, 2, 3)) if pid > 1 else 0):
                cites += 1
                cited = rng.randint(max(1, pid - 400), pid - 1)
                yield Op("insert", "Cite", cites, {"cid": cites, "citing": pid, "cited": cited}, ts)

    return Workload(SCHEMA_DOC, stream, {"keywords": "analysis design system", "tmax": 5,
                                         "window_seconds": max(1.0, papers / 2)})
