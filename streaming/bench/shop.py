"""A reproducible E-commerce op stream for the pipeline benchmark and the Spark tests.

Schema: the demo's Customer, Product, Order (FKs to both) and Group (two FKs
to Product). Text values draw words from a small vocabulary in which
``dress`` and ``texas`` are rare, so the demo query ``{dress, texas}`` has a
steady trickle of results; foreign keys point at recent keys; a few ops
delete recent orders, and every hundredth op is a duplicate insert or a delete
of a missing key (dead letters).
"""

from __future__ import annotations

import json
import random
from typing import Any, Iterator

__all__ = ["DEMO_QUERIES", "shop_ops"]

DEMO_QUERIES: list[dict[str, Any]] = [
    {"keywords": ["dress", "texas"], "tmax": 4, "window_seconds": 600.0, "predicates": []},
    {"keywords": ["hat"], "tmax": 2, "window_seconds": 600.0,
     "predicates": [{"relation": "Product", "attribute": "price", "op": "<", "value": 30}]},
]

_NAMES = ["ann", "bo", "cy", "di", "ed", "flo", "gus", "hal", "ivy", "jo"]
_STATES = ["ohio", "utah", "maine", "iowa", "texas", "idaho", "nevada", "oregon"]
_ITEMS = ["shirt", "hat", "shoes", "scarf", "bag", "belt", "dress", "coat", "socks", "gloves"]
_NOTES = ["", "", "", "gift", "rush", "for texas cousin", "blue dress", "returns ok", "size m"]


def shop_ops(count: int, seed: int = 7, event_rate: float = 100.0, recent: int = 50) -> Iterator[str]:
    """``count`` op lines (compact JSON); event time advances ``1 / event_rate`` s per op."""
    rng = random.Random(seed)
    next_key = {"Customer": 0, "Product": 0, "Order": 0, "Group": 0}
    live_orders: list[int] = []
    dumps = json.dumps
    for i in range(count):
        ts = round(i / event_rate, 3)
        roll = rng.random()
        if i % 100 == 99:
            if rng.random() < 0.5 and next_key["Customer"]:
                op = {"op": "insert", "relation": "Customer", "ts": ts,
                      "tuple": {"cid": next_key["Customer"] - 1, "name": "dup", "state": "ohio"}}
            else:
                op = {"op": "delete", "relation": "Order", "key": -1 - i, "ts": ts}
        elif roll < 0.1 or next_key["Customer"] == 0:
            k = next_key["Customer"]
            next_key["Customer"] += 1
            op = {"op": "insert", "relation": "Customer", "ts": ts,
                  "tuple": {"cid": k, "name": rng.choice(_NAMES), "state": rng.choice(_STATES)}}
        elif roll < 0.2 or next_key["Product"] == 0:
            k = next_key["Product"]
            next_key["Product"] += 1
            op = {"op": "insert", "relation": "Product", "ts": ts,
                  "tuple": {"pid": k, "title": f"{rng.choice(_ITEMS)} {rng.choice(_ITEMS)}",
                            "price": round(rng.uniform(5, 120), 2)}}
        elif roll < 0.25:
            k = next_key["Group"]
            next_key["Group"] += 1
            hi = next_key["Product"]
            op = {"op": "insert", "relation": "Group", "ts": ts,
                  "tuple": {"gid": k, "pid": rng.randrange(max(0, hi - recent), hi),
                            "sid": rng.randrange(max(0, hi - recent), hi)}}
        elif roll < 0.3 and live_orders:
            key = live_orders.pop(rng.randrange(max(0, len(live_orders) - recent), len(live_orders)))
            op = {"op": "delete", "relation": "Order", "key": key, "ts": ts}
        else:
            k = next_key["Order"]
            next_key["Order"] += 1
            live_orders.append(k)
            if len(live_orders) > 4 * recent:
                live_orders.pop(0)
            hc, hp = next_key["Customer"], next_key["Product"]
            op = {"op": "insert", "relation": "Order", "ts": ts,
                  "tuple": {"oid": k, "cid": rng.randrange(max(0, hc - recent), hc),
                            "pid": rng.randrange(max(0, hp - recent), hp), "note": rng.choice(_NOTES)}}
        yield dumps(op, separators=(",", ":"))
