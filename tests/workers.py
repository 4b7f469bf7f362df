"""A real Celery worker for tests: its own queue on the test Redis, a log file, stopped with SIGTERM."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

__all__ = ["celery_worker"]

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def celery_worker(env: dict[str, str], log_path: Path, concurrency: int = 1) -> Iterator[str]:
    """Run ``celery worker`` (prefork) in ``env`` on a queue of its own; yields the queue name."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "kwmonitor", "worker", "--pool", "prefork", "--concurrency",
             str(concurrency), "-Q", queue, "--loglevel", "INFO", "--without-gossip", "--without-mingle",
             "--without-heartbeat"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            yield queue
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
