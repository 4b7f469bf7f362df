"""The standalone cluster of ``streaming.spark.cluster``: it starts, says where it is, and leaves nothing behind."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from streaming.spark.cluster import ClusterError, LocalCluster

from .on_cluster import processes_under

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def master_json(web_url: str) -> dict:
    with urllib.request.urlopen(f"{web_url}/json/", timeout=5) as response:
        return json.load(response)


def test_the_test_cluster_has_two_workers_of_one_core_and_1g(spark_cluster):
    state = spark_cluster.state()
    assert state["url"] == spark_cluster.master_url and state["status"] == "ALIVE"
    assert [(w["state"], w["cores"], w["memory"], w["host"]) for w in state["workers"]] == [("ALIVE", 1, 1024, "127.0.0.1")] * 2
    assert processes_under(spark_cluster.directory), "the census should see the running daemons"


def start_cli(tmp_path) -> tuple[subprocess.Popen, dict[str, str]]:
    """``python -m streaming.spark.cluster`` with one worker; its process and what it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "streaming.spark.cluster", "--workers", "1", "--dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    printed = {}
    for line in proc.stdout:
        if line.startswith("SPARK_MASTER="):
            printed["master"] = line.strip().partition("=")[2]
        elif line.startswith("master web UI: "):
            printed["web"] = line.split()[3]
        elif line.startswith("Ctrl-C"):
            return proc, printed
    pytest.fail(f"the cluster command exited with {proc.wait()} before it was up: {printed}")


def wait_until_gone(directory, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := processes_under(directory)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "sigkill"])
def test_make_cluster_prints_its_master_and_no_jvm_outlives_it(tmp_path, sig):
    proc, printed = start_cli(tmp_path)
    try:
        state = master_json(printed["web"])
        assert state["url"] == printed["master"] and state["aliveworkers"] == 1
        assert len(processes_under(tmp_path)) >= 2  # the master and the worker
        proc.send_signal(sig)
        output = proc.stdout.read()
        assert proc.wait(timeout=60) == (0 if sig == signal.SIGINT else -signal.SIGKILL)
        if sig == signal.SIGINT:
            assert output.splitlines()[-2:] == ["stopping...", "stopped"]
        # Killed outright, the cluster could not stop its daemons: they go when their parent dies.
        assert wait_until_gone(tmp_path, 30) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_master_port_in_use_is_a_clear_error_and_leaves_nothing_running(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = LocalCluster(tmp_path, workers=1, port=port)
        with pytest.raises(ClusterError, match=f"Spark master exited with code .*{tmp_path / 'logs' / 'master.log'}"):
            cluster.start()
    assert "Address already in use" in (tmp_path / "logs" / "master.log").read_text()
    assert processes_under(tmp_path) == []


def test_a_worker_whose_web_ui_port_was_taken_meanwhile_starts_again_on_other_ports(tmp_path, monkeypatch):
    """Another process can take a free port before the JVM binds it; the worker's web UI then fails ("Failed to
    bind ... WorkerUI", seen in CI) and the worker is started again on other free ports."""
    from streaming.spark import cluster as cluster_module

    original = cluster_module.free_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        chosen: list[int] = []

        def free_port(host: str = "127.0.0.1") -> int:
            chosen.append(taken.getsockname()[1] if len(chosen) == 3 else original(host))
            return chosen[-1]

        monkeypatch.setattr(cluster_module, "free_port", free_port)
        with LocalCluster(tmp_path, workers=1) as cluster:  # master port and web UI, worker port, then its web UI
            assert master_json(cluster.web_url)["aliveworkers"] == 1
    log = (tmp_path / "logs" / "worker-1.log").read_text()
    assert "Failed to bind" in log and log.count("$ spark-class") == 2
