"""A Spark standalone cluster on this host: one master and N workers from the installed pyspark.

The tests run the evaluators against it (a session fixture), users start one
with ``make cluster`` (``python -m streaming.spark.cluster``) and point
``SPARK_MASTER`` at the URL it prints. The daemons are the JVMs of pip's
pyspark (``SPARK_HOME`` is the package folder, so the cluster runs exactly the
drivers' Spark), bound to 127.0.0.1 on free ports, logging into
``<directory>/logs``; executors work in ``<directory>/work``.

Each daemon leads its own process group, which also holds the executors it
launches and their Python workers, so :meth:`LocalCluster.stop` ends them all
(SIGTERM, then SIGKILL) and fails loudly if anything survives. On Linux each
daemon also gets SIGTERM when the thread that started it dies
(``PR_SET_PDEATHSIG``), so no JVM outlives a killed test run or a killed
``make cluster``.

The executors run the driver's Python (``PYSPARK_PYTHON``) and find the
``streaming`` package through ``spark.executorEnv.PYTHONPATH``, both set by
:func:`streaming.spark.job.spark_session`: the cluster needs no setup of its
own for kwmonitor. The landing and checkpoint paths are local paths, which
every executor of a one-host cluster can read.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["ClusterError", "ExecutorRecord", "LocalCluster", "spark_home", "free_port", "process_group_members", "main"]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# A free port can be taken between choosing it and the JVM binding it (other test runs share
# the host): the daemon then exits (spark.port.maxRetries=0, no silent move to the next port)
# and is started again on other free ports, at most this many times.
BIND_ATTEMPTS = 3
STOP_TIMEOUT_SECONDS = 15.0
_PR_SET_PDEATHSIG = 1


class ClusterError(RuntimeError):
    """The cluster did not start, or did not stop cleanly; the message names the log to read."""


@dataclass(frozen=True)
class ExecutorRecord:
    """An executor a worker launched for an application (running or finished), and its log."""

    worker: str
    app: str
    executor: int
    finished: bool
    log: Path


def spark_home() -> Path:
    """The installed pyspark package folder: a Spark distribution (``bin/spark-class``, ``jars/``)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise ClusterError("pyspark is not installed (pip install -r requirements.txt)")
    return Path(list(spec.submodule_search_locations)[0])


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...), None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def process_group_members(pgid: int) -> list[int]:
    """Pids of the live (not zombie) processes in process group ``pgid``."""
    if not Path("/proc/self/stat").exists():  # not Linux: only whether the group exists can be told
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _proc_stat(int(entry))
            if fields and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
                members.append(int(entry))
    return members


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _die_with_parent_hook():
    """A ``preexec_fn`` that has the child signalled when the thread that started it dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the hook ran
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


@dataclass
class _Daemon:
    """One master or worker JVM (the leader of its process group)."""

    name: str
    build: Callable[[int, int], list[str]] = field(repr=False)  # (port, web UI port) -> spark-class arguments
    port: int
    web_port: int
    log_path: Path
    process: subprocess.Popen = field(repr=False)
    attempt: int = 1


class LocalCluster:
    """A standalone master and ``workers`` workers of ``cores`` cores and ``memory`` each, on one host.

    Use as a context manager, or :meth:`start` and :meth:`stop`. ``port`` and
    ``webui_port`` fix the master's ports (0: free ones); the workers always
    take free ports.
    """

    def __init__(self, directory: str | Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 host: str = "127.0.0.1", port: int = 0, webui_port: int = 0, start_timeout: float = 120.0):
        if workers < 1 or cores < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        self.directory = Path(directory).resolve()
        self.log_dir = self.directory / "logs"
        self.work_dir = self.directory / "work"
        self.worker_count = workers
        self.cores = cores
        self.memory = memory
        self.host = host
        self.start_timeout = start_timeout
        self._fixed_ports = (port, webui_port)
        self._master: _Daemon | None = None
        self._workers: list[_Daemon] = []

    # ------------------------------------------------------------------ addresses

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``: what ``SPARK_MASTER`` (or ``--master``) is set to."""
        return f"spark://{self.host}:{self._running_master().port}"

    @property
    def web_url(self) -> str:
        """The master's web UI; ``/json/`` below it is the state :meth:`state` reads."""
        return f"http://{self.host}:{self._running_master().web_port}"

    def _running_master(self) -> _Daemon:
        if self._master is None:
            raise ClusterError("the cluster is not running")
        return self._master

    def daemon_pids(self) -> dict[str, int]:
        """The pid of each daemon (``master``, ``worker-1``, ...): the leaders of the process groups that
        also hold the executors and their Python workers (what a benchmark charges CPU to)."""
        return {d.name: d.process.pid for d in [self._running_master(), *self._workers]}

    # ------------------------------------------------------------------ state

    def state(self) -> dict[str, Any]:
        """The master's JSON state: workers, active and completed applications."""
        return _get_json(f"{self.web_url}/json/")

    def applications(self, name: str | None = None) -> list[dict[str, Any]]:
        """Applications the master has registered (active, then completed), optionally by name."""
        state = self.state()
        return [app for app in state["activeapps"] + state["completedapps"] if name is None or app["name"] == name]

    def executors(self, app_id: str | None = None) -> list[ExecutorRecord]:
        """Executors the workers have launched (running and finished), optionally of one application."""
        records = []
        for worker in self.state()["workers"]:
            detail = _get_json(f"{worker['webuiaddress']}/json/")
            for key, finished in (("executors", False), ("finishedexecutors", True)):
                for executor in detail[key]:
                    if app_id is None or executor["appid"] == app_id:
                        log = self.work_dir / executor["appid"] / str(executor["id"]) / "stderr"
                        records.append(ExecutorRecord(worker["id"], executor["appid"], executor["id"], finished, log))
        return records

    # ------------------------------------------------------------------ start

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> "LocalCluster":
        """Start the master, then the workers; return once every worker has registered."""
        if self._master is not None:
            raise ClusterError("the cluster is already running")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            deadline = time.monotonic() + self.start_timeout
            self._master = self._spawn("master", self._master_command, self._fixed_ports)
            self._wait_until(self._master_alive, deadline, "the master")
            self._workers = [self._spawn(f"worker-{i}", self._worker_command)
                             for i in range(1, self.worker_count + 1)]
            self._wait_until(self._workers_registered, deadline, "the workers to register")
        except BaseException:
            self.stop()
            raise
        return self

    def _master_command(self, port: int, web_port: int) -> list[str]:
        return [MASTER_CLASS, "--host", self.host, "--port", str(port), "--webui-port", str(web_port)]

    def _worker_command(self, port: int, web_port: int) -> list[str]:
        return [WORKER_CLASS, self.master_url, "--cores", str(self.cores), "--memory", self.memory,
                "--host", self.host, "--port", str(port), "--webui-port", str(web_port),
                "--work-dir", str(self.work_dir)]

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SPARK_HOME"] = str(spark_home())
        env["SPARK_LOCAL_IP"] = self.host
        env.pop("SPARK_CONF_DIR", None)  # another installation's configuration is not this Spark's
        env["SPARK_DAEMON_JAVA_OPTS"] = (env.get("SPARK_DAEMON_JAVA_OPTS", "") + " -Dspark.port.maxRetries=0").strip()
        # No REST submission server: nothing here submits through it, and it would take the fixed port 6066.
        env["SPARK_MASTER_OPTS"] = (env.get("SPARK_MASTER_OPTS", "") + " -Dspark.master.rest.enabled=false").strip()
        return env

    def _spawn(self, name: str, build: Callable[[int, int], list[str]], ports: tuple[int, int] = (0, 0),
               attempt: int = 1) -> _Daemon:
        port, web_port = (p or free_port(self.host) for p in ports)
        args = build(port, web_port)
        log_path = self.log_dir / f"{name}.log"
        with open(log_path, "ab") as log:
            log.write(f"$ spark-class {' '.join(args)}\n".encode())
            log.flush()
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args], env=self._environment(), cwd=self.directory,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent_hook(),
            )
        return _Daemon(name, build, port, web_port, log_path, process, attempt)

    def _wait_until(self, ready: Callable[[], bool], deadline: float, what: str) -> None:
        while not ready():
            for daemon in [self._master, *self._workers]:
                if daemon is not None and daemon.process.poll() is not None:
                    self._respawn(daemon)
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {self.start_timeout:.0f} s waiting for {what}; "
                                   f"see the logs in {self.log_dir}")
            time.sleep(0.2)

    def _respawn(self, daemon: _Daemon) -> None:
        """Start an exited daemon again on other free ports if it lost a race for its port; else raise."""
        tail = daemon.log_path.read_text(errors="replace")[-3000:]
        lost_port = any(sign in tail.lower() for sign in ("address already in use", "could not bind", "failed to bind"))
        fixed = daemon is self._master and any(self._fixed_ports)
        if not lost_port or fixed or daemon.attempt >= BIND_ATTEMPTS:
            raise ClusterError(f"Spark {daemon.name} exited with code {daemon.process.returncode}; "
                               f"its log {daemon.log_path} ends:\n{tail}")
        replacement = self._spawn(daemon.name, daemon.build, attempt=daemon.attempt + 1)
        if daemon is self._master:
            self._master = replacement
        else:
            self._workers[self._workers.index(daemon)] = replacement

    def _master_alive(self) -> bool:
        try:
            return self.state().get("status") == "ALIVE"
        except (OSError, ValueError):
            return False

    def _workers_registered(self) -> bool:
        try:
            alive = {w["port"] for w in self.state()["workers"] if w["state"] == "ALIVE"}
        except (OSError, ValueError):
            return False
        return all(w.port in alive for w in self._workers)

    # ------------------------------------------------------------------ stop

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master; raise if a process survives.

        Each daemon's process group gets SIGTERM (the JVMs stop their
        executors), then SIGKILL after :data:`STOP_TIMEOUT_SECONDS`.
        Safe to call twice.
        """
        atexit.unregister(self.stop)
        workers, master = self._workers, self._master
        self._workers, self._master = [], None
        survivors = _stop_groups(workers) + _stop_groups([master] if master else [])
        if survivors:
            raise ClusterError(f"processes of the Spark cluster survived SIGKILL: {survivors}")


def _stop_groups(daemons: list[_Daemon]) -> list[int]:
    """SIGTERM the daemons' process groups, SIGKILL what is left after the timeout; return survivors."""

    def alive() -> list[int]:
        leaders = [d.process.pid for d in daemons if d.process.poll() is None]  # poll() reaps an exited leader
        return leaders + [pid for d in daemons for pid in process_group_members(d.process.pid)]

    for sig, grace in ((signal.SIGTERM, STOP_TIMEOUT_SECONDS), (signal.SIGKILL, 5.0)):
        for daemon in daemons:
            _signal_group(daemon.process.pid, sig)
        deadline = time.monotonic() + grace
        while alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not alive():
            return []
    return sorted(set(alive()))


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


# ---------------------------------------------------------------------- command line

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m streaming.spark.cluster",
        description="Run a Spark standalone cluster (a master and workers) on 127.0.0.1 until Ctrl-C; "
                    "point kwmonitor at it with the SPARK_MASTER it prints.",
    )
    parser.add_argument("--dir", default="var/spark-cluster", help="logs and executor work dirs (default var/spark-cluster)")
    parser.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    parser.add_argument("--memory", default="1g",
                        help="memory each worker offers its executors (default 1g, the size of one executor)")
    parser.add_argument("--port", type=int, default=0, help="master port (default: a free one)")
    parser.add_argument("--webui-port", type=int, default=0, help="master web UI port (default: a free one)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    cluster = LocalCluster(args.dir, workers=args.workers, cores=args.cores, memory=args.memory,
                           port=args.port, webui_port=args.webui_port)
    started = time.perf_counter()
    try:
        cluster.start()
    except ClusterError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"SPARK_MASTER={cluster.master_url}")
    print(f"master web UI: {cluster.web_url}  ({args.workers} workers up in {time.perf_counter() - started:.1f} s)")
    print(f"logs: {cluster.log_dir}")
    print("Ctrl-C stops the cluster.", flush=True)
    stop.wait()
    print("stopping...", flush=True)
    cluster.stop()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
