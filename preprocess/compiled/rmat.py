"""R-MAT edges from their random draws in one compiled pass per group of bits, not numpy passes per bit."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def _set_bits(draws, first_bit, a, ab, abc, src, dst):
    for e in range(src.shape[0]):
        s, d = src[e], dst[e]
        for k in range(draws.shape[0]):
            u = draws[k, e]
            down = u >= ab
            right = (u >= a) ^ down ^ (u >= abc)
            s |= np.int64(down) << (first_bit + k)
            d |= np.int64(right) << (first_bit + k)
        src[e], dst[e] = s, d


def set_bits(
    draws: np.ndarray, first_bit: int, thresholds: tuple[np.uint16, ...], src: np.ndarray, dst: np.ndarray
) -> None:
    """Bits first_bit + k of every edge's (src, dst) from its draw draws[k, e] (uint16): the quadrant it
    falls in by the thresholds (a, a + b, a + b + c) * 2^16; down sets the src bit, right the dst bit."""
    a, ab, abc = thresholds
    _set_bits(draws, first_bit, a, ab, abc, src, dst)


def warm() -> None:
    ids = np.zeros(2, dtype=np.int64)
    set_bits(np.ones((1, 2), dtype=np.uint16), 0, tuple(np.uint16(t) for t in (1, 2, 3)), ids, ids.copy())
