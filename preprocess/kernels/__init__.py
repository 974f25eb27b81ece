"""`gtool shard`'s hot loops, each in two forms that give the same bits: numba's (compiled/: one pass,
the GIL released, but about 0.4 s to start in every process that loads it) and numpy's (the modules here,
which also choose). A call takes numba's form once numba is loaded in its process or when the call is big
enough to pay for the start; a run with enough edges has every worker load numba first, while the parent
prepares (`warm`). So a run of a few thousand edges never starts numba, and a large one always does.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager

COMPILE_AT = 1_000_000
"""Elements of work (one call's, or a run's estimated edge entries) from which numba's form pays for its
start: numpy's costs about 0.25 us more per entry summed over the stages (rmat:18:8 on one worker, 4.2M
entries: 2.1 s against 1.0 s), against numba's start of about 0.4 s in every process."""

KERNELS = ("shuffle", "tiles", "randomfeatures", "rmat")
"""The kernels' modules, here and in compiled/, each with a `warm()` (here) that loads numba's kernels."""

_forced: bool | None = None


def compiled_pays(elements: int) -> bool:
    """Whether work of `elements` elements takes numba's form in this process (see the module)."""
    if _forced is not None:
        return _forced
    return "numba" in sys.modules or elements >= COMPILE_AT


@contextmanager
def forced(compiled: bool) -> Iterator[None]:
    """Every call in this process takes one form (numba's if `compiled`): to compare the two."""
    global _forced
    before, _forced = _forced, compiled
    try:
        yield
    finally:
        _forced = before


def warm() -> None:
    """Load every numba kernel of the pipeline (compiling on first use, from numba's cache afterwards)."""
    for name in KERNELS:
        importlib.import_module(f"{__name__}.{name}").warm()
