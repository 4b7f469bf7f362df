"""``python -m streaming bench wxquery`` — the paper's Table 1 set-up on the photons stream (paper 002, Sect. 6).

32 randomly generated subscriptions on one photons stream (random subsets of
the photon's elements, coord, phc, en and det_time, returned; conjunctive and disjunctive predicates on
dx, dy and en whose constants are drawn with a normal distribution from a
predefined set of values of the data: its deciles; a quarter are windowed
aggregates over det_time), registered one after another, evaluated by:

* ``none`` — each subscription reads the original stream (data shipping);
* ``match`` — a subscription shares a group's stream if that stream already
  answers it (stream sharing without widening);
* ``widen`` — otherwise a group's stream is widened to answer it too.

Reported per strategy: subscriptions sharing a stream another one started
(the paper: 14/32 without and 31/32 with widening), groups, CPU seconds of the
whole evaluation, µs per item, and the bytes of the streams read by the
subscriptions' post-processing (for ``none``: the original stream once per
subscription). Every subscription's output is checked equal across
strategies. Writes ``wxquery.json`` and ``wxquery.png``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from lxml import etree

from ..workloads.photons import PHOTONS_DTD, photon_items
from ..wxquery.planner import plan_groups
from ..wxquery.run import run_subscriptions
from ..wxquery.translate import compile_text
from ..xmlstream.dtd import StreamDTD
from .asc import machine

HELP = "WXQuery sharing on the photons stream: 32 random subscriptions, none / match / widen"

OUTPUTS = ["coord", "phc", "en", "det_time"]
PREDICATED = ["coord/det/dx", "coord/det/dy", "en"]
WINDOWS = [(20, 10), (40, 20), (60, 20), (60, 30), (30, 10)]
REGIONS = ["", "[coord/cel/ra >= 120.0 and coord/cel/ra <= 138.0 and coord/cel/dec >= -49.0 and coord/cel/dec <= -40.0]"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="var/bench/wxquery", help="output directory for wxquery.json and the plot")
    parser.add_argument("--items", type=int, default=20_000, help="photons in the stream")
    parser.add_argument("--subscriptions", type=int, default=32)
    parser.add_argument("--aggregates", type=float, default=0.25, help="fraction of windowed aggregate subscriptions")
    parser.add_argument("--seed", type=int, default=7)


def deciles(items: list[etree._Element]) -> dict[str, list[str]]:
    """The predefined constants per predicated element: the deciles of the data, as the data writes them."""
    out = {}
    for leaf in PREDICATED:
        values = sorted(float(i.findtext(leaf)) for i in items)
        picks = [values[len(values) * k // 10] for k in range(1, 10)]
        out[leaf] = [str(int(v)) if leaf != "en" else repr(round(v, 1)) for v in picks]
    return out


def _constant(rng: random.Random, choices: list[str]) -> str:
    """A constant drawn with a normal distribution over the predefined values (the middle ones most often)."""
    index = round(rng.gauss((len(choices) - 1) / 2, len(choices) / 5))
    return choices[min(len(choices) - 1, max(0, index))]


def _predicate(rng: random.Random, constants: dict[str, list[str]], prefix: str) -> str:
    atoms = []
    for leaf in rng.sample(PREDICATED, rng.randint(1, 2)):
        op = rng.choice(["<", "<=", ">", ">="])
        atoms.append(f"{prefix}{leaf} {op} {_constant(rng, constants[leaf])}")
    if len(atoms) == 2 and rng.random() < 0.3:
        return f"({atoms[0]} or {atoms[1]})"
    return " and ".join(atoms)


def random_subscriptions(rng: random.Random, count: int, constants: dict[str, list[str]],
                         aggregates: float) -> list[tuple[str, str]]:
    """``count`` WXQuery texts: filters with random outputs and predicates, and some windowed aggregates."""
    out = []
    for n in range(count):
        if rng.random() < aggregates:
            size, step = rng.choice(WINDOWS)
            function = rng.choice(["avg", "max", "min", "count"])
            having = f" where $a >= {_constant(rng, constants['en'])}" if rng.random() < 0.3 else ""
            text = (f'<photons>{{ for $w in stream("photons")/photons/photon{rng.choice(REGIONS)}'
                    f" |det_time diff {size} step {step}| let $a := {function}($w/en){having}"
                    f" return <{function}_en>{{ $a }}</{function}_en> }}</photons>")
        else:
            outputs = rng.sample(OUTPUTS, rng.randint(1, 3))
            returned = " ".join(f"{{ $p/{o} }}" for o in outputs)
            text = (f'<photons>{{ for $p in stream("photons")/photons/photon where '
                    f"{_predicate(rng, constants, '$p/')} return <photon>{returned}</photon> }}</photons>")
        out.append((f"s{n + 1:02d}", text))
    return out


def main(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    dtd = StreamDTD.from_text(PHOTONS_DTD)
    items = [etree.fromstring(x) for x in photon_items(args.items, seed=args.seed, vela=0.3)]
    rng = random.Random(args.seed)
    texts = random_subscriptions(rng, args.subscriptions, deciles(items), args.aggregates)
    subs = [(name, compile_text(text, lambda _s: dtd)) for name, text in texts]
    stream = [("photons", i) for i in items]
    result: dict[str, Any] = {"config": vars(args), "machine": machine(), "subscriptions": dict(texts),
                              "strategies": {}}
    outputs = {}
    for mode in ("none", "match", "widen"):
        print(f"{mode} ...", flush=True)
        run = run_subscriptions(subs, stream, mode, lambda _s: dtd)
        outputs[mode] = run.results
        stats = run.stats
        result["strategies"][mode] = {
            "subscriptions_sharing": stats["subscriptions_sharing"],
            "groups": len(stats["groups"]) if mode != "none" else len(subs),
            "cpu_s": stats["cpu_s"],
            "us_per_item": round(stats["cpu_s"] / max(1, len(items)) * 1e6, 2),
            "stream_bytes": stats["stream_bytes"],
            "input_bytes": stats["input_bytes"],
            "group_kinds": [g["kind"] for g in stats["groups"]],
            "results": sum(len(r) for r in run.results.values()),
        }
        result["strategies"][mode]["streams_after_each_registration"] = _growth(subs, mode, dtd)
    base = result["strategies"]["none"]
    for mode, r in result["strategies"].items():
        r["cpu_vs_none"] = round(r["cpu_s"] / base["cpu_s"], 4) if base["cpu_s"] else None
        r["bytes_vs_none"] = round(r["stream_bytes"] / base["stream_bytes"], 4) if base["stream_bytes"] else None
    result["identical_outputs"] = outputs["none"] == outputs["match"] == outputs["widen"]
    result["seconds"] = round(time.perf_counter() - started, 1)
    (out_dir / "wxquery.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    plot(result, out_dir)
    print(json.dumps(summary(result), indent=1))
    return 0 if result["identical_outputs"] else 1


def _growth(subs, mode: str, dtd: StreamDTD) -> list[int]:
    """Number of streams (groups) after registering the first k subscriptions, k = 1..n."""
    if mode == "none":
        return list(range(1, len(subs) + 1))
    return [len(plan_groups(subs[:k], mode, lambda _s: dtd)) for k in range(1, len(subs) + 1)]


def summary(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("subscriptions_sharing", "groups", "cpu_s", "us_per_item", "stream_bytes", "cpu_vs_none", "bytes_vs_none")
    out: dict[str, Any] = {mode: {k: r[k] for k in keys} for mode, r in result["strategies"].items()}
    out["identical_outputs"] = result["identical_outputs"]
    out["seconds"] = result["seconds"]
    return out


def plot(result: dict[str, Any], out_dir: Path) -> None:
    """wxquery.png: CPU and stream bytes per strategy, and streams as subscriptions are registered."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(result["strategies"])
    labels = {"none": "data shipping", "match": "stream sharing", "widen": "stream widening"}
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    axes[0].bar([labels[m] for m in modes], [result["strategies"][m]["cpu_s"] for m in modes], color=["0.6", "C0", "C1"])
    axes[0].set_ylabel("CPU seconds (whole evaluation)")
    axes[1].bar([labels[m] for m in modes], [result["strategies"][m]["stream_bytes"] / 1e6 for m in modes],
                color=["0.6", "C0", "C1"])
    axes[1].set_ylabel("MB of streams read by the subscriptions")
    for m in modes:
        growth = result["strategies"][m]["streams_after_each_registration"]
        axes[2].plot(range(1, len(growth) + 1), growth, label=labels[m])
    axes[2].set_xlabel("subscriptions registered")
    axes[2].set_ylabel("streams computed")
    axes[2].legend(fontsize=8)
    for ax in axes[:2]:
        ax.tick_params(axis="x", labelsize=8)
    cfg = result["config"]
    fig.suptitle(f"{cfg['subscriptions']} random WXQuery subscriptions, {cfg['items']} photons "
                 f"(sharing: {result['strategies']['match']['subscriptions_sharing']} without widening, "
                 f"{result['strategies']['widen']['subscriptions_sharing']} with)")
    fig.tight_layout()
    fig.savefig(out_dir / "wxquery.png", dpi=120)
    plt.close(fig)
