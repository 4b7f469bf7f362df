"""`make run` starts the web server again when it dies (scripts/keep_up.sh), stops it with itself, and gives up on
a command that cannot start."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEEP_UP = str(ROOT / "scripts" / "keep_up.sh")


def started_pids(record: Path, count: int, timeout: float = 30) -> list[int]:
    """The pids the command wrote at each of its starts, once there are ``count`` of them."""
    deadline = time.monotonic() + timeout
    while len(pids := [int(p) for p in record.read_text().split()] if record.exists() else []) < count:
        assert time.monotonic() < deadline, f"the command did not start {count} times: {pids}"
        time.sleep(0.05)
    return pids


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_killed_command_is_started_again_and_sigterm_stops_both(tmp_path):
    record = tmp_path / "pids"
    keeper = subprocess.Popen([KEEP_UP, "sh", "-c", f'echo $$ >> {record}; exec sleep 60'],
                              stderr=subprocess.PIPE, text=True)
    try:
        [first] = started_pids(record, 1)
        os.kill(first, signal.SIGKILL)
        second = started_pids(record, 2)[1]
        assert second != first and alive(second)
        keeper.send_signal(signal.SIGTERM)
        assert keeper.wait(timeout=10) == 128 + signal.SIGTERM  # the command's status: sleep ended by the SIGTERM
        assert not alive(second)
        assert "keep_up: sh exited with status 137 after" in keeper.stderr.read()
        assert len(started_pids(record, 2)) == 2
    finally:
        keeper.kill()
        keeper.wait()


def test_a_command_that_keeps_failing_at_its_start_is_given_up(tmp_path):
    record = tmp_path / "pids"
    done = subprocess.run([KEEP_UP, "sh", "-c", f"echo $$ >> {record}; exit 3"], capture_output=True, text=True,
                          timeout=30, env=dict(os.environ, KEEP_UP_QUICK_LIMIT="3"))
    assert done.returncode == 3 and len(started_pids(record, 3)) == 3
    assert done.stderr.splitlines()[-1] == "keep_up: sh exited with status 3 3 times in a row within 10 s of its start; not starting it again"
