"""Generated features in one pass: SplitMix64 values of (seed, node, column), row by row."""

from __future__ import annotations

import numpy as np

from gtool.compiled import kernel
from gtool.store.values import SPLITMIX_GOLDEN, SPLITMIX_MIX1, SPLITMIX_MIX2

GOLDEN, MIX1, MIX2 = np.uint64(SPLITMIX_GOLDEN), np.uint64(SPLITMIX_MIX1), np.uint64(SPLITMIX_MIX2)


@kernel(nogil=True)
def uniform(rows, f, offset, normalize):
    values = np.empty((rows.shape[0], f), dtype=np.float32)
    scale = np.float32(1.0 / (1 << 24))
    for i in range(rows.shape[0]):
        base = np.uint64(rows[i]) * np.uint64(f) + offset
        total = 0.0
        for k in range(f):
            z = base + np.uint64(k) + GOLDEN
            z = (z ^ (z >> np.uint64(30))) * MIX1
            z = (z ^ (z >> np.uint64(27))) * MIX2
            z ^= z >> np.uint64(31)
            value = (np.float32(z >> np.uint64(40)) + np.float32(1.0)) * scale
            values[i, k] = value
            total += value
        if normalize:
            inverse = np.float32(total)
            for k in range(f):
                values[i, k] /= inverse
    return values
