"""Comparing a query's Redis change stream with the engine CLI's events, seq by seq."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from streaming import bus
from streaming.events import result_key

__all__ = ["published", "cli_events", "run_plan_events", "run_plan_rejects", "run_plan_query"]


def published(client, query_id: int) -> tuple[dict[int, list], set[str]]:
    """seq -> sorted (type, result key) of the change stream, and the live set it builds (edits of the
    query announced on the stream are skipped).

    Fails on an add of a live result or a remove of an absent one (a duplicate
    add or a lost remove).
    """
    per_seq: dict[int, list] = defaultdict(list)
    live: set[str] = set()
    after = "0-0"
    while True:
        batch = bus.read_changes(client, query_id, after, count=10_000)
        if not batch:
            break
        for entry_id, change in batch:
            after = entry_id
            if change.type == "query.updated":  # an edit announced to the query's page, not a change
                continue
            kind = "add" if change.type == "result.add" else "remove"
            key = change.result.key
            assert (kind == "add") == (key not in live), f"seq {change.seq}: {kind} of {key} breaks the live set"
            live.symmetric_difference_update({key})
            per_seq[change.seq].append((kind, key))
    return {seq: sorted(v) for seq, v in per_seq.items()}, live


def cli_events(schema_doc: dict, ops: list[str], keywords: str, tmax: int, window: float | None,
               workdir: Path) -> tuple[dict[int, list], set[str]]:
    """Run ``python -m streaming run`` on ``ops``; seq -> sorted (type, key) and the final live set."""
    schema_path, ops_path = workdir / "schema.json", workdir / "ops.ndjson"
    schema_path.write_text(json.dumps(schema_doc))
    ops_path.write_text("".join(line + "\n" for line in ops))
    command = [sys.executable, "-m", "streaming", "run", "--schema", str(schema_path), "--keywords", keywords,
               "--tmax", str(tmax), "--ops", str(ops_path)]
    if window is not None:
        command += ["--window-seconds", str(window)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    per_seq: dict[int, list] = defaultdict(list)
    live: set[str] = set()
    for line in out.splitlines():
        event = json.loads(line)
        key = result_key(event["tuples"], event["edges"])
        live.symmetric_difference_update({key})
        per_seq[event["seq"]].append((event["type"], key))
    return {seq: sorted(v) for seq, v in per_seq.items()}, live


def run_plan_events(plan: dict, ops: list[str], workdir: Path) -> Path:
    """Run ``python -m streaming run-plan`` on ``ops`` with ``plan`` (schema, queries, aggregates);
    returns its output folder (``query-<id>.ndjson``, ``aggregate-<id>.ndjson``; the rejects are beside
    it, :func:`run_plan_rejects`)."""
    (workdir / "plan.json").write_text(json.dumps(plan))
    (workdir / "ops.ndjson").write_text("".join(line + "\n" for line in ops))
    subprocess.run([sys.executable, "-m", "streaming", "run-plan", "--plan", str(workdir / "plan.json"), "--ops",
                    str(workdir / "ops.ndjson"), "--out-dir", str(workdir / "out"), "--rejects",
                    str(workdir / "rejects.txt")], check=True)
    return workdir / "out"


def run_plan_rejects(out: Path) -> list[tuple[int, str]]:
    """(seq, reason) of each op ``run-plan`` rejected (seq = line number - 1: the ops are the stored lines)."""
    rejects = []
    for line in (out.parent / "rejects.txt").read_text().splitlines():
        number, reason = line.removeprefix("line ").split(": ", 1)
        rejects.append((int(number) - 1, reason))
    return rejects


def run_plan_query(out: Path, query_id: int) -> dict[int, list]:
    """seq -> sorted (type, result key) of one query's ``run-plan`` file."""
    per_seq: dict[int, list] = defaultdict(list)
    for line in (out / f"query-{query_id}.ndjson").read_text().splitlines():
        event = json.loads(line)
        per_seq[event["seq"]].append((event["type"], result_key(event["tuples"], event["edges"])))
    return {seq: sorted(v) for seq, v in per_seq.items()}
