"""An evaluator's log starts clean: no warning from PySpark about the pandas it runs with."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# What PySpark runs at start-up and in every pandas/Arrow path (pyspark.testing.utils, pyspark.sql.pandas):
# it warns (FutureWarning) on a pandas it does not fully support.
PYSPARK_CHECK = "from pyspark.sql.pandas.utils import require_minimum_pandas_version as check; check()"


def test_requirements_pin_a_pandas_pyspark_supports():
    pinned = re.search(r"^pandas==(\d+)\.(\d+)\.(\d+)$", (ROOT / "requirements.txt").read_text(), flags=re.M)
    assert pinned, "requirements.txt pins pandas"
    assert (2, 2, 0) <= tuple(map(int, pinned.groups())) < (3, 0, 0)  # PySpark 4.3: at least 2.2.0, below 3


def test_pyspark_takes_the_installed_pandas_without_a_warning():
    proc = subprocess.run([sys.executable, "-W", "error", "-c", PYSPARK_CHECK], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr.strip().splitlines()[-1:]
