"""How many network templates (NTs) and candidate networks (CNs) a query produces.

The counts come from the engine CLI (``python -m streaming nts|cns --count``)
run in a child process with a time limit: CN generation grows quickly with
Tmax and the schema, and an admin page must not hang on it. Results (a
timeout included) are cached per (schema document, keywords, Tmax).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache

__all__ = ["Preview", "preview_counts"]


@dataclass(frozen=True)
class Preview:
    nts: int | None
    cns: int | None
    error: str = ""
    seconds: float = 0.0
    timed_out: bool = False

    @property
    def too_many(self) -> bool:
        return self.cns is not None and self.cns > settings.QUERY_CN_WARNING


_TIMEOUT = "gave up after {:.0f} s (too many to count here)"


def _count(argv: list[str], timeout: float) -> tuple[int | None, str]:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "streaming", *argv, "--count"],
            capture_output=True, text=True, timeout=timeout, cwd=settings.BASE_DIR,
        )
    except subprocess.TimeoutExpired:
        return None, _TIMEOUT.format(timeout)
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    try:
        return int(proc.stdout.strip()), ""
    except ValueError:
        return None, f"unexpected output {proc.stdout.strip()[:80]!r}"


def preview_counts(schema_doc: dict[str, Any], keywords: list[str], tmax: int, timeout: float = 5.0) -> Preview:
    """NT and CN counts of ``keywords`` with ``tmax`` over the schema, each within ``timeout`` seconds."""
    digest = hashlib.sha256(json.dumps([schema_doc, keywords, tmax], sort_keys=True).encode()).hexdigest()
    cache_key = f"kwmonitor:preview:{digest}"
    cached = cache.get(cache_key)
    if cached is not None:
        return Preview(**cached)
    started = time.monotonic()
    nts, nt_error = _count(["nts", "--keywords-count", str(len(keywords)), "--tmax", str(tmax)], timeout)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as schema_file:
        json.dump(schema_doc, schema_file)
        schema_file.flush()
        cns, cn_error = _count(["cns", "--schema", schema_file.name, "--keywords", " ".join(keywords), "--tmax", str(tmax)], timeout)
    errors = [f"{what}: {error}" for what, error in (("NTs", nt_error), ("CNs", cn_error)) if error]
    timed_out = _TIMEOUT.format(timeout) in (nt_error, cn_error)
    result = Preview(nts, cns, "; ".join(errors), round(time.monotonic() - started, 2), timed_out)
    # A count that timed out is remembered too (it would time out again), other failures are not.
    if not errors or timed_out:
        cache.set(cache_key, result.__dict__, 3600)
    return result
