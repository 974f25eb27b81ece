"""Compiled kernels of `gtool shard`'s hot loops (numba, `nogil`, cached on disk).

Each kernel is one pass over a chunk, a run or a tile that numpy would make in several (each with its
own temporary array): the shuffle's partition-and-scatter, deduplication with its row counts, a tile's
entries and weights, the transpose of a tile by counting sort, the generated features, R-MAT edges. They
release the GIL, so threads of one worker run them side by side too.

numba takes 0.5-1 s to import and to load its first cached kernel. The modules that use a kernel import it
inside the function that runs it, so a parent process whose tasks run in worker processes never loads
numba; each worker loads every kernel (`warm`) in a task of its own, submitted first, while the parent
prepares the run.
"""

from __future__ import annotations


def warm() -> None:
    """Load (compiling on first use, from numba's cache afterwards) every kernel of the pipeline."""
    from gtool.preprocess.compiled import features, rmat, shuffle, tiles

    for module in (shuffle, tiles, features, rmat):
        module.warm()
