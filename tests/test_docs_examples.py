"""The shell examples of the README and docs/ marked ``runnable`` run as written from the repository root.

A block opened with ```` ```sh runnable ```` is what a user copies into a
shell at the root of a clone after ``make venv``: it must exit 0 there with
no ``PYTHONPATH`` and no activated virtualenv. Only quick, self-contained
examples are marked (no server, no database).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```sh runnable\n(.*?)^```$", re.M | re.S)


def runnable_examples() -> list[tuple[str, str]]:
    """(``file:line``, shell text) of every runnable block of README.md and docs/."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


EXAMPLES = runnable_examples()


def test_the_docs_mark_their_examples_runnable():
    assert {place.split(":")[0] for place, _ in EXAMPLES} >= {
        "README.md", "docs/cli.md", "docs/sharing.md", "docs/examples/README.md"}


@pytest.mark.parametrize("place,script", EXAMPLES, ids=[place for place, _ in EXAMPLES])
def test_a_runnable_example_runs_as_written_from_the_repository_root(place, script):
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"{place}:\n{script}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
