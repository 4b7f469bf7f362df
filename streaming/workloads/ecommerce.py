"""The paper's E-commerce schema (Fig. 1) with a stream of realistic shop activity.

Customer(cid, name, state), Product(pid, title, price), Order(oid, cid, pid,
note) and Group(gid, pid, sid) — a bundle: two parallel foreign keys to
Product (package and part). Customers and products arrive first and keep
arriving; orders reference recent customers and products; a fraction of
orders is cancelled (deleted) within :data:`CANCEL_WITHIN_SECONDS` of event
time, while they are still in the suggested query's window. With
``shift_every`` the distribution shifts every that many ops between two
seasons (a sale: cheap products, many Texan customers; then premium products,
many from Oregon), so selectivities change mid-stream as the ASC monitor
must notice. Deterministic for a given ``seed``.
"""

from __future__ import annotations

import random
from typing import Any, Iterator

from ..ops import Op
from . import Workload

__all__ = ["SCHEMA_DOC", "CANCEL_WITHIN_SECONDS", "build"]

CANCEL_WITHIN_SECONDS = 1800.0

SCHEMA_DOC: dict[str, Any] = {
    "name": "ecommerce",
    "relations": [
        {"name": "Customer", "key": "cid", "attributes": {"cid": "int", "name": "text", "state": "text"}},
        {"name": "Product", "key": "pid", "attributes": {"pid": "int", "title": "text", "price": "float"}},
        {"name": "Order", "key": "oid", "attributes": {"oid": "int", "cid": "int", "pid": "int", "note": "text"},
         "foreign_keys": [{"name": "cid", "column": "cid", "references": "Customer"},
                          {"name": "pid", "column": "pid", "references": "Product"}]},
        {"name": "Group", "key": "gid", "attributes": {"gid": "int", "pid": "int", "sid": "int"},
         "foreign_keys": [{"name": "pid", "column": "pid", "references": "Product"},
                          {"name": "sid", "column": "sid", "references": "Product"}]},
    ],
}

FIRST = ("Ann", "Bo", "Cy", "Dana", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo", "Kim", "Lena", "Max", "Nia",
         "Omar", "Pia", "Quinn", "Rosa", "Sam", "Tara", "Uma", "Vic", "Wen", "Yara", "Zoe")
LAST = ("Lee", "Chen", "Diaz", "Garcia", "Smith", "Patel", "Nguyen", "Kim", "Brown", "Lopez", "Khan",
        "Rossi", "Muller", "Silva", "Cohen", "Novak", "Ito", "Okafor", "Larsen", "Walsh")
STATES = ("Texas", "Ohio", "California", "New York", "Florida", "Utah", "Oregon", "Maine", "Georgia",
          "Nevada", "Arizona", "Colorado", "Illinois", "Iowa", "Kansas", "Vermont", "Washington")
ADJECTIVES = ("Summer", "Winter", "Classic", "Linen", "Silk", "Denim", "Leather", "Wool", "Cotton", "Vintage",
              "Evening", "Beach", "Travel", "Kids", "Sport")
NOUNS = ("dress", "hat", "shoes", "boots", "jacket", "scarf", "shirt", "skirt", "bag", "belt", "sandals",
         "coat", "sweater", "bundle", "gloves")
NOTES = ("", "", "", "", "gift", "gift for {state} cousin", "deliver to {state}", "rush order",
         "{noun} for a wedding", "return the {noun} if too small", "birthday {noun}")


# (price range, favoured state, its share of new customers) of the two seasons of a shifting stream.
SEASONS = (((5.0, 60.0), "Texas", 0.4), ((60.0, 200.0), "Oregon", 0.4))


def build(ops: int | None = 5000, seed: int = 0, cancel_fraction: float = 0.05, shift_every: int = 0) -> Workload:
    """``ops`` ops (None: an endless stream), one every 1-3 seconds; suggested query ``dress texas``.

    ``shift_every`` > 0 alternates the seasons of :data:`SEASONS` every that many ops
    (0: one stationary distribution, prices 5-200 and states uniform). Keys are
    never reused and timestamps only grow, so an endless stream stays consistent
    however long it runs: old tuples leave by the windows, and only orders still
    live (inserted less than :data:`CANCEL_WITHIN_SECONDS` ago) are deleted.
    """

    def stream() -> Iterator[Op]:
        rng = random.Random(f"ecommerce-{seed}")
        ts = 0.0
        n = {"Customer": 0, "Product": 0, "Order": 0, "Group": 0}
        open_orders: list[tuple[float, int]] = []  # (ts, oid) of orders that may still be cancelled
        emitted = 0
        while ops is None or emitted < ops:
            ts += rng.choice((1.0, 1.0, 2.0, 3.0))
            roll = rng.random()
            late = 0
            while late < len(open_orders) and open_orders[late][0] <= ts - CANCEL_WITHIN_SECONDS:
                late += 1
            del open_orders[:late]
            season = SEASONS[emitted // shift_every % 2] if shift_every > 0 else None
            if n["Customer"] < 5 or roll < 0.15:
                n["Customer"] += 1
                name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
                favoured = season is not None and rng.random() < season[2]
                state = season[1] if favoured else rng.choice(STATES)
                values: dict[str, Any] = {"cid": n["Customer"], "name": name, "state": state}
                yield Op("insert", "Customer", n["Customer"], values, ts)
            elif n["Product"] < 5 or roll < 0.3:
                n["Product"] += 1
                title = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
                low, high = season[0] if season is not None else (5.0, 200.0)
                values = {"pid": n["Product"], "title": title, "price": round(rng.uniform(low, high), 2)}
                yield Op("insert", "Product", n["Product"], values, ts)
            elif roll < 0.38:
                n["Group"] += 1
                recent = max(1, n["Product"] - 200)
                values = {"gid": n["Group"], "pid": rng.randint(recent, n["Product"]),
                          "sid": rng.randint(recent, n["Product"])}
                yield Op("insert", "Group", n["Group"], values, ts)
            elif open_orders and roll < 0.38 + cancel_fraction:
                _, oid = open_orders.pop(rng.randrange(len(open_orders)))
                yield Op("delete", "Order", oid, None, ts)
            else:
                n["Order"] += 1
                note = rng.choice(NOTES).format(state=rng.choice(STATES), noun=rng.choice(NOUNS))
                values = {"oid": n["Order"], "cid": rng.randint(max(1, n["Customer"] - 300), n["Customer"]),
                          "pid": rng.randint(max(1, n["Product"] - 300), n["Product"]), "note": note}
                open_orders.append((ts, n["Order"]))
                yield Op("insert", "Order", n["Order"], values, ts)
            emitted += 1

    return Workload(SCHEMA_DOC, stream, {"keywords": "dress texas", "tmax": 5, "window_seconds": 3600})
