"""kwmonitor's engine: continuous keyword search over relational streams.

Pure Python; no Django import anywhere below this package. Spark lives in
``streaming.spark`` and only drives the engine.

The modules of :data:`COMPILED` are also compiled with Cython
(``scripts/build_ext.py``, from the same source and a ``.pxd`` of static
types); Python imports the compiled extension when it is there. With
``KWMONITOR_PURE_PYTHON=1`` in the environment they are imported from their
Python source instead (the tests run the engine both ways).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["COMPILED", "PURE_PYTHON"]

#: modules with a compiled extension beside their source
COMPILED = (
    "streaming.window",
    "streaming.engine",
    "streaming.evaluate.results",
    "streaming.evaluate.shared_plan",
    "streaming.evaluate.subrelations",
    "streaming.evaluate.shared",
    "streaming.sharing.delivery",
    "streaming.sharing.classes",
    "streaming.sharing.regrouping",
    "streaming.sharing.timers",
    "streaming.sharing.plan_state",
    "streaming.sharing.engine",
)
PURE_PYTHON = os.environ.get("KWMONITOR_PURE_PYTHON") == "1"


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Finds the modules of :data:`COMPILED` as their ``.py`` source, never as an extension."""

    def find_spec(self, fullname: str, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname not in COMPILED:
            return None
        for entry in path or ():
            source = Path(entry) / f"{fullname.rpartition('.')[2]}.py"
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


if PURE_PYTHON:
    sys.meta_path.insert(0, _SourceFirst())
