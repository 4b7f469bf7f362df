"""One local Spark session for the whole test session (starting one costs ~15 s)."""

from __future__ import annotations

import logging
import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from streaming.spark.job import spark_session

    session = spark_session("local[2]", app_name="kwmonitor-tests")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit,
    # after pytest closed the captured streams: keep that INFO line out of the run's end
    logging.getLogger("py4j").setLevel(logging.WARNING)
