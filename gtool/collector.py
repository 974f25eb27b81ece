"""Python's cyclic garbage collector held off while a process starts, then told what lives for good.

A command imports torch, numba, zarr or Dask before it works: hundreds of thousands of objects that live
as long as the process. With the collector on, every full collection walks all of them, and starting up
runs several: a quarter of a short command's time (0.45 s of `gtool train`'s 2.1 s on a small graph). So
a process holds collection off while it starts (`hold`), and `settle`s where its steady work begins:
what exists then is frozen (kept out of every later collection; it lives on anyway) and collection
resumes for what the work makes. Frozen before a fork, the parent's objects are also left alone by the
children's collections, which would otherwise copy the pages they share (Python's gc documentation).
"""

from __future__ import annotations

import gc


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
