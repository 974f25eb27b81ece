"""Compiled kernels of `gtool shard`'s hot loops (numba, `nogil`, cached on disk).

Each kernel is one pass over a chunk, a run or a tile that numpy would make in several, each with its own
temporary array; they release the GIL, so threads of one worker run them side by side. numba is slow to
import, so the modules that use a kernel import it inside the function that runs it: a parent process
whose tasks run in worker processes never loads numba, and each worker loads every kernel (`warm`) in a
task of its own, submitted first, while the parent prepares the run.
"""

from __future__ import annotations

import importlib

KERNELS = ("shuffle", "tiles", "randomfeatures", "rmat")
"""The kernels' modules, each with a `warm()` that loads its kernels."""


def warm() -> None:
    """Load (compiling on first use, from numba's cache afterwards) every kernel of the pipeline."""
    for name in KERNELS:
        importlib.import_module(f"{__name__}.{name}").warm()
