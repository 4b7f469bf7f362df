"""A throwaway PostgreSQL cluster with ``wal_level=logical``, for the capture's tests and the demo.

``initdb`` into a directory (as the ``postgres`` user when run as root,
PostgreSQL refuses root), ``pg_ctl start`` on a free port of 127.0.0.1 with
no Unix socket, trust authentication for local TCP only. The binaries are
found on ``PATH`` or in Debian's ``/usr/lib/postgresql/<version>/bin``.

    python -m streaming.capture.cluster start --dir var/pgsource   # prints the DSN; the server keeps running
    python -m streaming.capture.cluster stop --dir var/pgsource
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["ClusterError", "postgres_bindir", "LogicalCluster", "main"]

# The settings a capture needs, plus a few that keep a throwaway server light.
SERVER_SETTINGS = {
    "wal_level": "logical",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "listen_addresses": "127.0.0.1",
    "unix_socket_directories": "",
    "shared_buffers": "32MB",
    "max_connections": "40",
    "fsync": "off",
    "full_page_writes": "off",
}


class ClusterError(RuntimeError):
    """The cluster could not be made or started; the message says why."""


def postgres_bindir() -> Path:
    """Where ``initdb`` and ``pg_ctl`` are (PATH first, then Debian's newest installed version)."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent  # Debian links a few into /usr/local/bin; the rest sit beside it
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name)
                      if p.parent.parent.name.isdigit() else 0)
    if not versions:
        raise ClusterError("PostgreSQL's server binaries are not installed (initdb, pg_ctl): apt-get install postgresql")
    return versions[-1].parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LogicalCluster:
    """A cluster in ``directory`` (``data/``, ``server.log``, ``port``), started on a free port."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory).resolve()
        self.data = self.directory / "data"
        self.bindir = postgres_bindir()
        self._as_postgres = os.geteuid() == 0

    @property
    def port(self) -> int:
        return int((self.directory / "port").read_text())

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        proc = subprocess.run(command, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise ClusterError(f"{argv[0]} failed: {(proc.stderr or proc.stdout).strip()[-2000:]}")
        return proc

    def init(self) -> None:
        """Make the cluster if the directory holds none."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._as_postgres:
            owner = pwd.getpwnam("postgres")
            os.chown(self.directory, owner.pw_uid, owner.pw_gid)
        if (self.data / "PG_VERSION").exists():
            return
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync",
                  "--locale=C")

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def start(self) -> str:
        """Start it (made first if need be) unless it runs; returns its DSN."""
        self.init()
        if self.running():
            return self.dsn()
        port = _free_port()
        (self.directory / "port").write_text(str(port))
        options = " ".join(f"-c {name}='{value}'" for name, value in {**SERVER_SETTINGS, "port": port}.items())
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.directory / "server.log"), "-o", options,
                  "-w", "-t", "60", "start")
        return self.dsn()

    def stop(self) -> None:
        if (self.data / "PG_VERSION").exists() and self.running():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def __enter__(self) -> "LogicalCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streaming.capture.cluster",
                                     description="a throwaway PostgreSQL cluster with wal_level=logical")
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--dir", required=True, help="the cluster's directory (made on first start)")
    args = parser.parse_args(argv)
    cluster = LogicalCluster(args.dir)
    try:
        if args.action == "start":
            print(cluster.start())
        else:
            cluster.stop()
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
