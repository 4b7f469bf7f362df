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
* ``many`` — the way a monitoring product's users load it: 1, 10, 100,
  1,000 and 10,000 saved queries on a held-out E-commerce stream, their
  keyword sets drawn uniformly from a pool of 400 sets of the stream's own
  words (picked Zipf-like by how often the stream holds them: ~80 distinct
  sets among 100 queries, ~370 among 1,000), half with a predicate, windows
  (15, 30 or 60 minutes) and Tmax (3 to 5) mixed, one in eight a filter
  subscription; for each count the whole ``run-plan --sharing widen``
  process's CPU time against one query's (the least of ``--repeats`` runs,
  taken in rounds of every count; each round's ratio and their median too),
  split into start-up, plan, op loop and output (encoding and writing the
  changes: a cost that follows the changes written, which no sharing
  removes; the ratio is also given without it), its peak memory and its
  cost per sharing class.

Every query's output is checked: under ``match``/``widen`` against
``none`` (replayed op by op) in ``table1`` and up to 100 queries in
``many``, and above that for 20 of the queries, each run alone. Ratios are
within this run; the machine is noted. Writes ``sharing.json``,
``table1.png`` and ``many.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

from ..ops import op_to_dict
from ..workloads import Workload, ecommerce, tpch
from ..workloads.queries import StreamProfile, random_aggregates, random_filters, random_queries
from ..workloads.tpch import DAY

HELP = "sharing: per-query evaluation vs sharing and widening (Table 1 set-up; 1 to 10,000 saved queries)"

__all__ = ["HELP", "add_arguments", "main", "run_plan", "same_outputs"]

MODES = ("none", "match", "widen")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="var/bench/sharing", help="output directory for sharing.json and plots")
    parser.add_argument("--ecommerce-ops", type=int, default=20_000, help="ops of the demo stream (Table 1)")
    parser.add_argument("--tpch-orders", type=int, default=1_500, help="orders of the TPC-H stream (SF 0.01)")
    parser.add_argument("--many", default="1,10,100,1000,10000", help="query counts of the many-queries part")
    parser.add_argument("--many-ops", type=int, default=24_000, help="ops of the E-commerce stream of that part")
    parser.add_argument("--many-seed", type=int, default=7, help="its stream's seed (held out: not the tests')")
    parser.add_argument("--parts", default="table1,many", help="which parts to run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1,
                        help="many: run each count's widen process this many times and keep the least CPU time")
    parser.add_argument("--workdir", default=None,
                        help="keep each run's plan, op stream and output here (default: a temporary directory)")


def _write_ops(path: Path, ops: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for op in ops:
            fh.write(json.dumps(op, separators=(",", ":")) + "\n")


def _ops_of(workload: Workload) -> list[dict[str, Any]]:
    return [op_to_dict(op) for op in workload.ops()]


def child_env() -> dict[str, str]:
    """The ``run-plan`` processes' environment, with Python's bytecode cache on as a deployment has it. A
    machine whose environment turns it off (``PYTHONDONTWRITEBYTECODE``, as this project's VM does) has
    every process compile the sources it imports again: ~0.1 s of CPU time, 13 % of one query's
    process, that no user pays and that would flatter every ratio to one query."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_sources() -> None:
    """Write the bytecode of the engine's sources, so that no measured process compiles them."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parents[1])],
                   env=child_env(), check=True)


def run_plan(plan: dict[str, Any], ops_path: Path, mode: str, work: Path) -> dict[str, Any]:
    """One ``run-plan`` process; its stats with the wall time and the whole process's CPU time added."""
    out = work / mode
    work.mkdir(parents=True, exist_ok=True)
    plan_path = work / "plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "streaming", "run-plan", "--plan", str(plan_path), "--ops",
                           str(ops_path), "--out-dir", str(out), "--sharing", mode, "--rejects", os.devnull],
                          capture_output=True, text=True, env=child_env())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(f"run-plan --sharing {mode} failed: {proc.stderr[-2000:]}")
    stats = json.loads((out / "stats.json").read_text())
    stats["wall_s"] = round(time.perf_counter() - started, 3)
    stats["process_cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3)
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


def same_outputs(reference: Path, other: Path, queries: Iterable[int] | None = None) -> bool:
    """Whether every query and aggregate file of two run-plan outputs (or only ``queries``' files) gives
    the same results op by op."""
    names = sorted(p.name for p in reference.glob("*.ndjson"))
    if queries is not None:
        names = [f"query-{q}.ndjson" for q in sorted(queries)]
    elif names != sorted(p.name for p in other.glob("*.ndjson")):
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


def many(schema_doc: dict[str, Any], ops: list[dict[str, Any]], counts: list[int], work: Path,
         seed: int, repeats: int = 1) -> dict[str, Any]:
    """Whole-process cost of ``run-plan --sharing widen`` for ``counts`` random saved queries (the least of
    ``repeats`` runs each: the machine's other load only ever adds time). The runs go in rounds, each
    count once a round, so that a count's least run and one query's are taken over the same stretch
    of the machine's load, not one after the other."""
    ops_path = work / "many-ops.ndjson"
    _write_ops(ops_path, ops)
    profile = StreamProfile(schema_doc, ops)
    plans = {n: {"schema": schema_doc, "aggregates": [],
                 "queries": random_queries(profile, n, seed, pool=400, skew=0.0, word_skew=1.0)} for n in counts}
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    for _ in range(max(repeats, 1)):
        for n in counts:
            runs[n].append(run_plan(plans[n], ops_path, "widen", work / f"many-{n}"))
    points = []
    for n in counts:
        queries = plans[n]["queries"]
        keyword_sets = {tuple(q["keywords"]) for q in queries if q["keywords"]}
        where = work / f"many-{n}"
        widen = min(runs[n], key=lambda r: r["process_cpu_s"])
        if n <= 100:
            checked = queries
        else:  # 20 of them, each alone (the alone runs of all 1,000 would take hours)
            checked = random.Random(f"many-{seed}-{n}").sample(queries, 20)
        alone = run_plan({"schema": schema_doc, "queries": checked, "aggregates": []}, ops_path, "none",
                         where / "alone")
        same = same_outputs(where / "alone" / "none", where / "widen", [q["id"] for q in checked])
        classes = widen["classes"]
        points.append({
            "queries": n, "keyword_sets": len(keyword_sets), "classes": classes,
            "lattice_nodes": widen["network"]["lattice_nodes"],
            "process_cpu_s": widen["process_cpu_s"], "op_loop_cpu_s": widen["cpu_s"], "wall_s": widen["wall_s"],
            "plan_cpu_s": widen["plan_cpu_s"], "output_cpu_s": widen["output_cpu_s"],
            "process_cpu_s_runs": [r["process_cpu_s"] for r in runs[n]], "load_average": os.getloadavg()[0],
            "us_per_op_whole": round(widen["process_cpu_s"] / len(ops) * 1e6, 2),
            "us_per_op_loop": widen["us_per_op"], "max_rss_mb": widen["max_rss_mb"],
            "us_per_op_per_class": round(widen["process_cpu_s"] / len(ops) * 1e6 / max(classes, 1), 3),
            "changes": widen["changes"], "checked_queries": len(checked), "same_as_alone": same,
            "alone_process_cpu_s": alone["process_cpu_s"],
        })
    one = points[0] if counts and counts[0] == 1 else None
    for p in points:
        p["over_one_query"] = round(p["process_cpu_s"] / one["process_cpu_s"], 2) if one else None
        if one:
            # each round's ratio (its run against one query's of the same round): the load both met is alike,
            # so their spread shows how far the machine moves the ratio, and their median is a second reading
            rounds = [mine / first for mine, first in zip(p["process_cpu_s_runs"], one["process_cpu_s_runs"])]
            p["over_one_query_rounds"] = [round(r, 2) for r in rounds]
            p["over_one_query_round_median"] = round(statistics.median(rounds), 2)
        p["over_one_query_without_output"] = (
            round((p["process_cpu_s"] - p["output_cpu_s"]) / (one["process_cpu_s"] - one["output_cpu_s"]), 2)
            if one else None)
    return {"ops": len(ops), "repeats": max(repeats, 1), "points": points}


def _plot_table1(streams: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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



def _plot_many(points: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ns = [p["queries"] for p in points]
    ratios = [p["over_one_query"] for p in points]
    axes[0].plot(ns, ratios, marker="o", label="widen, whole process")
    if all("over_one_query_rounds" in p for p in points):
        axes[0].errorbar(ns, ratios, yerr=[[r - min(p["over_one_query_rounds"]) for r, p in zip(ratios, points)],
                                           [max(p["over_one_query_rounds"]) - r for r, p in zip(ratios, points)]],
                         fmt="none", ecolor="tab:blue", alpha=0.5, capsize=3,
                         label="each round's ratio (lowest to highest)")
    axes[0].plot(ns, [p["over_one_query_without_output"] for p in points], marker=".", linestyle="--",
                 label="without encoding and writing the changes")
    targets = [(n, t) for n, t in ((100, 3), (1000, 10)) if n in ns]
    axes[0].scatter([n for n, _ in targets], [t for _, t in targets], marker="_", s=400, color="grey",
                    label="target: 3x (100) / 10x (1,000)")
    axes[1].plot(ns, [p["max_rss_mb"] for p in points], marker="o", label="peak RSS")
    axes[1].axhline(2048, color="grey", linestyle="--", label="2 GB")
    for ax, label in ((axes[0], "CPU time / one query's"), (axes[1], "MB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("saved queries")
        ax.set_ylabel(label)
        ax.legend()
    axes[0].set_title("Cost vs number of saved queries (E-commerce)")
    axes[1].set_title("Peak memory")
    fig.tight_layout()
    fig.savefig(out / "many.png", dpi=110)
    plt.close(fig)


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    result: dict[str, Any] = {
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_at_start": os.getloadavg()},
        "note": "table1: CPU seconds of each run-plan's op loop; many: CPU seconds of the whole run-plan process "
                "(start, plan, ops, output), with the bytecode cache on; compare ratios within a run",
    }
    compile_sources()
    with tempfile.TemporaryDirectory(prefix="kwmonitor-bench-sharing-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        if "table1" in parts:
            shop = ecommerce.build(ops=args.ecommerce_ops, seed=args.seed)
            market = tpch.build(scale_factor=0.01, max_orders=args.tpch_orders)
            result["table1"] = {
                "ecommerce": table1("ecommerce", shop.schema_doc, _ops_of(shop), work, args.seed,
                                    windows=(1800.0, 3600.0, 7200.0), tmax=(3, 4, 5),
                                    aggregate_windows=((600, 60), (1800, 300), (3600, 600), (900, 300)),
                                    filter_relation="Product"),
                "tpch": table1("tpch", market.schema_doc, _ops_of(market), work, args.seed,
                               windows=(15 * DAY, 30 * DAY, 60 * DAY), tmax=(3, 4),
                               aggregate_windows=((int(30 * DAY), int(DAY)), (int(60 * DAY), int(7 * DAY)),
                                                  (int(15 * DAY), int(5 * DAY))),
                               filter_relation="lineitem"),
            }
            _plot_table1(result["table1"], out)
        if "many" in parts:
            held_out = ecommerce.build(ops=args.many_ops, seed=args.many_seed)
            counts = [int(c) for c in args.many.split(",") if c]
            result["many"] = many(held_out.schema_doc, _ops_of(held_out), counts, work, args.many_seed,
                                  args.repeats)
            _plot_many(result["many"]["points"], out)
    (out / "sharing.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for name, part in result.get("table1", {}).items():
        for kind, runs in (("mixed", part["mixed"]), ("filters", part["filters"]["strategies"])):
            print(name, kind, {m: {k: runs[m][k] for k in ("queries_sharing", "cpu_s", "us_per_op", "max_rss_mb")}
                               for m in MODES})
    for p in result.get("many", {}).get("points", []):
        print(f"{p['queries']:>6} queries ({p['keyword_sets']} keyword sets, {p['classes']} classes): "
              f"{p['process_cpu_s']} s = {p['over_one_query']} x one query "
              f"({p['over_one_query_without_output']} x without output; rounds {p.get('over_one_query_rounds')}), "
              f"{p['max_rss_mb']} MB, "
              f"{p['us_per_op_per_class']} us/op per class, same as alone: {p['same_as_alone']}")
    return 0
