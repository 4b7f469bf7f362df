"""The garbage collector's thresholds in processes that run the engine (the evaluators, ``python -m streaming``).

The engine holds many long-lived containers (the store, every lattice node's
sub-relation and index, the live results) and allocates short-lived ones for
each op, with no reference cycle among them. With CPython's default
thresholds (700, 10, 10) a collection of the oldest generation, which walks
every long-lived container, comes every few tens of thousands of
allocations: measured with 1,000 saved queries on the E-commerce stream it
took about a third of the op loop (benchmarks/results/README.md, "Many saved
queries"). Collections stay on, for the cycles libraries make, but rarely.
And a process that ends does not walk its heap once more: the interpreter's
last collection at exit took a sixth of a ``run-plan`` of 1,000 queries.
"""

from __future__ import annotations

import atexit
import gc

__all__ = ["ENGINE_THRESHOLDS", "for_engine_process"]

ENGINE_THRESHOLDS = (100_000, 50, 100)


def for_engine_process() -> None:
    """Collect the youngest generation every 100,000 allocations, the oldest 5,000 times less often,
    and nothing at exit (what is alive then is freed with the process)."""
    gc.set_threshold(*ENGINE_THRESHOLDS)
    atexit.register(gc.freeze)
