"""``python -m streaming bench sharing`` — many saved queries over one stream: each alone vs sharing.

Two parts, in one run, every strategy a separate ``python -m streaming
run-plan`` process (so its peak memory is its own):

* ``table1`` — the paper's Table 1 set-up on our streams (the demo's
  E-commerce stream and a TPC-H stream): 32 random queries
  (:mod:`streaming.workloads.queries`: overlapping keyword sets, random
  predicates on numeric attributes, windows and Tmax from small sets, four
  filter subscriptions) and a few aggregate subscriptions, registered one
  after another, under ``none`` (each alone: "data shipping"), ``match``
  (sharing without widening) and ``widen``; plus the paper's own set-up, 32
  filter subscriptions with random predicates over one relation;
* ``scaling`` — 1, 10, 100 and 1,000 random queries on the demo stream, µs
  per op and memory for ``none`` and ``widen``.

For every run, every query's output is checked to equal its output under
``none`` (replayed op by op). Ratios are within this run; the machine is
noted. Writes ``sharing.json``, ``table1.png`` and ``scaling.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..ops import op_to_dict
from ..workloads import Workload, ecommerce, tpch
from ..workloads.queries import StreamProfile, random_aggregates, random_filters, random_queries
from ..workloads.tpch import DAY

HELP = "sharing: per-query evaluation vs sharing and widening (Table 1 set-up, scaling to 1,000 queries)"

__all__ = ["HELP", "add_arguments", "main", "run_plan", "same_outputs"]

MODES = ("none", "match", "widen")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="var/bench/sharing", help="output directory for sharing.json and plots")
    parser.add_argument("--ecommerce-ops", type=int, default=20_000, help="ops of the demo stream (Table 1)")
    parser.add_argument("--tpch-orders", type=int, default=1_500, help="orders of the TPC-H stream (SF 0.01)")
    parser.add_argument("--scaling", default="1,10,100,1000", help="query counts of the scaling part")
    parser.add_argument("--scaling-ops", type=int, default=10_000, help="ops of the demo stream for scaling")
    parser.add_argument("--seed", type=int, default=1)


def _write_ops(path: Path, ops: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for op in ops:
            fh.write(json.dumps(op, separators=(",", ":")) + "\n")


def _ops_of(workload: Workload) -> list[dict[str, Any]]:
    return [op_to_dict(op) for op in workload.ops()]


def run_plan(plan: dict[str, Any], ops_path: Path, mode: str, work: Path) -> dict[str, Any]:
    """One ``run-plan`` process; its stats with the wall time added."""
    out = work / mode
    work.mkdir(parents=True, exist_ok=True)
    plan_path = work / "plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "streaming", "run-plan", "--plan", str(plan_path), "--ops",
                           str(ops_path), "--out-dir", str(out), "--sharing", mode, "--rejects", os.devnull],
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"run-plan --sharing {mode} failed: {proc.stderr[-2000:]}")
    stats = json.loads((out / "stats.json").read_text())
    stats["wall_s"] = round(time.perf_counter() - started, 3)
    return stats


def _replayed(path: Path) -> list[tuple[int, frozenset]]:
    """A query's events as (seq, live set after that seq) at every seq with a change."""
    live: set[str] = set()
    out: list[tuple[int, frozenset]] = []
    current = None
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            event = json.loads(line)
            if current is not None and event["seq"] != current:
                out.append((current, frozenset(live)))
            current = event["seq"]
            key = json.dumps([event["tuples"], event["edges"]])
            if event["type"] == "add":
                live.add(key)
            else:
                live.discard(key)
    if current is not None:
        out.append((current, frozenset(live)))
    return [(seq, s) for i, (seq, s) in enumerate(out) if i == 0 or s != out[i - 1][1]]


def same_outputs(reference: Path, other: Path) -> bool:
    """Whether every query and aggregate file of two run-plan outputs gives the same results op by op."""
    names = sorted(p.name for p in reference.glob("*.ndjson"))
    if names != sorted(p.name for p in other.glob("*.ndjson")):
        return False
    for name in names:
        if name.startswith("aggregate-"):
            if (reference / name).read_text() != (other / name).read_text():
                return False
        elif _replayed(reference / name) != _replayed(other / name):
            return False
    return True


def _strategies(plan: dict[str, Any], ops_path: Path, work: Path, modes: tuple[str, ...] = MODES
                ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in modes:
        stats = run_plan(plan, ops_path, mode, work)
        stats.pop("class_details", None)
        out[mode] = stats
    for mode in modes[1:]:
        out[mode]["same_results_as_none"] = same_outputs(work / modes[0], work / mode)
    base = out[modes[0]]
    for mode in modes:
        out[mode]["cpu_percent_of_none"] = round(100 * out[mode]["cpu_s"] / base["cpu_s"], 1) if base["cpu_s"] else None
    return out


def table1(name: str, schema_doc: dict[str, Any], ops: list[dict[str, Any]], work: Path, seed: int,
           windows: tuple, tmax: tuple, aggregate_windows: tuple, filter_relation: str) -> dict[str, Any]:
    ops_path = work / f"{name}-ops.ndjson"
    _write_ops(ops_path, ops)
    profile = StreamProfile(schema_doc, ops)
    queries = random_queries(profile, 32, seed, windows=windows, tmax=tmax)
    aggregates = random_aggregates(profile, queries, 4, seed, windows=aggregate_windows)
    mixed = _strategies({"schema": schema_doc, "queries": queries, "aggregates": aggregates}, ops_path,
                        work / f"{name}-mixed")
    filters = random_filters(profile, 32, filter_relation, seed, windows=windows)
    only_filters = _strategies({"schema": schema_doc, "queries": filters, "aggregates": []}, ops_path,
                               work / f"{name}-filters")
    return {"ops": len(ops), "keyword_candidates": len(profile.keywords),
            "distinct_keyword_sets": len({tuple(q["keywords"]) for q in queries}),
            "queries": queries, "aggregates": aggregates, "mixed": mixed,
            "filters": {"relation": filter_relation, "strategies": only_filters}}


def scaling(schema_doc: dict[str, Any], ops: list[dict[str, Any]], counts: list[int], work: Path,
            seed: int, windows: tuple) -> dict[str, Any]:
    ops_path = work / "scaling-ops.ndjson"
    _write_ops(ops_path, ops)
    profile = StreamProfile(schema_doc, ops)
    points = []
    for n in counts:
        queries = random_queries(profile, n, seed, windows=windows)
        point: dict[str, Any] = {"queries": n, "distinct_keyword_sets": len({tuple(q["keywords"]) for q in queries})}
        point.update(_strategies({"schema": schema_doc, "queries": queries, "aggregates": []}, ops_path,
                                 work / f"scaling-{n}", modes=("none", "widen")))
        points.append(point)
    one = points[0]["widen"]["us_per_op"] if counts[0] == 1 else None
    for p in points:
        alone = p["none"]["us_per_op"] / p["queries"]
        p["mean_query_alone_us_per_op"] = round(alone, 3)
        p["widen_over_mean_query_alone"] = round(p["widen"]["us_per_op"] / alone, 2)
        if one:
            p["widen_over_one_query"] = round(p["widen"]["us_per_op"] / one, 2)
    return {"ops": len(ops), "points": points}


def _plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    streams = result["table1"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.25
    for i, mode in enumerate(MODES):
        xs = [j + (i - 1) * width for j in range(len(streams) * 2)]
        cpu = []
        labels = []
        for name, part in streams.items():
            for kind, runs in (("32 queries", part["mixed"]), ("32 filters", part["filters"]["strategies"])):
                cpu.append(runs[mode]["cpu_s"])
                labels.append(f"{name}\n{kind}")
        axes[0].bar(xs, cpu, width, label=mode)
        axes[0].set_xticks(range(len(labels)), labels, fontsize=8)
    axes[0].set_ylabel("CPU seconds")
    axes[0].set_title("Table 1 set-up: CPU per strategy")
    axes[0].legend()
    for i, mode in enumerate(MODES):
        shared = []
        for name, part in streams.items():
            for runs in (part["mixed"], part["filters"]["strategies"]):
                shared.append(runs[mode]["queries_sharing"])
        axes[1].bar([j + (i - 1) * width for j in range(len(shared))], shared, width, label=mode)
    axes[1].set_xticks(range(len(labels)), labels, fontsize=8)
    axes[1].set_ylabel("queries sharing (of 32)")
    axes[1].set_title("Queries riding on another's class")
    fig.tight_layout()
    fig.savefig(out / "table1.png", dpi=110)
    plt.close(fig)

    points = result["scaling"]["points"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ns = [p["queries"] for p in points]
    for mode in ("none", "widen"):
        axes[0].plot(ns, [p[mode]["us_per_op"] for p in points], marker="o", label=mode)
        axes[1].plot(ns, [p[mode]["max_rss_mb"] for p in points], marker="o", label=mode)
    one = points[0]["widen"]["us_per_op"]
    targets = [(n, one * (4 if n <= 100 else 20)) for n in ns if n in (100, 1000)]
    if targets:
        axes[0].scatter([n for n, _ in targets], [t for _, t in targets], marker="_", s=400, color="grey",
                        label="target: 4x (100) / 20x (1,000) one query")
    for ax, label in ((axes[0], "µs per op"), (axes[1], "peak RSS (MB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("saved queries")
        ax.set_ylabel(label)
        ax.legend()
    axes[0].set_title("Cost per op vs number of queries (demo stream)")
    axes[1].set_title("Memory vs number of queries")
    fig.tight_layout()
    fig.savefig(out / "scaling.png", dpi=110)
    plt.close(fig)


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts = [int(c) for c in args.scaling.split(",") if c]
    with tempfile.TemporaryDirectory(prefix="kwmonitor-bench-sharing-") as tmp:
        work = Path(tmp)
        shop = ecommerce.build(ops=args.ecommerce_ops, seed=args.seed)
        shop_ops = _ops_of(shop)
        market = tpch.build(scale_factor=0.01, max_orders=args.tpch_orders)
        result: dict[str, Any] = {
            "machine": {"platform": platform.platform(), "python": platform.python_version(),
                        "cpus": os.cpu_count()},
            "note": "CPU seconds of each run-plan process (time.process_time over its op loop); compare ratios",
            "table1": {
                # windows no narrower than the 30 minutes within which the demo stream cancels orders:
                # a cancel of an order that already left a narrower window is the one-verdict
                # exception (docs/sharing.md), which moves that query's expiries one op earlier
                "ecommerce": table1("ecommerce", shop.schema_doc, shop_ops, work, args.seed,
                                    windows=(1800.0, 3600.0, 7200.0), tmax=(3, 4, 5),
                                    aggregate_windows=((600, 60), (1800, 300), (3600, 600), (900, 300)),
                                    filter_relation="Product"),
                "tpch": table1("tpch", market.schema_doc, _ops_of(market), work, args.seed,
                               windows=(15 * DAY, 30 * DAY, 60 * DAY), tmax=(3, 4),
                               aggregate_windows=((int(30 * DAY), int(DAY)), (int(60 * DAY), int(7 * DAY)),
                                                  (int(15 * DAY), int(5 * DAY))),
                               filter_relation="lineitem"),
            },
            "scaling": scaling(shop.schema_doc, shop_ops[:args.scaling_ops], counts, work, args.seed,
                               windows=(1800.0, 3600.0, 7200.0)),
        }
    (out / "sharing.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    _plot(result, out)
    print(json.dumps({name: {kind: {m: {k: runs[m][k] for k in ("queries_sharing", "cpu_s", "us_per_op",
                                                                  "max_rss_mb", "store_tuples_peak")}
                                    for m in MODES}
                             for kind, runs in (("mixed", part["mixed"]), ("filters", part["filters"]["strategies"]))}
                      for name, part in result["table1"].items()}, indent=1))
    for p in result["scaling"]["points"]:
        print(f"{p['queries']:>5} queries ({p['distinct_keyword_sets']} keyword sets): none {p['none']['us_per_op']} "
              f"us/op {p['none']['max_rss_mb']} MB, widen {p['widen']['us_per_op']} us/op {p['widen']['max_rss_mb']} MB"
              f" = {p.get('widen_over_one_query')} x one query, {p['widen_over_mean_query_alone']} x mean query alone")
    return 0
