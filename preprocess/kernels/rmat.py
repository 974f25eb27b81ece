"""R-MAT edges from their random draws, a group of bits at a time; numpy's form here, numba's in
compiled/rmat.py."""

from __future__ import annotations

import numpy as np

from gtool.preprocess.kernels import compiled_pays, forced


def set_bits(
    draws: np.ndarray, first_bit: int, thresholds: tuple[np.uint16, ...], src: np.ndarray, dst: np.ndarray
) -> None:
    """Bits first_bit + k of every edge's (src, dst) from its draw draws[k, e] (uint16): the quadrant it
    falls in by the thresholds (a, a + b, a + b + c) * 2^16; down sets the src bit, right the dst bit."""
    a, ab, abc = thresholds
    if compiled_pays(draws.size):
        from gtool.preprocess.kernels.compiled import rmat

        rmat.set_bits(draws, first_bit, a, ab, abc, src, dst)
        return
    for k, draw in enumerate(draws):
        down = draw >= ab
        right = (draw >= a) ^ down ^ (draw >= abc)
        src |= down.astype(np.int64) << (first_bit + k)
        dst |= right.astype(np.int64) << (first_bit + k)


def warm() -> None:
    """Load numba's kernel of the R-MAT bits."""
    ids = np.zeros(2, dtype=np.int64)
    with forced(True):
        set_bits(np.ones((1, 2), dtype=np.uint16), 0, tuple(np.uint16(t) for t in (1, 2, 3)), ids, ids.copy())
