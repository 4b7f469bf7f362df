"""Workload generators: a schema plus an op stream (and a suggested query).

Each generator module exposes a ``build(...)`` returning a :class:`Workload`;
``python -m streaming workload NAME ... --out-dir DIR`` writes ``schema.json``,
``ops.ndjson`` and ``query.json`` (keywords, tmax and window to try it with).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..ops import Op, op_to_dict
from ..schema import Schema

__all__ = ["Workload", "write_workload"]


@dataclass
class Workload:
    """A schema document, a factory of its op stream (fresh iterator per call) and a suggested query."""

    schema_doc: dict[str, Any]
    ops: Callable[[], Iterator[Op]]
    query: dict[str, Any] = field(default_factory=dict)

    def schema(self) -> Schema:
        return Schema.from_dict(self.schema_doc)


def write_workload(workload: Workload, out_dir: str | Path) -> dict[str, Any]:
    """Write ``schema.json``, ``ops.ndjson`` and ``query.json``; return a summary."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "schema.json").write_text(json.dumps(workload.schema_doc, indent=1) + "\n", encoding="utf-8")
    counts: dict[str, int] = {}
    with open(out / "ops.ndjson", "w", encoding="utf-8") as fh:
        for op in workload.ops():
            fh.write(json.dumps(op_to_dict(op), separators=(",", ":")) + "\n")
            counts[op.kind] = counts.get(op.kind, 0) + 1
    (out / "query.json").write_text(json.dumps(workload.query, indent=1) + "\n", encoding="utf-8")
    return {"out_dir": str(out), "ops": counts, "query": workload.query}
