"""One Pathway dataflow for a join plan, over a changelog; run in Pathway's own virtualenv.

    var/bench/pathway-venv/bin/python benchmarks/pathway_dataflow.py --plan JOIN.json \\
        --changelog CHANGELOG.ndjson --window-mode expiries --out-dir DIR

Reads the join plan of :mod:`benchmarks.pathway_plan` and the changelog of
:mod:`benchmarks.pathway_changelog`, builds the dataflow and runs it:

* the changelog is one input table (every relation's columns, ``rel``,
  ``ts``, the ``window`` tag), each row at its op's time with its diff;
* a tuple's keyword set is computed in the dataflow (a UDF with kwmonitor's
  tokenizer, ``streaming.keywords.tokens``) as a mask over the vocabulary;
* each window is the rows of its tag (``--window-mode expiries``) or
  ``Table.forget`` on that table (``forget``: tuples leave when the largest
  ``ts`` seen reaches ``ts + W``), then one filter per relation;
* each sub-relation is a filter (mask, then the predicates), each join node
  ``pw.Table.join``s on the edge's foreign key, then filters out a tuple bound
  twice (``distinct``);
* each query's CNs are concatenated and written by ``pw.io.jsonlines.write``
  to ``DIR/query-<id>.jsonl`` (``{"cn", "bound", "time", "diff"}``).

Writes ``DIR/timing.json``: seconds to read the changelog, to build the
dataflow, of ``pw.run``, and the process's CPU seconds for each. Only Pathway
and the standard library are needed (and ``streaming.keywords``, which is
pure Python).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import typing
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
PW_TYPES: dict[str, type] = {"int": int, "float": float, "text": str, "bool": bool, "timestamp": float}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plan", type=Path, required=True, help="join plan JSON (benchmarks/pathway_plan.py)")
    parser.add_argument("--changelog", type=Path, required=True, help="changelog NDJSON (pathway_changelog.py)")
    parser.add_argument("--window-mode", choices=("expiries", "forget"), required=True,
                        help="the changelog's: windows as tagged expiries, or Pathway's forget")
    parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import pathway as pw
    import pandas as pd

    from streaming.keywords import tokens

    plan = json.loads(args.plan.read_text(encoding="utf-8"))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    clock = _Clock()
    columns = _union_columns(plan["relations"])
    frame = _read_changelog(args.changelog, columns, pd)
    clock.lap("read")
    builder = _Dataflow(pw, plan, columns, tokens, args.window_mode)
    builder.write_outputs(builder.input_table(frame), args.out_dir)
    clock.lap("build")
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    clock.lap("run")
    timing = {**clock.laps, "rows": len(frame)}
    (args.out_dir / "timing.json").write_text(json.dumps(timing, indent=1) + "\n", encoding="utf-8")
    return 0


class _Clock:
    """Wall and CPU seconds of consecutive phases."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def lap(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.laps[f"{name}_s"] = wall - self._wall
        self.laps[f"{name}_cpu_s"] = cpu - self._cpu
        self._wall, self._cpu = wall, cpu


def _union_columns(relations: dict[str, Any]) -> dict[tuple[str, str], str]:
    """The input table's column of each ``(relation, attribute)``."""
    out = {}
    for relation, doc in relations.items():
        for attribute in doc["attributes"]:
            out[(relation, attribute)] = f"c{len(out)}"
    return out


def _read_changelog(path: Path, columns: dict[tuple[str, str], str], pd: Any) -> Any:
    """The changelog as a DataFrame with Pathway's ``__time__`` and ``__diff__`` (values as Python objects)."""
    data: dict[str, list[Any]] = {name: [] for name in ("__time__", "__diff__", "rel", "key", "serial", "window",
                                                         "ts")}
    data.update({column: [] for column in columns.values()})
    value_columns = list(columns.items())
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            relation, values = row["relation"] or "", row["values"] or {}
            data["__time__"].append(row["time"])
            data["__diff__"].append(row["diff"])
            data["rel"].append(relation)
            data["key"].append(json.dumps(row["key"]))
            data["serial"].append(row["serial"])
            data["window"].append(row["window"])
            data["ts"].append(row["ts"])
            for (rel, attribute), column in value_columns:
                data[column].append(values.get(attribute) if rel == relation else None)
    frame = {name: pd.Series(values, dtype="int64" if name in ("__time__", "__diff__", "serial", "window") else object)
             for name, values in data.items()}
    frame["ts"] = frame["ts"].astype("float64")
    return pd.DataFrame(frame)


class _Dataflow:
    """Builds the plan's tables, memoised: one per window, relation, sub-relation and node."""

    def __init__(self, pw: Any, plan: dict[str, Any], columns: dict[tuple[str, str], str],
                 tokens: Callable[[str], list[str]], window_mode: str):
        self.pw = pw
        self.window_mode = window_mode
        self.plan = plan
        self.columns = columns
        self.tokens = tokens
        self._windowed: dict[float | None, Any] = {}
        self._relations: dict[tuple[float | None, str], Any] = {}
        self._subs: dict[int, Any] = {}
        self._nodes: dict[int, Any] = {}

    def input_table(self, frame: Any) -> Any:
        """The changelog table with each tuple's vocabulary mask."""
        pw = self.pw
        schema_columns: dict[str, Any] = {
            "rel": pw.column_definition(dtype=str, primary_key=True),
            "key": pw.column_definition(dtype=str, primary_key=True),
            "serial": pw.column_definition(dtype=int, primary_key=True),
            "window": pw.column_definition(dtype=int, primary_key=True),
            "ts": pw.column_definition(dtype=float),
        }
        for (relation, attribute), column in self.columns.items():
            typ = PW_TYPES[self.plan["relations"][relation]["attributes"][attribute]]
            schema_columns[column] = pw.column_definition(dtype=typ | None)
        schema = pw.schema_builder(schema_columns, name="Changelog")
        table = pw.debug.table_from_pandas(frame, schema=schema)
        searchable = [(relation, [self.columns[(relation, a)] for a in doc["searchable"]])
                      for relation, doc in self.plan["relations"].items()]
        text_columns = [c for _, cols in searchable for c in cols]
        classify = _classifier(self.plan["vocabulary"], searchable, text_columns, self.tokens)
        return table.with_columns(vmask=pw.apply_with_type(classify, int, pw.this.rel,
                                                           *[pw.this[c] for c in text_columns]))

    def write_outputs(self, changes: Any, out_dir: Path) -> None:
        """One jsonlines output per query: ``cn`` (index in the query's CNs) and the keys it ``bound``."""
        pw = self.pw
        self._changes = changes
        for query in self.plan["queries"]:
            parts = []
            for i, cn in enumerate(query["cns"]):
                node = self.node(cn["node"])
                size = self.plan["nodes"][cn["node"]]["size"]
                parts.append(node.select(cn=i, bound=pw.declare_type(typing.Any, pw.make_tuple(*[pw.this[f"k{p}"] for p in range(size)]))))
            results = parts[0] if len(parts) == 1 else pw.Table.concat_reindex(*parts)
            pw.io.jsonlines.write(results, str(out_dir / f"query-{query['id']}.jsonl"))

    def windowed(self, window: float | None) -> Any:
        """The tuples live in ``window``: the rows of its tag, or (``forget``) every row, forgotten after it."""
        if window not in self._windowed:
            pw, changes = self.pw, self._changes
            if self.window_mode == "expiries":
                tag = self.plan["windows"].index(window)
                self._windowed[window] = changes.filter(pw.this.window == tag)
            else:
                self._windowed[window] = changes if window is None else changes.forget(pw.this.ts, float(window))
        return self._windowed[window]

    def relation(self, window: float | None, relation: str) -> Any:
        """The live tuples of ``relation`` in ``window``: ``k0`` (key), ``f_<column>`` per FK, attributes, mask."""
        if (window, relation) not in self._relations:
            pw, doc = self.pw, self.plan["relations"][relation]
            attributes = {a: pw.this[self.columns[(relation, a)]] for a in doc["attributes"]}
            fks = {f"f_{c}": pw.this[self.columns[(relation, c)]] for c in doc["fk_columns"]}
            self._relations[(window, relation)] = self.windowed(window).filter(pw.this.rel == relation).select(
                k0=pw.unwrap(attributes[doc["key"]]), vmask=pw.this.vmask, **fks,
                **{f"a_{a}": column for a, column in attributes.items()})
        return self._relations[(window, relation)]

    def sub(self, i: int) -> Any:
        """Sub-relation ``i``: its relation's live tuples with exactly its keywords that its predicates admit."""
        if i not in self._subs:
            pw, doc = self.pw, self.plan["subrelations"][i]
            table = self.relation(doc["window"], doc["relation"])
            table = table.filter((pw.this.vmask & doc["bits"]) == doc["mask"])
            for predicate in doc["predicates"]:
                table = _apply_predicate(pw, table, predicate)
            fks = self.plan["relations"][doc["relation"]]["fk_columns"]
            self._subs[i] = table.select(pw.this.k0, *[pw.this[f"f_{c}"] for c in fks])
        return self._subs[i]

    def node(self, i: int) -> Any:
        """Join node ``i``: its sub-relation joined with each child; columns ``k<position>`` and ``f_<column>``."""
        if i not in self._nodes:
            pw, doc = self.pw, self.plan["nodes"][i]
            table = self.sub(doc["sub"])
            offset = 1
            for child in doc["children"]:
                right = self.node(child["node"])
                if right is table:
                    right = right.copy()
                column = f"f_{child['column']}"
                on = (table[column] == right.k0) if child["parent_holds"] else (table.k0 == right[column])
                size = self.plan["nodes"][child["node"]]["size"]
                table = table.join(right, on).select(
                    *pw.left, **{f"k{offset + p}": right[f"k{p}"] for p in range(size)})
                offset += size
            for a, b in doc["distinct"]:
                table = table.filter(pw.this[f"k{a}"] != pw.this[f"k{b}"])
            self._nodes[i] = table
        return self._nodes[i]


def _classifier(vocabulary: list[str], searchable: list[tuple[str, list[str]]], text_columns: list[str],
                tokens: Callable[[str], list[str]]) -> Callable[..., int]:
    """``(rel, *texts) -> mask``: the vocabulary keywords among the tokens of the relation's searchable texts."""
    bit = {word: 1 << i for i, word in enumerate(vocabulary)}
    at = {name: i for i, name in enumerate(text_columns)}
    positions = {relation: [at[c] for c in cols] for relation, cols in searchable}

    def classify(relation: str, *texts: str | None) -> int:
        mask = 0
        for i in positions.get(relation, ()):
            text = texts[i]
            if text is not None:
                for token in tokens(text):
                    mask |= bit.get(token, 0)
        return mask

    return classify


def _apply_predicate(pw: Any, table: Any, predicate: dict[str, Any]) -> Any:
    """Keep the rows whose attribute satisfies ``predicate`` (a null value satisfies none)."""
    column = pw.this[f"a_{predicate['attribute']}"]
    table = table.filter(column.is_not_none())
    value = pw.unwrap(pw.this[f"a_{predicate['attribute']}"])
    op, constant = predicate["op"], predicate["value"]
    if op == "between":
        return table.filter((value >= constant[0]) & (value <= constant[1]))
    compare = {"=": value == constant, "!=": value != constant, "<": value < constant, "<=": value <= constant,
               ">": value > constant, ">=": value >= constant}
    return table.filter(compare[op])


if __name__ == "__main__":
    sys.exit(main())
