"""``python -m streaming bench eval`` — CN evaluation: CNEvalDynamic vs the operator mesh, static-dynamic.

On the paper's synthetic workload (Sect. 7.1, Table 3; defaults |V| = 15,
W = 20 min, KWF = 0.01, sel = 1000, m = 3, Tmax = 4):

* ``headline``: ``--minutes`` of stream through ``dynamic`` and ``mesh``: CPU
  seconds (``time.process_time``, fastest of ``--repeat`` interleaved runs), µs per operation (inserts plus window
  expiries, the paper's count) and per insert, the cost of the shared part
  (store, window, keyword mask: an engine whose evaluator does nothing), the
  evaluators' own cost (total minus shared) and their ratio, peak traced
  memory (``tracemalloc``, a separate run) and peak intermediate tuples;
* ``fig14``: CPU time of both evaluators varying W, KWF, |V|, sel, m and Tmax;
* ``fig15``: the DBLP-shaped stream (paper Sect. 7.2, Table 4: m = 3 keywords
  analysis design system, W = 50 % of the papers, Tmax = 7) varying Tmax and W;
* ``fig17``: no window, m = 4, Tmax = 5: CNEvalStatic on the first x % of the
  stream then CNEvalDynamic, vs CNEvalDynamic on all of it.

Every point checks that the evaluators agree (same changes, same final
results). Writes ``eval.json``, ``fig14.png``, ``fig15.png`` and ``fig17.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
import tracemalloc
from pathlib import Path
from typing import Any

from ..engine import KeywordEngine
from ..lattice import Lattice
from ..ops import Op
from ..workloads import dblp, synthetic

HELP = "evaluation: CNEvalDynamic vs the operator mesh, static-dynamic"

__all__ = ["HELP", "add_arguments", "main", "run_stream"]

DEFAULTS = {"relations": 15, "window_minutes": 20, "kwf": 0.01, "sel": 1000, "m": 3, "tmax": 4}
RANGES = {
    "window_minutes": [5, 10, 20, 40, 80],
    "kwf": [0.003, 0.007, 0.01, 0.013, 0.016],
    "relations": [5, 10, 15, 20, 25],
    "sel": [500, 750, 1000, 1250, 1500],
    "m": [2, 3, 4, 5],
    "tmax": [2, 3, 4, 5, 6],
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="var/bench/eval", help="output directory for eval.json and the plots")
    parser.add_argument("--minutes", type=float, default=60, help="stream length of the headline and Fig. 14 runs")
    parser.add_argument("--fig17-minutes", type=float, default=None, help="stream length of Fig. 17 (default: --minutes)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="headline runs per engine (the fastest is kept)")
    parser.add_argument("--quick", action="store_true", help="10-minute streams, three points per curve")
    parser.add_argument("--series", nargs="*", default=list(RANGES), choices=list(RANGES),
                        help="Fig. 14 series to run (default: all)")
    parser.add_argument("--papers", type=int, default=10000, help="papers of the DBLP-shaped stream (Fig. 15)")
    parser.add_argument("--skip", nargs="*", default=[], choices=("fig14", "fig15", "fig17", "memory"))


class _StoreOnly:
    """An evaluator that evaluates nothing: measures the shared store/window/mask cost."""

    def insert(self, relation: str, key: Any, row: Any) -> list:
        return []

    def delete(self, relation: str, key: Any, row: Any) -> list:
        return []

    def snapshot(self) -> list:
        return []

    def stats(self) -> dict[str, Any]:
        return {}


def _workload(params: dict[str, Any], minutes: float, seed: int) -> tuple[Any, list[Op], dict[str, Any]]:
    work = synthetic.build(relations=params["relations"], seconds=int(minutes * 60), kwf=params["kwf"],
                           sel=params["sel"], seed=seed, m=params["m"], tmax=params["tmax"])
    return work.schema(), list(work.ops()), work.query


def run_stream(schema: Any, lattice: Any, keywords: str, tmax: int, window: float | None, ops: list[Op],
               engine: str, prefix: int = 0, memory: bool = False) -> dict[str, Any]:
    """Feed ``ops`` to one engine (the first ``prefix`` through ``load``); CPU seconds and counts."""
    eng = KeywordEngine(schema, keywords, tmax, window, "dynamic" if engine == "store-only" else engine,
                        lattice=lattice)
    if engine == "store-only":
        eng.evaluator = _StoreOnly()
    if memory:
        tracemalloc.start()
    changes = 0
    peak_inner = 0
    start_wall, start = time.perf_counter(), time.process_time()
    load_cpu = 0.0
    if prefix:
        eng.load(ops[:prefix])
        load_cpu = time.process_time() - start
    apply = eng.apply
    for i in range(prefix, len(ops)):
        changes += len(apply(ops[i]))
        if not i % 5000:
            peak_inner = max(peak_inner, _inner(eng))
    cpu, wall = time.process_time() - start, time.perf_counter() - start_wall
    out: dict[str, Any] = {}
    if memory:
        out["peak_traced_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 2)
        tracemalloc.stop()
    out["peak_intermediate_tuples"] = max(peak_inner, _inner(eng))
    live = sum(eng.store.counts().values())
    inserts = sum(1 for op in ops if op.kind == "insert")
    operations = len(ops) + (inserts - live - sum(1 for op in ops if op.kind == "delete"))
    out.update({
        "engine": engine, "cpu_s": round(cpu, 4), "wall_s": round(wall, 4), "stream_ops": len(ops),
        "operations": operations, "us_per_operation": round(cpu / operations * 1e6, 3),
        "us_per_stream_op": round(cpu / len(ops) * 1e6, 3), "changes": changes,
        "live_results": len(eng.snapshot()), "final_results": [(r.tuples, r.edges) for r in eng.snapshot()],
    })
    if prefix:
        out["static_load_cpu_s"] = round(load_cpu, 4)
    return out


def _inner(eng: KeywordEngine) -> int:
    stats = eng.evaluator.stats()
    return stats.get("subrelation_tuples", stats.get("intermediate_tuples", 0))


def _compare(points: list[dict[str, Any]], reference: dict[str, Any]) -> bool:
    """All evaluators found the same final results (and, when streaming the same ops, the same changes)."""
    return all(p["final_results"] == reference["final_results"] for p in points)


def _strip(point: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in point.items() if k != "final_results"}


def headline(minutes: float, seed: int, memory: bool, repeat: int) -> dict[str, Any]:
    schema, ops, query = _workload(DEFAULTS, minutes, seed)
    lattice = Lattice.build(schema, DEFAULTS["m"], DEFAULTS["tmax"])
    window = DEFAULTS["window_minutes"] * 60.0
    runs: dict[str, dict[str, Any]] = {}
    for _ in range(repeat):  # interleaved; the fastest run of each engine is kept
        for name in ("store-only", "dynamic", "mesh"):
            run = run_stream(schema, lattice, query["keywords"], DEFAULTS["tmax"], window, ops, name)
            if name not in runs or run["cpu_s"] < runs[name]["cpu_s"]:
                runs[name] = run
    agree = _compare([runs["mesh"]], runs["dynamic"]) and runs["mesh"]["changes"] == runs["dynamic"]["changes"]
    shared = runs["store-only"]["cpu_s"]
    own = {name: max(runs[name]["cpu_s"] - shared, 1e-9) for name in ("dynamic", "mesh")}
    out: dict[str, Any] = {
        "params": {**DEFAULTS, "minutes": minutes, "keywords": query["keywords"], "repeat": repeat},
        "lattice_nodes": len(lattice), "cns": len(lattice.roots),
        "runs": {k: _strip(v) for k, v in runs.items()}, "agree": agree,
        "speedup_total": round(runs["mesh"]["cpu_s"] / runs["dynamic"]["cpu_s"], 2),
        "evaluator_cpu_s": {k: round(v, 4) for k, v in own.items()},
        "speedup_evaluator_only": round(own["mesh"] / own["dynamic"], 2),
        "evaluator_us_per_operation": {k: round(v / runs[k]["operations"] * 1e6, 3) for k, v in own.items()},
    }
    if memory:
        out["memory"] = {name: {k: v for k, v in run_stream(schema, lattice, query["keywords"], DEFAULTS["tmax"],
                                                            window, ops, name, memory=True).items()
                                if k in ("peak_traced_mb", "peak_intermediate_tuples")}
                         for name in ("store-only", "dynamic", "mesh")}
    return out


def fig14(minutes: float, seed: int, quick: bool, names: list[str]) -> dict[str, Any]:
    series: dict[str, Any] = {}
    for param, values in RANGES.items():
        if param not in names:
            continue
        if quick:
            values = [values[0], values[2], values[-1]]
        points = []
        for value in values:
            params = {**DEFAULTS, param: value}
            schema, ops, query = _workload(params, minutes, seed)
            lattice = Lattice.build(schema, params["m"], params["tmax"])
            window = params["window_minutes"] * 60.0
            runs = [run_stream(schema, lattice, query["keywords"], params["tmax"], window, ops, name)
                    for name in ("dynamic", "mesh")]
            points.append({"value": value, "dynamic_cpu_s": runs[0]["cpu_s"], "mesh_cpu_s": runs[1]["cpu_s"],
                           "ratio": round(runs[1]["cpu_s"] / runs[0]["cpu_s"], 2), "changes": runs[0]["changes"],
                           "agree": _compare([runs[1]], runs[0]) and runs[0]["changes"] == runs[1]["changes"]})
            print(f"fig14 {param}={value}: {points[-1]}", flush=True)
        series[param] = points
    return series


def fig15(papers: int, quick: bool) -> dict[str, Any]:
    work = dblp.build(papers=papers)
    schema, ops = work.schema(), list(work.ops())
    keywords = "analysis design system"
    series: dict[str, Any] = {}
    for param, values in (("tmax", [3, 5, 7]), ("window_percent", [30, 50, 70])):
        points = []
        for value in values:
            tmax = value if param == "tmax" else 7
            pct = value if param == "window_percent" else 50
            lattice = Lattice.build(schema, 3, tmax)
            window = papers * pct / 100.0  # one paper (with its Write and Cite tuples) per second
            runs = [run_stream(schema, lattice, keywords, tmax, window, ops, name) for name in ("dynamic", "mesh")]
            points.append({"value": value, "dynamic_cpu_s": runs[0]["cpu_s"], "mesh_cpu_s": runs[1]["cpu_s"],
                           "ratio": round(runs[1]["cpu_s"] / runs[0]["cpu_s"], 2), "changes": runs[0]["changes"],
                           "dynamic_peak_intermediate": runs[0]["peak_intermediate_tuples"],
                           "mesh_peak_intermediate": runs[1]["peak_intermediate_tuples"],
                           "agree": _compare([runs[1]], runs[0]) and runs[0]["changes"] == runs[1]["changes"]})
            print(f"fig15 {param}={value}: {points[-1]}", flush=True)
        series[param] = points
    return {"params": {"papers": papers, "ops": len(ops), "keywords": keywords, "m": 3}, "series": series}


def fig17(minutes: float, seed: int, quick: bool) -> dict[str, Any]:
    params = {**DEFAULTS, "m": 4, "tmax": 5}
    schema, ops, query = _workload(params, minutes, seed)
    lattice = Lattice.build(schema, params["m"], params["tmax"])
    whole = run_stream(schema, lattice, query["keywords"], params["tmax"], None, ops, "dynamic")
    points = []
    for pct in ([20, 50, 80] if quick else [10, 20, 30, 40, 50, 60, 70, 80, 90]):
        prefix = len(ops) * pct // 100
        sd = run_stream(schema, lattice, query["keywords"], params["tmax"], None, ops, "static-dynamic", prefix)
        points.append({"percent_preexisting": pct, "static_dynamic_cpu_s": sd["cpu_s"],
                       "static_load_cpu_s": sd["static_load_cpu_s"], "dynamic_cpu_s": whole["cpu_s"],
                       "agree": sd["final_results"] == whole["final_results"]})
        print(f"fig17 {pct}%: {points[-1]}", flush=True)
    return {"params": {**params, "window_minutes": None, "minutes": minutes, "keywords": query["keywords"],
                       "lattice_nodes": len(lattice), "final_results": whole["live_results"]}, "points": points}



def _plot_engines(ax: Any, points: list[dict[str, Any]], xlabel: str) -> None:
    """One panel: CPU seconds of CNEvalDynamic and the mesh against a varied parameter."""
    xs = [p["value"] for p in points]
    ax.plot(xs, [p["dynamic_cpu_s"] for p in points], "o-", label="CNEvalDynamic")
    ax.plot(xs, [p["mesh_cpu_s"] for p in points], "s--", label="Full-Mesh")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CPU s")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)

def _plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "fig14" in result:
        labels = {"window_minutes": "W (min)", "kwf": "KWF", "relations": "|V|", "sel": "sel", "m": "m",
                  "tmax": "Tmax"}
        fig, grid = plt.subplots(2, 3, figsize=(14, 7.5))
        axes = grid.ravel()
        for ax in axes[len(result["fig14"]):]:
            ax.set_visible(False)
        for ax, (param, points) in zip(axes, result["fig14"].items()):
            _plot_engines(ax, points, labels[param])
        axes[0].legend()
        fig.suptitle(f"CN evaluation, synthetic stream of {result['fig14_minutes']:g} min (paper Fig. 14)")
        fig.tight_layout()
        fig.savefig(out / "fig14.png", dpi=110)
        plt.close(fig)
    if "fig15" in result:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for ax, (param, points) in zip(axes, result["fig15"]["series"].items()):
            _plot_engines(ax, points, {"tmax": "Tmax", "window_percent": "W (% of the papers)"}[param])
        axes[0].legend()
        fig.suptitle(f"CN evaluation, DBLP-shaped stream of {result['fig15']['params']['ops']} ops (paper Fig. 15)")
        fig.tight_layout()
        fig.savefig(out / "fig15.png", dpi=110)
        plt.close(fig)
    if "fig17" in result:
        points = result["fig17"]["points"]
        xs = [p["percent_preexisting"] for p in points]
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        ax.plot(xs, [p["dynamic_cpu_s"] for p in points], "o-", label="CNEvalDynamic")
        ax.plot(xs, [p["static_dynamic_cpu_s"] for p in points], "s-", label="CNEvalStatic/CNEvalDynamic")
        ax.plot(xs, [p["static_load_cpu_s"] for p in points], ":", label="of which CNEvalStatic")
        ax.set_xlabel("% of the stream already in the window")
        ax.set_ylabel("CPU s")
        ax.grid(alpha=0.3)
        ax.legend()
        ax.set_title("m = 4, Tmax = 5, |V| = 15, W = inf (paper Fig. 17a)")
        fig.tight_layout()
        fig.savefig(out / "fig17.png", dpi=110)
        plt.close(fig)


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    minutes = 10.0 if args.quick and args.minutes == 60 else args.minutes
    f17_minutes = args.fig17_minutes or minutes
    result: dict[str, Any] = {
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count(), "processor": platform.processor()},
        "note": "CPU seconds of this process (time.process_time); the machine is shared, so compare ratios",
    }
    started = time.perf_counter()
    result["headline"] = headline(minutes, args.seed, "memory" not in args.skip, max(1, args.repeat))
    print(json.dumps({k: v for k, v in result["headline"].items() if k != "runs"}), flush=True)
    if "fig14" not in args.skip:
        result["fig14_minutes"] = minutes
        result["fig14"] = fig14(minutes, args.seed, args.quick, args.series)
    if "fig15" not in args.skip:
        result["fig15"] = fig15(1500 if args.quick and args.papers == 10000 else args.papers, args.quick)
    if "fig17" not in args.skip:
        result["fig17"] = fig17(f17_minutes, args.seed, args.quick)
    result["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["bench_wall_s"] = round(time.perf_counter() - started, 1)
    (out / "eval.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    _plot(result, out)
    print(f"wrote {out / 'eval.json'} and the plots")
    return 0
