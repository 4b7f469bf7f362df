"""Random saved queries for a stream: the sharing benchmarks' stand-in for a team's saved queries.

Drawn from the stream itself (a list of op objects and its schema), so they
fit any workload:

* keyword sets come from a *pool* of ``pool`` sets of 2 (sometimes 3)
  keywords, each keyword a token found in between 0.5 % and 5 % of the
  stream's inserted tuples (neither noise words nor one-offs), drawn with
  weight ``1 / (rank + 1) ** word_skew`` by how often the stream holds it
  (0: uniformly); a query takes pool set ``i`` with probability proportional
  to ``1 / (i + 1) ** skew`` (Zipf: keyword sets overlap as saved queries of
  one team do, and the number of distinct sets grows slowly with the number
  of queries; 0: uniformly, hundreds of distinct sets);
* half of the queries restrict one relation with a random predicate on a
  numeric attribute (``>=``, ``<=`` or ``between``, constants drawn from the
  stream's values);
* windows and Tmax come from small sets; ``filters`` of every 32 queries are
  filter subscriptions (no keywords, a predicate);
* aggregate subscriptions count or average a numeric attribute of a relation,
  or count a query's new results, over a few (Δ, μ) pairs.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any, Iterable, Sequence

__all__ = ["StreamProfile", "random_queries", "random_filters", "random_aggregates"]

_TOKEN = re.compile(r"[^\W_]+")


class StreamProfile:
    """What the generators need to know of a stream: candidate keywords and numeric values."""

    def __init__(self, schema_doc: dict[str, Any], ops: Iterable[dict[str, Any]],
                 min_share: float = 0.005, max_share: float = 0.05):
        relations = {r["name"]: r for r in schema_doc["relations"]}
        fk_columns = {r["name"]: {fk["column"] for fk in r.get("foreign_keys", [])} for r in relations.values()}
        text = {name: [a for a, t in r["attributes"].items() if t == "text" and a != r["key"]
                       and a not in fk_columns[name]] for name, r in relations.items()}
        numeric = {name: [a for a, t in r["attributes"].items() if t in ("int", "float") and a != r["key"]
                          and a not in fk_columns[name]] for name, r in relations.items()}
        counts: Counter[str] = Counter()
        inserts = 0
        self.values: dict[tuple[str, str], list[float]] = {}
        for op in ops:
            if op.get("op") != "insert":
                continue
            inserts += 1
            name, values = op["relation"], op["tuple"]
            tokens: set[str] = set()
            for attr in text.get(name, ()):
                if isinstance(values.get(attr), str):
                    tokens.update(t for t in _TOKEN.findall(values[attr].casefold()) if not t.isdigit())
            counts.update(tokens)
            for attr in numeric.get(name, ()):
                value = values.get(attr)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.values.setdefault((name, attr), []).append(value)
        lo, hi = min_share * inserts, max_share * inserts
        self.keywords = sorted((t for t, c in counts.items() if lo <= c <= hi), key=lambda t: (-counts[t], t))
        if len(self.keywords) < 3:
            raise ValueError("the stream has too few mid-frequency tokens to draw keyword queries from")
        self.numeric = sorted(k for k, v in self.values.items() if len(v) >= 10)
        for key in self.numeric:
            self.values[key].sort()

    def constant(self, rng: random.Random, relation: str, attribute: str) -> Any:
        """A value of the attribute seen in the stream, at a random quantile."""
        values = self.values[(relation, attribute)]
        return values[min(len(values) - 1, int(rng.random() * len(values)))]


def _predicate(rng: random.Random, profile: StreamProfile, target: tuple[str, str] | None = None) -> dict[str, Any]:
    relation, attribute = target or rng.choice(profile.numeric)
    op = rng.choice([">=", "<=", "between"])
    if op == "between":
        a, b = sorted((profile.constant(rng, relation, attribute), profile.constant(rng, relation, attribute)))
        value: Any = [a, b]
    else:
        value = profile.constant(rng, relation, attribute)
    return {"relation": relation, "attribute": attribute, "op": op, "value": value}


def _pool(rng: random.Random, keywords: Sequence[str], size: int, word_skew: float = 0.0) -> list[list[str]]:
    weights = [1.0 / (rank + 1) ** word_skew for rank in range(len(keywords))]
    pool: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for _ in range(size * 1000):
        if len(pool) == size:
            break
        k = 3 if rng.random() < 0.2 else 2
        chosen = set(rng.sample(keywords, k)) if not word_skew else set()
        while len(chosen) < k:
            chosen.add(rng.choices(keywords, weights)[0])
        key = tuple(sorted(chosen))
        if key not in seen:
            seen.add(key)
            pool.append(list(key))
    return pool


def random_queries(profile: StreamProfile, n: int, seed: int = 0, pool: int = 24,
                   windows: Sequence[float | None] = (900.0, 1800.0, 3600.0), tmax: Sequence[int] = (3, 4, 5),
                   filters: int = 4, first_id: int = 1, skew: float = 1.0, word_skew: float = 0.0
                   ) -> list[dict[str, Any]]:
    """``n`` queries as plan entries (ids from ``first_id``), in registration order (see the module)."""
    rng = random.Random(f"queries-{seed}")
    sets = _pool(rng, profile.keywords, pool, word_skew)
    weights = [1.0 / (i + 1) ** skew for i in range(len(sets))]
    out = []
    for i in range(n):
        qid = first_id + i
        window = rng.choice(list(windows))
        if profile.numeric and i % 32 >= 32 - filters:
            out.append({"id": qid, "keywords": [], "tmax": 1, "window_seconds": window,
                        "predicates": [_predicate(rng, profile)]})
            continue
        preds = [_predicate(rng, profile)] if profile.numeric and rng.random() < 0.5 else []
        out.append({"id": qid, "keywords": list(rng.choices(sets, weights)[0]), "tmax": rng.choice(list(tmax)),
                    "window_seconds": window, "predicates": preds})
    return out


def random_filters(profile: StreamProfile, n: int, relation: str, seed: int = 0,
                   windows: Sequence[float | None] = (900.0, 1800.0, 3600.0)) -> list[dict[str, Any]]:
    """The paper's own set-up: ``n`` filter subscriptions with random predicates over one relation."""
    rng = random.Random(f"filters-{seed}")
    targets = [key for key in profile.numeric if key[0] == relation]
    if not targets:
        raise ValueError(f"{relation} has no numeric attribute to filter on")
    out = []
    for i in range(n):
        preds = [_predicate(rng, profile, rng.choice(targets)) for _ in range(rng.choice([1, 1, 2]))]
        out.append({"id": i + 1, "keywords": [], "tmax": 1, "window_seconds": rng.choice(list(windows)),
                    "predicates": preds})
    return out


def random_aggregates(profile: StreamProfile, queries: Sequence[dict[str, Any]], n: int, seed: int = 0,
                      windows: Sequence[tuple[int, int]] = ((600, 60), (1800, 300), (3600, 600), (900, 300)),
                      ) -> list[dict[str, Any]]:
    """``n`` aggregate subscriptions: avg/count of a numeric attribute, or the count of a query's results."""
    rng = random.Random(f"aggregates-{seed}")
    keyword_queries = [q["id"] for q in queries if q["keywords"]]
    out = []
    for i in range(n):
        window, step = rng.choice(list(windows))
        if keyword_queries and rng.random() < 0.3:
            out.append({"id": i + 1, "source": {"query": rng.choice(keyword_queries)}, "aggregate": "count",
                        "window": window, "step": step})
            continue
        relation, attribute = rng.choice(profile.numeric)
        aggregate = rng.choice(["avg", "avg", "count", "max"])
        out.append({"id": i + 1, "source": {"relation": relation}, "aggregate": aggregate, "attribute": attribute,
                    "window": window, "step": step,
                    "having": f">= {profile.constant(rng, relation, attribute)}" if rng.random() < 0.3 else None})
    return out
