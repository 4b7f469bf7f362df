"""The engine's compiled modules: built by ``make``, and the same program as their Python source.

``scripts/build_ext.py`` compiles the modules of ``streaming.COMPILED`` with
Cython from their own source; the engine's property tests run here on the
compiled extensions and once more, in a subprocess, on the Python sources
(``KWMONITOR_PURE_PYTHON=1``).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import streaming

ROOT = Path(__file__).resolve().parents[2]
# the property tests that exercise the compiled modules against independent references
ENGINE_TESTS = [
    "tests/streaming/evaluate/test_shared.py",
    "tests/streaming/sharing/test_run_plan.py",
    "tests/streaming/sharing/test_plan_changes.py",
]


def test_each_compiled_module_is_its_extension_or_in_pure_mode_its_source():
    for name in streaming.COMPILED:
        module = importlib.import_module(name)
        suffix = ".py" if streaming.PURE_PYTHON else ".so"
        assert module.__file__ is not None and module.__file__.endswith(suffix), (name, module.__file__)


@pytest.mark.slow
@pytest.mark.skipif(streaming.PURE_PYTHON, reason="this is the run on the sources")
def test_the_engine_property_tests_pass_on_the_python_sources():
    env = {**os.environ, "KWMONITOR_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:django", "-p", "no:cacheprovider", "-q", "-x",
                           __file__, *ENGINE_TESTS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1]
