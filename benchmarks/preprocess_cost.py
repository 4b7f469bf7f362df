"""Per-op cost of the stream pre-processor against the raw parse (docs/scaling.md, "Measured per op").

On 20,000 ecommerce ops and 8 or 32 random queries it prints one JSON line per query count: raw and derived
bytes per op, the fraction of ops kept, and process CPU per op of the raw parse and keyword classification,
of deriving the records and of reading them back. A last line compares the two places the derived stream
could go, on the 8-query records in batches of 2,000 (two seconds at 1,000 ops/s): a landing directory of
atomic files (what the pre-processor writes) and a Redis stream (what the ``redis`` source reads), by the
bytes each record takes where it is kept and the wall time per record to append and to read it all back::

    .venv/bin/python benchmarks/preprocess_cost.py [--redis-url redis://127.0.0.1:6379/0]

The Redis comparison writes one key of its own (``kwbench:derived-transport:<pid>``) and deletes it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streaming import bus  # noqa: E402
from streaming.parsed import parse_stored_line  # noqa: E402
from streaming.ops import op_to_dict  # noqa: E402
from streaming.preprocess import Preprocessor, StreamNeeds, derived_ops  # noqa: E402
from streaming.sharing.properties import QueryEntry, query_properties  # noqa: E402
from streaming.sources import landing_file_name, read_landing, stamp, write_atomic  # noqa: E402
from streaming.workloads import ecommerce  # noqa: E402
from streaming.workloads.queries import StreamProfile, random_queries  # noqa: E402


def per_op_us(seconds: float, ops: int) -> float:
    return round(seconds / ops * 1e6, 1)


def transport(records: list[str], redis_url: str, batch: int = 2000) -> dict:
    """Bytes kept per record and wall µs per record to append and to read back: files against a Redis stream."""
    batches = [records[i:i + batch] for i in range(0, len(records), batch)]
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        started = time.perf_counter()
        for i, part in enumerate(batches):
            write_atomic(directory / landing_file_name(i * batch), "".join(f"{r}\n" for r in part).encode())
        file_write = time.perf_counter() - started
        file_bytes = sum(p.stat().st_size for p in directory.iterdir())
        started = time.perf_counter()
        read = sum(1 for _ in read_landing(directory))
        file_read = time.perf_counter() - started
    assert read == len(records)
    client = bus.connect(redis_url)
    key = f"kwbench:derived-transport:{os.getpid()}"
    try:
        started = time.perf_counter()
        for part in batches:
            with client.pipeline(transaction=True) as pipe:
                for record in part:
                    pipe.xadd(key, {"line": record})
                pipe.execute()
        redis_write = time.perf_counter() - started
        redis_bytes = client.memory_usage(key, samples=0)
        started = time.perf_counter()
        read, after = 0, "-"
        while entries := client.xrange(key, min=after, count=10_000):
            read += len(entries)
            after = f"({entries[-1][0]}"
        redis_read = time.perf_counter() - started
    finally:
        client.delete(key)
        client.close()
    assert read == len(records)
    return {
        "transport": f"{len(records)} derived records, batches of {batch}",
        "file_bytes_per_record": round(file_bytes / len(records), 1),
        "redis_bytes_per_record": round(redis_bytes / len(records), 1),
        "file_append_us": per_op_us(file_write, len(records)),
        "redis_append_us": per_op_us(redis_write, len(records)),
        "file_read_us": per_op_us(file_read, len(records)),
        "redis_read_us": per_op_us(redis_read, len(records)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    workload = ecommerce.build(ops=20_000, seed=1)
    schema = workload.schema()
    ops = [op if isinstance(op, dict) else op_to_dict(op) for op in workload.ops()]
    lines = [stamp(i, json.dumps(op, separators=(",", ":"))) for i, op in enumerate(ops)]
    profile = StreamProfile(workload.schema_doc, ops)
    derived = {}
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
        derived[n] = records
    print(json.dumps(transport(derived[8], args.redis_url)))


if __name__ == "__main__":
    main()
