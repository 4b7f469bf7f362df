"""Per-op cost of the stream pre-processor against the raw parse (docs/scaling.md, "Measured per op").

On 20,000 ecommerce ops and 8 or 32 random queries it prints one JSON line per query count: raw and derived
bytes per op, the fraction of ops kept, and process CPU per op of the raw parse and keyword classification,
of deriving the records and of reading them back::

    .venv/bin/python benchmarks/preprocess_cost.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streaming.evaluator import parse_stored_line  # noqa: E402
from streaming.ops import op_to_dict  # noqa: E402
from streaming.preprocess import Preprocessor, StreamNeeds, derived_ops  # noqa: E402
from streaming.sharing.properties import QueryEntry, query_properties  # noqa: E402
from streaming.sources import stamp  # noqa: E402
from streaming.workloads import ecommerce  # noqa: E402
from streaming.workloads.queries import StreamProfile, random_queries  # noqa: E402


def per_op_us(seconds: float, ops: int) -> float:
    return round(seconds / ops * 1e6, 1)


def main() -> None:
    workload = ecommerce.build(ops=20_000, seed=1)
    schema = workload.schema()
    ops = [op if isinstance(op, dict) else op_to_dict(op) for op in workload.ops()]
    lines = [stamp(i, json.dumps(op, separators=(",", ":"))) for i, op in enumerate(ops)]
    profile = StreamProfile(workload.schema_doc, ops)
    for n in (8, 32):
        props = [query_properties(QueryEntry.model_validate(q), schema) for q in random_queries(profile, n, seed=1)]
        needs = StreamNeeds.merge(1, props)
        words = frozenset(needs.vocabulary)
        started = time.process_time()
        for line in lines:
            parse_stored_line(line, schema, words)
        parse = time.process_time() - started
        pre = Preprocessor(schema, needs)
        started = time.process_time()
        records = [pre.derive(line) for line in lines]
        derive = time.process_time() - started
        started = time.process_time()
        rows = derived_ops(records, {1: needs.vocabulary}, schema)
        read = time.process_time() - started
        kept = sum(1 for r in rows if r.op is not None and r.op.kind in ("insert", "delete"))
        print(json.dumps({
            "queries": n, "ops": len(lines),
            "raw_bytes_per_op": round(sum(len(line) + 1 for line in lines) / len(lines), 1),
            "derived_bytes_per_op": round(sum(len(r) + 1 for r in records) / len(records), 1),
            "kept_fraction": round(kept / len(rows), 3),
            "raw_parse_us_per_op": per_op_us(parse, len(lines)),
            "derive_us_per_op": per_op_us(derive, len(lines)),
            "derived_read_us_per_op": per_op_us(read, len(lines)),
        }))


if __name__ == "__main__":
    main()
