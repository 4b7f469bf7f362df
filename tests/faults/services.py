"""Services a fault test owns and breaks: its own redis-server, and a TCP proxy it can cut.

Never the shared servers: a test starts ``redis-server`` on a free port with
its data in a scratch directory (append-only file, fsync on every write, so
a restart keeps every acknowledged write), and reaches PostgreSQL through a
:class:`CuttableProxy` whose connections it can drop and refuse for a while.
"""

from __future__ import annotations

import selectors
import socket
import subprocess
import threading
import time
from pathlib import Path

import redis

from tests.browser.server import free_port

__all__ = ["OwnRedis", "CuttableProxy"]


class OwnRedis:
    """A redis-server of the test's own on a free port; :meth:`restart` stops and starts it on the same port."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--logfile", "redis.log"],
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

    def restart(self, down_for: float) -> float:
        """Stop, stay down ``down_for`` seconds, start again; returns how long it did not answer."""
        began = time.monotonic()
        self.stop()
        time.sleep(down_for)
        self.start()
        return time.monotonic() - began


class CuttableProxy:
    """A TCP proxy on a free port to ``target``; :meth:`cut` drops every connection and refuses new ones."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self._stopping.clear()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def cut(self) -> None:
        """Close the listener (new connections are refused) and every open connection."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            for a, b in self._pairs:
                for s in (a, b):
                    try:
                        s.close()
                    except OSError:
                        pass
            self._pairs.clear()
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    restore = start

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        peers: dict[socket.socket, socket.socket] = {}
        try:
            while not self._stopping.is_set():
                for key, _ in selector.select(timeout=0.1):
                    sock = key.fileobj
                    if sock is self._listener:
                        client, _ = self._listener.accept()
                        upstream = socket.create_connection(self.target)
                        for s in (client, upstream):
                            s.setblocking(False)
                            selector.register(s, selectors.EVENT_READ)
                        peers[client], peers[upstream] = upstream, client
                        with self._lock:
                            self._pairs.append((client, upstream))
                        continue
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        data = b""
                    other = peers.get(sock)
                    if not data or other is None:
                        for s in (sock, other):
                            if s is not None and s in peers:
                                selector.unregister(s)
                                peers.pop(s, None)
                                s.close()
                        continue
                    other.setblocking(True)
                    try:
                        other.sendall(data)
                    except OSError:
                        pass
                    finally:
                        other.setblocking(False)
        finally:
            selector.close()
