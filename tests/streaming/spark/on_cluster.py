"""Evidence, read from the cluster itself, that Spark work ran on the standalone test cluster."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from streaming.spark.cluster import LocalCluster

__all__ = ["SparkMaster", "processes_under", "assert_ran_on_cluster"]


@dataclass(frozen=True)
class SparkMaster:
    """A master the tests run on: its URL and, for the standalone cluster, the cluster."""

    url: str
    cluster: LocalCluster | None = None


def processes_under(directory: Path) -> list[int]:
    """Pids of the live processes working in ``directory`` or below it.

    The cluster's daemons work in its directory, executors and their Python
    workers in the work dir below it: an independent census, not the process
    groups the cluster itself tracks.
    """
    root = Path(directory).resolve()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{entry}/cwd"))
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X") and cwd.is_relative_to(root):
            found.append(int(entry))
    return found


def assert_ran_on_cluster(cluster: LocalCluster, app_id: str) -> None:
    """The master registered ``app_id``, every worker launched an executor of it, and tasks finished there."""
    assert app_id in {app["id"] for app in cluster.applications()}, \
        f"the master never registered {app_id}: the job did not run on the cluster"
    executors = cluster.executors(app_id)
    workers = {worker["id"] for worker in cluster.state()["workers"]}
    assert {e.worker for e in executors} == workers, f"executors of {app_id}: {executors}; workers: {workers}"
    finished = sum(e.log.read_text(errors="replace").count("Finished task") for e in executors if e.log.exists())
    assert finished > 0, f"no task finished on the executors of {app_id}"
