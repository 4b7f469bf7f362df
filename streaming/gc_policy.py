"""The garbage collector's thresholds in processes that run the engine (the evaluators, ``python -m streaming``).

The engine holds many long-lived containers (the store, every lattice node's
sub-relation and index, the live results) and allocates short-lived ones for
each op, with no reference cycle among them. With CPython's default
thresholds (700, 10, 10) a collection of the oldest generation, which walks
every long-lived container, comes every few tens of thousands of
allocations: measured with 1,000 saved queries on the E-commerce stream it
took about a third of the op loop (benchmarks/results/README.md, "Many saved
queries"). Collections stay on, for the cycles libraries make, but rarely.
"""

from __future__ import annotations

import gc

__all__ = ["ENGINE_THRESHOLDS", "use_engine_thresholds"]

ENGINE_THRESHOLDS = (100_000, 50, 100)


def use_engine_thresholds() -> None:
    """Collect the youngest generation every 100,000 allocations, the oldest 5,000 times less often."""
    gc.set_threshold(*ENGINE_THRESHOLDS)
