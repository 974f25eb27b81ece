"""R-MAT edges from their random draws in one compiled pass per group of bits, not numpy passes per bit."""

from __future__ import annotations

import numpy as np

from gtool.compiled import kernel


@kernel(nogil=True)
def set_bits(draws, first_bit, a, ab, abc, src, dst):
    for e in range(src.shape[0]):
        s, d = src[e], dst[e]
        for k in range(draws.shape[0]):
            u = draws[k, e]
            down = u >= ab
            right = (u >= a) ^ down ^ (u >= abc)
            s |= np.int64(down) << (first_bit + k)
            d |= np.int64(right) << (first_bit + k)
        src[e], dst[e] = s, d
