"""Spark for the tests: one Spark session at a time per test process, and a standalone cluster.

A process holds one SparkContext, so :class:`SparkSessions` keeps the session
of one master and replaces it when a test asks for another (a cold session
takes 7-15 s), and the tests on the cluster run last. The cluster (a master
and two workers of one core and 1 GB) is started once per test session, by
the first test that needs it.
"""

from __future__ import annotations

import logging
import os
import sys

import pytest

from streaming.spark.cluster import LocalCluster

from .on_cluster import SparkMaster, processes_under

LOCAL_MASTER = "local[2]"


def _on_cluster(item) -> bool:
    callspec = getattr(item, "callspec", None)
    return "spark_cluster" in item.fixturenames or (callspec is not None and callspec.params.get("spark_master") == "cluster")


@pytest.hookimpl(trylast=True)  # after pytest's own grouping by session-scoped parameters
def pytest_collection_modifyitems(items):
    """Run the tests on the cluster last: the cluster runs only then, and the test process
    starts a local session once, then a cluster session once."""
    items.sort(key=_on_cluster)


class SparkSessions:
    """The test process's Spark session, on one master at a time."""

    def __init__(self):
        self.master: str | None = None
        self.session = None

    def get(self, master: str):
        """The session on ``master``, stopping the session on another master first."""
        from streaming.spark.job import spark_session

        if self.master != master:
            self.close()
            self.session = spark_session(master, app_name="kwmonitor-tests")
            self.master = master
        return self.session

    def close(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.master = self.session = None


@pytest.fixture(scope="session")
def spark_sessions():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    sessions = SparkSessions()
    yield sessions
    sessions.close()
    # Close the gateway to the driver JVM now, while pytest still captures the output: left to the
    # interpreter's exit, py4j's finalizer thread and __del__ methods would talk to a JVM already
    # gone and log tracebacks to streams pytest has closed. (Its threads report the closing at INFO.)
    from pyspark import SparkContext

    logging.getLogger("py4j").setLevel(logging.WARNING)
    if SparkContext._gateway is not None:
        SparkContext._gateway.shutdown()
        SparkContext._gateway = SparkContext._jvm = None


@pytest.fixture
def spark(spark_sessions):
    """The local[2] session."""
    return spark_sessions.get(LOCAL_MASTER)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory, spark_sessions):
    """A standalone master and two workers (one core, 1 GB each) on 127.0.0.1, for the test session."""
    directory = tmp_path_factory.mktemp("spark-cluster")
    with LocalCluster(directory, workers=2, cores=1, memory="1g") as cluster:
        yield cluster
        if spark_sessions.master == cluster.master_url:  # its driver goes before the cluster does
            spark_sessions.close()
    assert not processes_under(directory), "processes of the test cluster outlived it"


@pytest.fixture(scope="session", params=["local", "cluster"])
def spark_master(request) -> SparkMaster:
    """A test using it runs on local[2] and on the standalone cluster."""
    if request.param == "local":
        return SparkMaster(LOCAL_MASTER)
    cluster = request.getfixturevalue("spark_cluster")
    return SparkMaster(cluster.master_url, cluster)


@pytest.fixture
def spark_on_master(spark_sessions, spark_master):
    """The test process's Spark session on ``spark_master``."""
    return spark_sessions.get(spark_master.url)
