"""``python -m streaming compare EXPECTED ACTUAL``: do two event files describe the same live sets?

Both files are in the event format of ``run`` (docs/cli.md). They are
replayed op by op (events grouped by ``seq``); after every seq the two live
result sets must be equal, and each file must be self-consistent (no add of a
live result, no remove of an absent one). Prints ``same`` and exits 0 when
they agree; otherwise prints the first difference and exits 1. A result is
identified by its tuples and edges, so the order of events within one seq and
the order of tuples within an event do not matter.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["HELP", "EventFileError", "event_key", "events_by_seq", "first_difference", "add_arguments", "main"]

HELP = "compare two event files of `run` (live sets after every op); prints `same` when they agree"

ResultKey = tuple[tuple[str, ...], tuple[str, ...]]


class EventFileError(ValueError):
    """A line that is not an add/remove event; the message names the file and line."""


def event_key(event: dict[str, Any]) -> ResultKey:
    """The identity of the result an event adds or removes (its tuples and edges, order-free)."""
    return (tuple(sorted(json.dumps(t) for t in event["tuples"])),
            tuple(sorted(json.dumps(e) for e in event.get("edges", []))))


def events_by_seq(path: Path) -> dict[int, list[dict[str, Any]]]:
    """The events of a file grouped by ``seq``, in file order within a seq."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EventFileError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(event, dict) or event.get("type") not in ("add", "remove") \
                    or not isinstance(event.get("seq"), int) or "tuples" not in event:
                raise EventFileError(f"{path}:{number}: not an engine event: {line.strip()[:120]}")
            out[event["seq"]].append(event)
    return out


def _replay(events: list[dict[str, Any]], seq: int, live: set[ResultKey], name: str) -> str | None:
    for event in events:
        key = event_key(event)
        if event["type"] == "add":
            if key in live:
                return f"{name}: seq {seq} adds a result that is already live: {key}"
            live.add(key)
        else:
            if key not in live:
                return f"{name}: seq {seq} removes a result that is not live: {key}"
            live.discard(key)
    return None


def first_difference(expected: Path, actual: Path) -> str | None:
    """None when both files give the same live set after every seq, else the first difference."""
    files = [(events_by_seq(expected), set(), str(expected)), (events_by_seq(actual), set(), str(actual))]
    seqs = sorted(set(files[0][0]) | set(files[1][0]))
    for seq in seqs:
        for events, live, name in files:
            error = _replay(events.get(seq, []), seq, live, name)
            if error:
                return error
        live_expected, live_actual = files[0][1], files[1][1]
        if live_expected != live_actual:
            return (f"after seq {seq}: missing {sorted(live_expected - live_actual)[:2]} "
                    f"extra {sorted(live_actual - live_expected)[:2]}")
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("expected", type=Path, help="the reference event file (NDJSON)")
    parser.add_argument("actual", type=Path, help="the event file to check (NDJSON)")


def main(args: argparse.Namespace) -> int:
    try:
        difference = first_difference(args.expected, args.actual)
    except (OSError, EventFileError) as exc:
        print(exc)
        return 2
    print(difference or "same")
    return 1 if difference else 0
