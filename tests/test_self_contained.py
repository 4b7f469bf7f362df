"""A clone is self-contained: nothing in it reads or names a path outside the repository.

The worked examples and the contracts live in docs/; a test, a doc or the
code that pointed at a sibling folder or an absolute path of one machine
would pass here and fail in a fresh clone anywhere else.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".git", ".venv", "var", "node_modules", "__pycache__", ".pytest_cache", ".hypothesis"}
TEXT_SUFFIXES = {".py", ".md", ".sh", ".html", ".js", ".css", ".json", ".ndjson", ".txt", ".ini", ".yaml", ".yml",
                 ".toml", ".cfg", ".example", ""}
FORBIDDEN = re.compile(r"\.\./shared|/work/|shared/examples|shared/tools|DESIGN\.md")


def repository_files() -> list[Path]:
    """The files of the checkout: git's (tracked and not ignored) in a clone, else a walk of the tree."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode == 0:
        paths = [ROOT / name for name in listed.stdout.splitlines()]
    else:
        paths = [p for p in ROOT.rglob("*") if not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)]
    return [p for p in paths if p.is_file() and p.suffix in TEXT_SUFFIXES]


def test_no_file_names_a_path_outside_the_repository():
    me = Path(__file__).resolve()
    offenders = []
    for path in repository_files():
        if path == me:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert offenders == []


def test_the_contracts_and_examples_are_in_docs_and_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    for doc in ("schema.md", "ops.md", "results.md", "feeds.md", "cli.md"):
        assert (ROOT / "docs" / doc).is_file()
        assert f"docs/{doc}" in readme
    examples = ROOT / "docs" / "examples" / "ecommerce"
    assert {p.name for p in examples.iterdir()} >= {"schema.json", "ops.ndjson", "events-dress-texas-tmax5.ndjson"}


def test_no_tracked_link_leads_out_of_the_repository():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    links = [ROOT / name for name in listed.stdout.splitlines() if (ROOT / name).is_symlink()]
    assert [str(p.relative_to(ROOT)) for p in links if not p.resolve().is_relative_to(ROOT)] == []
