"""kwmonitor against one Pathway dataflow on the same op stream, with the same per-op output (issue 18).

    .venv/bin/python benchmarks/pathway_compare.py            # every scenario, 5 repetitions (~20-30 min)
    .venv/bin/python benchmarks/pathway_compare.py --scenarios ecommerce-dense --repeats 3

For each scenario (a stream and its queries, :data:`SCENARIOS`) it runs, as
separate processes on the same files, several times, interleaved:

* ``run-plan``: ``python -m streaming run-plan`` (the shared engine the
  evaluators use, ``--sharing widen``) over the scenario's plan;
* ``run``: ``python -m streaming run`` (the single-query engine), once per
  query; its time is the sum over the queries;
* ``pathway``: ``benchmarks/pathway_dataflow.py`` in Pathway's virtualenv
  (created from ``benchmarks/requirements-pathway.txt`` with this Python if
  missing): one dataflow holding every CN of every query
  (:mod:`benchmarks.pathway_plan`) over the stream's changelog
  (:mod:`benchmarks.pathway_changelog`).

**Same output, checked.** Every query's events from ``run-plan`` and from
Pathway (its updates at each op's logical time, :mod:`benchmarks.pathway_output`)
are replayed against ``run``'s op by op (``streaming compare``: the live
result set after every op); a scenario whose outputs differ gets no ratio
and the script exits 1.

**Time.** Each command runs once on the stream and once on an empty stream
(the same schema, queries and dataflow): the empty run is the *startup*
(process start, imports, CN generation or dataflow build, Pathway's engine
start and shutdown). *Processing* = median CPU seconds (user + system of the
process) on the stream minus the median on the empty one, and the same for
wall seconds. The ratios are of CPU first: every process computes on one
core (Pathway with ``PATHWAY_THREADS=1``), so on an idle machine its CPU time
is its wall time, while on a machine shared with other jobs wall time mostly
measures the wait for a core; both are in the JSON, every run included. Pathway's input
is the changelog, made beforehand by kwmonitor's own stream rules and window
(``--window-mode expiries``, timed and reported as ``changelog_s``, not counted
for Pathway), so Pathway's time is its keyword classification, filters, joins
and output only; ``forget`` scenarios do the window in Pathway instead.

Writes ``OUT/pathway.json`` (machine, every run, medians, ratios) and
``OUT/pathway.png``, and prints a table.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.pathway_changelog import seq_of_time, write_changelog  # noqa: E402
from benchmarks.pathway_output import write_events  # noqa: E402
from benchmarks.pathway_plan import join_plan  # noqa: E402
from streaming.cli.compare import first_difference  # noqa: E402
from streaming.ops import op_to_dict  # noqa: E402
from streaming.schema import Schema  # noqa: E402
from streaming.sharing.properties import SharingPlan  # noqa: E402
from streaming.workloads import Workload, ecommerce, synthetic  # noqa: E402

REQUIREMENTS = ROOT / "benchmarks" / "requirements-pathway.txt"
DATAFLOW = ROOT / "benchmarks" / "pathway_dataflow.py"
SYSTEMS = ("run-plan", "run", "pathway")


@dataclass(frozen=True)
class Scenario:
    """A stream and the queries evaluated over it (``window_mode``: the changelog's, see pathway_changelog)."""

    title: str
    workload: Callable[[], Workload]
    queries: list[dict[str, Any]]
    ops: int | None = None
    window_mode: str = "expiries"
    notes: list[str] = field(default_factory=list)


def _price(op: str, value: Any) -> dict[str, Any]:
    return {"relation": "Product", "attribute": "price", "op": op, "value": value}


SCENARIOS: dict[str, Scenario] = {
    "ecommerce-dense": Scenario(
        "E-commerce, one result-dense query {deliver, gift}, Tmax 5, 1 h window",
        lambda: ecommerce.build(20_000, seed=0),
        [{"id": 1, "keywords": ["deliver", "gift"], "tmax": 5, "window_seconds": 3600.0}]),
    "synthetic-dense": Scenario(
        "synthetic (5 relations, KWF 0.3, sel 5, 4,000 s), {alpha, bravo, charlie}, Tmax 4, 20 min window",
        lambda: synthetic.build(relations=5, seconds=4000, kwf=0.3, sel=5),
        [{"id": 1, "keywords": ["alpha", "bravo", "charlie"], "tmax": 4, "window_seconds": 1200.0}]),
    "ecommerce-six": Scenario(
        "E-commerce, six queries on three keyword sets with windows and predicates",
        lambda: ecommerce.build(20_000, seed=0),
        [{"id": 1, "keywords": ["deliver", "gift"], "tmax": 5, "window_seconds": 3600.0},
         {"id": 2, "keywords": ["deliver", "gift"], "tmax": 4, "window_seconds": 1800.0,
          "predicates": [_price("<", 100)]},
         {"id": 3, "keywords": ["dress", "texas"], "tmax": 5, "window_seconds": 3600.0,
          "predicates": [_price("<", 60)]},
         {"id": 4, "keywords": ["dress", "texas"], "tmax": 3, "window_seconds": 1800.0},
         {"id": 5, "keywords": ["gift", "texas"], "tmax": 4, "window_seconds": 3600.0,
          "predicates": [_price(">=", 20)]},
         {"id": 6, "keywords": ["gift", "texas"], "tmax": 5, "window_seconds": 2700.0,
          "predicates": [_price("between", [10, 150])]}]),
    "ecommerce-dense-forget": Scenario(
        "ecommerce-dense's first 2,000 ops, the window done by Pathway (Table.forget)",
        lambda: ecommerce.build(20_000, seed=0),
        [{"id": 1, "keywords": ["deliver", "gift"], "tmax": 5, "window_seconds": 3600.0}],
        ops=2_000, window_mode="forget",
        notes=["Pathway keeps every tuple once and forgets it ts + W after; each op also has a tick row "
               "(its ts) one logical time before its change, so the expiries land at the op's seq"]),
}
DEFAULT_SCENARIOS = ("ecommerce-dense", "synthetic-dense", "ecommerce-six", "ecommerce-dense-forget")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", nargs="+", choices=sorted(SCENARIOS), default=list(DEFAULT_SCENARIOS))
    parser.add_argument("--repeats", type=int, default=5, help="runs of each command (and of its empty twin)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "pathway")
    parser.add_argument("--venv", type=Path, default=ROOT / "var" / "bench" / "pathway-venv",
                        help="Pathway's virtualenv (created if missing)")
    parser.add_argument("--pathway-threads", type=int, default=1, help="PATHWAY_THREADS of the dataflow")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pathway")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    python = ensure_venv(args.venv)
    report: dict[str, Any] = {"machine": machine(python), "repeats": args.repeats,
                              "pathway_threads": args.pathway_threads, "scenarios": {}}
    env = {**os.environ, "PATHWAY_THREADS": str(args.pathway_threads)}
    for name in args.scenarios:
        print(f"== {name}", flush=True)
        bench = Bench(SCENARIOS[name], args.workdir / name, python, env)
        report["scenarios"][name] = bench.run(args.repeats)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pathway.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    plot(report, args.out / "pathway.png")
    print(table(report))
    return 0 if all(s["same"] for s in report["scenarios"].values()) else 1


def ensure_venv(venv: Path) -> Path:
    """Pathway's virtualenv (this Python, the pinned requirements), made or refreshed when they changed."""
    python = venv / "bin" / "python"
    stamp = venv / "requirements-pathway.txt"
    wanted = REQUIREMENTS.read_text(encoding="utf-8")
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == wanted:
        return python
    print(f"installing Pathway into {venv} (a few minutes, once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(wanted, encoding="utf-8")
    return python


def machine(python: Path) -> dict[str, Any]:
    """Where and on what the numbers were taken."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    pathway = subprocess.run([str(python), "-c", "import pathway; print(pathway.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    engine = importlib.import_module("streaming.engine").__file__ or ""
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average_at_start": list(os.getloadavg()),
            "python": platform.python_version(), "pathway": pathway,
            "kwmonitor_commit": commit + (" (with uncommitted changes)" if dirty else ""),
            "kwmonitor_engine": "compiled" if engine.endswith(".so") else "Python source",
            "date": time.strftime("%Y-%m-%d %H:%M %Z")}


class Bench:
    """One scenario: its files, its three systems' runs, the check of their outputs and the summary."""

    def __init__(self, scenario: Scenario, work: Path, python: Path, env: dict[str, str]):
        self.scenario, self.work, self.python, self.env = scenario, work, python, env
        self.queries = scenario.queries

    def run(self, repeats: int) -> dict[str, Any]:
        load = os.getloadavg()[0]
        facts = self._prepare()
        runs: dict[str, dict[str, list[dict[str, float]]]] = {s: {"full": [], "empty": []} for s in SYSTEMS}
        for rep in range(repeats):
            for system in SYSTEMS:
                for kind in ("full", "empty"):
                    runs[system][kind].append(self._timed(system, kind, rep))
            print(f"   repetition {rep + 1}/{repeats}: " + ", ".join(
                f"{s} {runs[s]['full'][-1]['wall_s']:.2f} s" for s in SYSTEMS), flush=True)
        checks = self._check()
        same = all(c["difference"] is None for c in checks)
        summary = {s: _summary(runs[s]) for s in SYSTEMS}
        ratios = {}
        if same:
            for base in ("run-plan", "run"):
                ratios[f"pathway/{base}"] = {unit: _ratio(summary["pathway"][f"processing_{unit}"],
                                                          summary[base][f"processing_{unit}"])
                                             for unit in ("wall_s", "cpu_s")}
        return {"title": self.scenario.title, "queries": self.queries, "window_mode": self.scenario.window_mode,
                "notes": self.scenario.notes, "load_average_at_start": load, **facts, "same": same,
                "checks": checks, "summary": summary, "ratios": ratios, "runs": runs}

    # -- files --------------------------------------------------------------------------------

    def _prepare(self) -> dict[str, Any]:
        """Stream, empty stream, plan, join plan and changelogs; what they hold and the changelog's cost."""
        work = self.work
        work.mkdir(parents=True, exist_ok=True)
        workload = self.scenario.workload()
        self.schema_doc = workload.schema_doc
        (work / "schema.json").write_text(json.dumps(self.schema_doc), encoding="utf-8")
        with (work / "ops.ndjson").open("w", encoding="utf-8") as out:
            for i, op in enumerate(workload.ops()):
                if self.scenario.ops is not None and i >= self.scenario.ops:
                    break
                out.write(json.dumps(op_to_dict(op), separators=(",", ":")) + "\n")
        (work / "empty.ndjson").write_text("", encoding="utf-8")
        plan = {"schema": self.schema_doc, "queries": self.queries}
        (work / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
        joins = join_plan(SharingPlan.model_validate(plan))
        self.cns = {q["id"]: q["cns"] for q in joins["queries"]}
        (work / "join.json").write_text(json.dumps(joins), encoding="utf-8")
        schema = Schema.from_dict(self.schema_doc)
        started = time.perf_counter()
        with (work / "ops.ndjson").open(encoding="utf-8") as ops, \
                (work / "changelog.ndjson").open("w", encoding="utf-8") as out:
            counts = write_changelog(schema, ops, joins["windows"], self.scenario.window_mode, out)
        changelog_s = time.perf_counter() - started
        with (work / "changelog-empty.ndjson").open("w", encoding="utf-8") as out:
            write_changelog(schema, [], joins["windows"], self.scenario.window_mode, out)
        return {"ops": counts["ops"], "changelog_rows": counts, "changelog_s": changelog_s,
                "cns": {str(q): len(c) for q, c in self.cns.items()},
                "dataflow": {"subrelations": len(joins["subrelations"]), "join_nodes": len(joins["nodes"])}}

    # -- runs ---------------------------------------------------------------------------------

    def _commands(self, system: str, kind: str, out: Path) -> list[list[str]]:
        work, py = self.work, sys.executable
        ops = str(work / ("ops.ndjson" if kind == "full" else "empty.ndjson"))
        if system == "run-plan":
            return [[py, "-m", "streaming", "run-plan", "--plan", str(work / "plan.json"), "--ops", ops,
                     "--out-dir", str(out), "--rejects", str(out / "rejects.txt")]]
        if system == "run":
            return [[py, "-m", "streaming", "run", *_run_query_args(q), "--schema", str(work / "schema.json"),
                     "--ops", ops, "--out", str(out / f"query-{q['id']}.ndjson"),
                     "--rejects", str(out / f"rejects-{q['id']}.txt")] for q in self.queries]
        changelog = work / ("changelog.ndjson" if kind == "full" else "changelog-empty.ndjson")
        return [[str(self.python), str(DATAFLOW), "--plan", str(work / "join.json"), "--changelog", str(changelog),
                 "--window-mode", self.scenario.window_mode, "--out-dir", str(out)]]

    def _timed(self, system: str, kind: str, rep: int) -> dict[str, float]:
        """Wall and CPU seconds of the system's processes on the stream (``full``) or the empty one."""
        out = self.work / "out" / f"{system}-{kind}-{rep}"
        out.mkdir(parents=True, exist_ok=True)
        wall = cpu = 0.0
        for command in self._commands(system, kind, out):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            done = subprocess.run(command, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
            wall += time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        timing: dict[str, float] = {"wall_s": wall, "cpu_s": cpu}
        if system == "pathway":
            timing.update(json.loads((out / "timing.json").read_text(encoding="utf-8")))
        elif system == "run-plan":
            timing["op_loop_cpu_s"] = json.loads((out / "stats.json").read_text(encoding="utf-8"))["cpu_s"]
        return timing

    # -- the check ----------------------------------------------------------------------------

    def _check(self) -> list[dict[str, Any]]:
        """Per query: events of ``run`` against those of ``run-plan`` and of Pathway (first repetition)."""
        out = self.work / "out"
        checks = []
        for query in self.queries:
            qid = query["id"]
            reference = out / "run-full-0" / f"query-{qid}.ndjson"
            pathway_events = out / "pathway-full-0" / f"events-{qid}.ndjson"
            with (out / "pathway-full-0" / f"query-{qid}.jsonl").open(encoding="utf-8") as rows, \
                    pathway_events.open("w", encoding="utf-8") as events:
                write_events(self.cns[qid], rows, seq_of_time, events)
            adds = removes = 0
            with reference.open(encoding="utf-8") as lines:
                for line in lines:
                    kind = json.loads(line)["type"]
                    adds, removes = adds + (kind == "add"), removes + (kind == "remove")
            for system, actual in (("run-plan", out / "run-plan-full-0" / f"query-{qid}.ndjson"),
                                   ("pathway", pathway_events)):
                difference = first_difference(reference, actual)
                checks.append({"query": qid, "system": system, "adds": adds, "removes": removes,
                               "difference": difference and difference.replace(f"{ROOT}/", "")})
        return checks


def _run_query_args(query: dict[str, Any]) -> list[str]:
    """``run``'s options for one plan query."""
    args = ["--keywords", " ".join(query["keywords"]), "--tmax", str(query["tmax"])]
    if query.get("window_seconds") is not None:
        args += ["--window-seconds", str(query["window_seconds"])]
    for p in query.get("predicates", []):
        args += ["--predicate", f"{p['relation']}.{p['attribute']} {p['op']} {json.dumps(p['value'])}"]
    return args


def _ratio(pathway: float, kwmonitor: float) -> float | None:
    """Pathway's processing over kwmonitor's; None when noise made either not positive (startup took
    longer than the whole run)."""
    return pathway / kwmonitor if pathway > 0 and kwmonitor > 0 else None


def _summary(runs: dict[str, list[dict[str, float]]]) -> dict[str, float]:
    """Medians of the runs on the stream and on the empty one, and processing = their difference."""
    out: dict[str, float] = {}
    for unit in ("wall_s", "cpu_s"):
        full = statistics.median(r[unit] for r in runs["full"])
        empty = statistics.median(r[unit] for r in runs["empty"])
        out[f"full_{unit}"], out[f"startup_{unit}"], out[f"processing_{unit}"] = full, empty, full - empty
    return out


# -- reporting ------------------------------------------------------------------------------------

def table(report: dict[str, Any]) -> str:
    """The Markdown table of README's section: processing and startup CPU seconds, ratios of CPU (and wall)."""
    lines = ["| scenario | ops | events | run-plan s | run s | Pathway s | Pathway startup s | Pathway / run-plan | "
             "Pathway / run | same output |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in report["scenarios"].items():
        events = sum(c["adds"] + c["removes"] for c in s["checks"] if c["system"] == "pathway")
        cells = [name, f"{s['ops']:,}", f"{events:,}"]
        cells += [f"{s['summary'][system]['processing_cpu_s']:.2f}" for system in SYSTEMS]
        cells.append(f"{s['summary']['pathway']['startup_cpu_s']:.1f}")
        for base in ("run-plan", "run"):
            ratio = s["ratios"].get(f"pathway/{base}")
            cells.append(f"**{_times(ratio['cpu_s'])}** (wall {_times(ratio['wall_s'])})" if ratio else "not reported")
        cells.append("yes" if s["same"] else "NO")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _times(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.1f}x"


def plot(report: dict[str, Any], path: Path) -> None:
    """Processing CPU seconds per scenario and system, log scale, with the ratios."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["scenarios"])
    fig, ax = plt.subplots(figsize=(2.2 + 2.2 * len(names), 4))
    width = 0.27
    for i, system in enumerate(SYSTEMS):
        values = [max(report["scenarios"][n]["summary"][system]["processing_cpu_s"], 1e-3) for n in names]
        ax.bar([x + (i - 1) * width for x in range(len(names))], values, width, label=system)
    for x, n in enumerate(names):
        ratio = report["scenarios"][n]["ratios"].get("pathway/run-plan")
        label = _times(ratio["cpu_s"]) if ratio else "differs"
        top = report["scenarios"][n]["summary"]["pathway"]["processing_cpu_s"]
        ax.annotate(label, (x + width, max(top, 1e-3)), ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylabel("processing, CPU s (median, startup excluded)")
    ax.set_title(f"kwmonitor vs Pathway {report['machine']['pathway']} (label: Pathway / run-plan)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
