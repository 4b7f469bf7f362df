"""Services a fault test owns and breaks: its own redis-server, PostgreSQL and web server.

Never the shared servers: a test starts ``redis-server`` on a free port with
its data in a scratch directory and the persistence settings of ``make run``
(``scripts/ensure_redis.sh``: none) unless it asks for others, kills it
(SIGKILL) and starts it again; and a throwaway PostgreSQL cluster of its own
(:class:`OwnPostgres`, ``initdb`` as the ``postgres`` user) that it crashes;
and the daphne it runs (``tests.browser.server.asgi_server``), found by its
port to be killed.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

import psycopg
import redis

from streaming.capture.cluster import postgres_bindir
from tests.browser.server import free_port

__all__ = ["MAKE_RUN_PERSISTENCE", "COMPOSE_PERSISTENCE", "OwnRedis", "OwnPostgres", "daphne_pid", "answers"]

#: what ``scripts/ensure_redis.sh`` starts redis-server with for ``make run``: no snapshot, no append-only file
MAKE_RUN_PERSISTENCE = ("--save", "", "--appendonly", "no")
#: what ``docker/compose.yaml`` starts it with: every write in the append-only file, fsynced before its reply
COMPOSE_PERSISTENCE = ("--save", "", "--appendonly", "yes", "--appendfsync", "always")


class OwnRedis:
    """A redis-server of the test's own on a free port, with ``persistence`` (redis-server options)."""

    def __init__(self, directory: Path, persistence: tuple[str, ...] = MAKE_RUN_PERSISTENCE) -> None:
        self.directory = directory
        self.persistence = persistence
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             *self.persistence, "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                if client.info("persistence")["loading"] == 0:
                    return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SHUTDOWN: the append-only file is flushed
            self.proc.wait(timeout=20)
        self.proc = None

    def crash(self, down_for: float, directory: Path | None = None, persistence: tuple[str, ...] | None = None) -> float:
        """SIGKILL the server, stay down ``down_for`` seconds, start it again on the same port (in ``directory``
        and with ``persistence`` if given: another instance in its place); returns how long it did not answer."""
        began = time.monotonic()
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)
        time.sleep(down_for)
        self.directory = directory or self.directory
        self.persistence = persistence or self.persistence
        self.start()
        return time.monotonic() - began


class OwnPostgres:
    """A PostgreSQL cluster of the test's own, on one free port across restarts, with the server's default
    durability (fsync on); :meth:`crash` kills it the two ways a server dies, :meth:`close` removes it.

    Its directory is a new one under the system's temporary directory, which the ``postgres`` user can
    reach (a test's ``tmp_path`` is private to the user running the tests).
    """

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="kw-crash-pg-"))
        self.data = self.directory / "data"
        self.port = free_port()
        self.bindir = postgres_bindir()

    def url(self, dbname: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}"

    def _run(self, *argv: str) -> None:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {(done.stderr or done.stdout).strip()[-2000:]}")

    def start(self) -> None:
        """Make the cluster if need be and start it; returns once it takes connections."""
        if not (self.data / "PG_VERSION").exists():
            if os.geteuid() == 0:
                owner = pwd.getpwnam("postgres")
                os.chown(self.directory, owner.pw_uid, owner.pw_gid)
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C")
        options = f"-c port={self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=40"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.directory / "server.log"), "-o", options,
                  "-w", "-t", "60", "start")

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def crash(self, how: str, down_for: float, while_down: Callable[[], None] = lambda: None) -> float:
        """Crash the server (``how``: "immediate", pg_ctl's immediate shutdown, or "sigkill" of the postmaster),
        call ``while_down``, stay down ``down_for`` seconds, start it again (crash recovery replays its WAL);
        returns how long it did not answer."""
        began = time.monotonic()
        if how == "immediate":
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        else:
            pid = self.postmaster_pid()
            os.kill(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
        while_down()
        time.sleep(down_for)
        deadline = time.monotonic() + 60
        while True:  # the killed postmaster's backends leave once they see it gone; until then it will not start
            try:
                self.start()
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        with psycopg.connect(self.url("postgres"), connect_timeout=10):
            pass
        return time.monotonic() - began

    def close(self) -> None:
        """Stop the server and remove the cluster."""
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie no reaper collected yet does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def daphne_pid(port: int) -> int:
    """The pid of the daphne serving ``port`` (not the supervising script, whose command line names it too)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = open(f"/proc/{entry}/cmdline").read().split("\0")
            except OSError:
                continue
            serving = any(a == "daphne" or a.endswith("/daphne") for a in argv) and str(port) in argv
            if serving and not any(a.endswith("keep_up.sh") for a in argv):
                return int(entry)
    raise LookupError(f"no daphne on port {port}")


def answers(base: str) -> bool:
    """Whether the web server at ``base`` answers a request (any HTTP status)."""
    try:
        urllib.request.urlopen(f"{base}/accounts/login/", timeout=2).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True
