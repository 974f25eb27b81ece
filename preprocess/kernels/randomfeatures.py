"""Generated features: SplitMix64 values of (seed, node, column), row by row; numpy's form here, numba's in
compiled/randomfeatures.py."""

from __future__ import annotations

import numpy as np

from gtool.preprocess.kernels import compiled_pays, forced
from gtool.store.values import SPLITMIX_GOLDEN, SPLITMIX_MIX1, SPLITMIX_MIX2

GOLDEN, MIX1, MIX2 = np.uint64(SPLITMIX_GOLDEN), np.uint64(SPLITMIX_MIX1), np.uint64(SPLITMIX_MIX2)


def uniform_values(rows: np.ndarray, num_features: int, seed: int, normalize: bool) -> np.ndarray:
    """float32 [len(rows), F]: value (i, k) = (top 24 bits of SplitMix64(rows[i] * F + k + seed * MIX2)
    + 1) / 2^24, in (0, 1]; with `normalize` each row divided by its sum (taken in float64, where it is
    exact: every value is a multiple of 2^-24)."""
    offset = np.uint64((seed * int(MIX2)) % (1 << 64))
    if compiled_pays(len(rows) * num_features):
        from gtool.preprocess.kernels.compiled import randomfeatures

        return randomfeatures.uniform(np.asarray(rows, dtype=np.int64), num_features, offset, normalize)
    base = np.asarray(rows, dtype=np.int64).astype(np.uint64) * np.uint64(num_features) + offset
    z = base[:, None] + np.arange(num_features, dtype=np.uint64) + GOLDEN
    z ^= z >> np.uint64(30)
    z *= MIX1
    z ^= z >> np.uint64(27)
    z *= MIX2
    z ^= z >> np.uint64(31)
    values = ((z >> np.uint64(40)).astype(np.float32) + np.float32(1.0)) * np.float32(1.0 / (1 << 24))
    if normalize:
        values /= values.sum(axis=1, dtype=np.float64).astype(np.float32)[:, None]
    return values


def warm() -> None:
    """Load numba's kernel of the generated features, both ways the pipeline calls it."""
    with forced(True):
        uniform_values(np.arange(2), 3, 0, True)
        uniform_values(np.arange(2), 3, 0, False)
