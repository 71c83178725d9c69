"""Python's cyclic garbage collector, tuned while the compiler and the analysis build.

Lowering and analysis build large trees of small frozen objects that all live until the model
is assembled (an interpolant of a wide square is a million ``ReLUUnit`` s, a token program's
analysis hundreds of thousands of IR nodes and value sets). The collector's first generation
is examined every 700 allocations by default, and each examination walks every young object:
on such a build it rescans the same survivors over and over. With the threshold at 10,000
(:data:`FIRST_GENERATION`) Tracr's sort_freq at T = 40 compiles 1.38× faster and analyses
1.10× faster, intrinsic_6 at ε = 1e-4 compiles 1.20× faster (BENCHMARKS.md, "Garbage
collector"); the same objects are built and freed, and the collector stays on (a cycle waits
10,000 allocations instead of 700).

:func:`fewer_collections` raises the threshold for the duration of a call (as a decorator on
``compile``, ``analyze`` and ``relower``) and restores the caller's afterwards; nested calls
leave it alone, and a caller that set a higher threshold keeps it. The setting is the
process's: two threads compiling at once may see one's restore during the other's build
(harmless: only speed changes).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Allocations between two examinations of the collector's first generation while building.
FIRST_GENERATION = 10_000


@contextmanager
def fewer_collections(first_generation: int | None = None) -> Iterator[None]:
    """The collector's first-generation threshold at least ``first_generation`` (by default
    :data:`FIRST_GENERATION`, read at each call) inside the block, the caller's setting
    restored after it."""
    if first_generation is None:
        first_generation = FIRST_GENERATION
    before = gc.get_threshold()
    if before[0] >= first_generation:
        yield
        return
    gc.set_threshold(first_generation, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
