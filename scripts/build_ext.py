"""Compile the engine's hot modules with Cython, in place (``make`` runs this after installing the venv).

Each listed module is plain Python that runs as it is; a ``.pxd`` beside it
gives Cython the static types (Cython's pure-Python mode), so the compiled
extension and the source are one program, not two copies. Python imports
the extension when it is there; ``KWMONITOR_PURE_PYTHON=1`` makes it import
the sources instead (``streaming/__init__.py``), which the tests use to run
the engine's property tests both ways. Only what changed is recompiled.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the modules compiled, each with its .pxd (see streaming.COMPILED)
MODULES = [
    "streaming/window.py",
    "streaming/engine.py",
    "streaming/evaluate/results.py",
    "streaming/evaluate/shared_plan.py",
    "streaming/evaluate/subrelations.py",
    "streaming/evaluate/shared.py",
    "streaming/sharing/delivery.py",
    "streaming/sharing/classes.py",
    "streaming/sharing/regrouping.py",
    "streaming/sharing/timers.py",
    "streaming/sharing/plan_state.py",
    "streaming/sharing/engine.py",
]


def main() -> int:
    from Cython.Build import cythonize
    from setuptools import setup

    os.chdir(ROOT)
    # gcc 12 misreads Cython's casts of the bool singletons as out-of-bounds reads (-Warray-bounds)
    os.environ.setdefault("CFLAGS", "-Wno-array-bounds")
    extensions = cythonize(
        MODULES,
        language_level=3,
        compiler_directives={"annotation_typing": False},
        include_path=[str(ROOT)],
        build_dir="var/build/cython",
        quiet=True,
    )
    setup(
        name="kwmonitor-engine",
        ext_modules=extensions,
        script_args=["-q", "build_ext", "--inplace", "--build-temp", "var/build/temp"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
