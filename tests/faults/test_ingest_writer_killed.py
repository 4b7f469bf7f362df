"""A writer SIGKILLed in the middle of storing a body with an idempotency key: the body sent again is stored once.

A child process takes a turn with a key and stores a body, stopping (and
saying so) at one of the two moments a kill can fall between: after the
seqs and the receipt and before the ops are visible (the landing file is
not placed), or after the ops are stored and before the answer is
recorded. The test SIGKILLs it there, as the web server dies under an
ingest request, and sends the body again with the same key: stored once in
both cases, and the lock the dead writer held only delays the retry.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streaming import sources
from streaming.bus import Keys

pytestmark = pytest.mark.redis

ROOT = Path(__file__).resolve().parents[2]
OPS = [f'{{"op":"insert","relation":"R","tuple":{{"id":{i}}},"ts":{i}}}' for i in range(3)]
LOCK_SECONDS = 1.0

CHILD = textwrap.dedent("""
    import sys, time
    from streaming import bus, sources
    url, directory, kind, moment = sys.argv[1:5]
    writer = sources.LandingWriter(bus.connect(url), 3, directory) if kind == "landing" \\
        else sources.RedisStreamWriter(bus.connect(url), 3)
    writer.lock_seconds = {lock}

    def stop(*args, **kwargs):
        print("stopped", flush=True)
        time.sleep(60)

    if moment == "before-place":
        sources.LandingWriter.place = stop
    with writer.turn("body-1") as turn:
        turn.store({ops!r}, 2.0, "digest")
    stop()  # stored, the answer not recorded yet
""").format(lock=LOCK_SECONDS, ops=OPS)


def killed_at(redis_url: str, directory: Path, kind: str, moment: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, redis_url, str(directory), kind, moment], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "stopped"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=10)


@pytest.mark.parametrize("kind,moment", [("landing", "before-place"), ("landing", "after-store"),
                                         ("redis", "after-store")])
def test_a_body_sent_again_after_its_writer_was_killed_is_stored_once(redis_client, redis_url, tmp_path, kind, moment):
    directory = tmp_path / "3"
    killed_at(redis_url, directory, kind, moment)
    writer = sources.LandingWriter(redis_client, 3, directory) if kind == "landing" \
        else sources.RedisStreamWriter(redis_client, 3)
    writer.lock_seconds = LOCK_SECONDS
    with writer.turn("body-1") as turn:  # waits for the dead writer's lock to expire
        if moment == "before-place":
            assert turn.previous is None  # its ops never became visible: store the body
            turn.store(OPS, 2.0, "digest")
        else:
            assert turn.previous == sources.Receipt("digest", 0, len(OPS))  # stored: the retry stores nothing
    if kind == "landing":
        stored = [sources.split_seq(line)[1] for line in sources.read_landing(directory)]
    else:
        stored = [sources.split_seq(line)[1] for _, line in sources.read_redis_stream(redis_client, Keys.stream_ops(3), "0-0")]
    assert [op["tuple"]["id"] for op in stored] == [0, 1, 2]
