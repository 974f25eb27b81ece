"""Python's cyclic garbage collector held off while a process starts, then told what lives for good.

Importing torch, numba, zarr or Dask makes some 200,000 objects that live as long as the process; every
full collection while they are made walks them all (0.45 s of a 2.1 s `gtool train` of a small graph).
So a process `hold`s collection while it starts and `settle`s where its work begins: what exists then is
frozen (left out of later collections) and collection resumes. Frozen before a fork, the parent's objects
are also left alone by the children's collections, which would copy the pages they share.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def hold() -> None:
    """No collection until `settle`: call it first thing in a process that imports heavy modules."""
    gc.disable()


def settle() -> None:
    """End a `hold`: freeze what exists and collect again from here. A no-op where collection was not held
    (a process gtool did not start, such as a test runner or an external Dask worker)."""
    if gc.isenabled():
        return
    gc.freeze()
    gc.enable()


@contextmanager
def paused() -> Iterator[None]:
    """No collection during late imports of a process that settled (numba, which only runs that use its
    kernels start): made while collection runs, they would cost what the start-up's did. What they make
    is not frozen: the run's own objects exist by then, and frozen, their cycles would never be freed. A
    no-op where nothing was settled (a test runner, a Python API user)."""
    if not gc.isenabled() or gc.get_freeze_count() == 0:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
