"""The local env file (``ENV_FILE``, by default ``var/.env``): the settings of the processes of this machine.

The settings read it at start-up (the real environment wins). ``make run`` writes every setting it runs
with into it (``manage.py save_run_settings``), so a component started by hand from the repository root,
as the README says, reads the same Redis, database, directories and ASC period as the demo did.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["env_line", "set_values"]

WRITTEN_BY_MAKE_RUN = "# Written by `make run`: the settings it ran with, read by every component started by hand."
_ASSIGNMENT = re.compile(r"\A(?:export )?([A-Za-z_0-9]+)=")


def env_line(name: str, value: str) -> str:
    """``NAME=value`` as django-environ reads it back unchanged (a value in quotes is put in single quotes)."""
    if "\n" in value or "\r" in value:
        raise ValueError(f"{name}: a value of several lines cannot be written to an env file")
    if value[:1] in ("'", '"') and value[-1:] in ("'", '"'):
        value = f"'{value}'"
    return f"{name}={value}"


def set_values(path: Path, values: Mapping[str, str]) -> list[str]:
    """Give each name its value in the env file at ``path``: a line already naming it is rewritten in place,
    the others are appended; every other line is kept. Returns the names whose value changed."""
    lines = path.read_text().splitlines() if path.is_file() else []
    current: dict[str, int] = {}
    for index, line in enumerate(lines):
        if match := _ASSIGNMENT.match(line):
            current[match.group(1)] = index
    changed = []
    appended = []
    for name, value in values.items():
        line = env_line(name, value)
        if name in current:
            if lines[current[name]] != line:
                lines[current[name]] = line
                changed.append(name)
        else:
            appended.append(line)
            changed.append(name)
    if appended:
        if WRITTEN_BY_MAKE_RUN not in lines:
            appended.insert(0, WRITTEN_BY_MAKE_RUN)
        lines.extend(appended)
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(temporary, path)
    return changed
