"""How a process that runs the engine tunes the interpreter (the evaluators, ``python -m streaming``).

**The garbage collector.**
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

**The youngest generation's size.** A young collection walks every
container allocated since the last one that is still alive, and reads the
header of everything each refers to: objects the op path made long before
and has not touched since, so the walk is mostly cache misses. Fewer, larger
walks pay: a young collection every 1,000,000 allocations instead of 100,000
(the op loop's one walk at 100 queries and four at 1,000 on the held-out
stream: none) cut the 100-query run's last-level misses by 9 % and its
instructions by 1.5 %, with the same peak memory, as the op path makes no
cyclic garbage (benchmarks/results/README.md, "the youngest generation");
every 10,000 had been worse than 100,000.

**Building what lives long.** Setting up a plan (the shared lattice's tens of
thousands of nodes, their tables and sub-relations) allocates hundreds of
thousands of containers that all stay alive. Each young collection during the
set-up walks those made since the last one and every object they refer to only
to find them alive, and the first collection after it walks the rest: at 1,000
saved queries, with a young collection every 100,000 allocations, these walks
had 14 % of the process's last-level read misses (benchmarks/results/README.md,
"the plan handed to the oldest generation").
:func:`building_long_lived` runs such a build with the collector paused and
hands what it built straight to the oldest generation, which only a full
collection walks.

**One BLAS thread.** numpy (the selection constructs' vectorised evaluation)
starts OpenBLAS's thread pool, whose idle threads spin: 2 % of a ``run-plan``'s
CPU time went to them. The engine does no linear algebra.
"""

from __future__ import annotations

import atexit
import gc
import os
from contextlib import contextmanager
from typing import Iterator

__all__ = ["ENGINE_THRESHOLDS", "building_long_lived", "collector_paused", "for_engine_process"]

ENGINE_THRESHOLDS = (1_000_000, 50, 100)


def for_engine_process() -> None:
    """Collect the youngest generation every 1,000,000 allocations, the oldest 5,000 times less often,
    and nothing at exit (what is alive then is freed with the process); one OpenBLAS thread, unless
    the environment says otherwise (before numpy is imported)."""
    gc.set_threshold(*ENGINE_THRESHOLDS)
    atexit.register(gc.freeze)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run a block with the cyclic collector paused; afterwards it is on again if it was before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def building_long_lived() -> Iterator[None]:
    """Run a block that builds long-lived containers with the collector paused, then move every
    tracked object to the oldest generation (``gc.freeze`` then ``gc.unfreeze``: two list splices,
    and the young generation's count starts afresh). Nothing is kept from collection: a cycle that
    was already garbage waits for the next full collection instead of a young one."""
    with collector_paused():
        try:
            yield
        finally:
            gc.freeze()
            gc.unfreeze()
