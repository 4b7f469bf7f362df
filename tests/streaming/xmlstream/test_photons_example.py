"""docs/examples/photons is the workload module's DTD, mapping and q3, and its items give q3 results."""

from __future__ import annotations

import json
import subprocess
import sys

from streaming.workloads.photons import PAPER_QUERIES, PHOTONS_DTD, PHOTONS_MAPPING
from tests.examples import PHOTONS


def test_the_example_files_are_the_workloads():
    assert (PHOTONS / "photons.dtd").read_text() == PHOTONS_DTD
    assert json.loads((PHOTONS / "mapping.json").read_text()) == PHOTONS_MAPPING
    assert (PHOTONS / "q3.xq").read_text() == PAPER_QUERIES["q3"] + "\n"


def test_q3_has_results_on_the_example_items(tmp_path):
    subprocess.run([sys.executable, "-m", "streaming", "wxquery", "run", "--dtd", str(PHOTONS / "photons.dtd"),
                    "--subscriptions", str(PHOTONS), "--items", str(PHOTONS / "items.xml"),
                    "--out-dir", str(tmp_path)], check=True)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["items"] == 60 and stats["dead_letters"] == 0 and stats["results"]["q3"] >= 1
