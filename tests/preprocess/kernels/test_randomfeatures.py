"""Generated features: both forms of the kernel against the SplitMix64 definition written in numpy."""

from __future__ import annotations

import numpy as np

from gtool.preprocess.kernels.randomfeatures import GOLDEN, MIX1, MIX2, uniform_values


def numpy_uniform(rows: np.ndarray, f: int, seed: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = rows.astype(np.uint64)[:, None] * np.uint64(f) + np.arange(f, dtype=np.uint64)
        z += np.uint64(seed) * MIX2 + GOLDEN
        z = (z ^ (z >> np.uint64(30))) * MIX1
        z = (z ^ (z >> np.uint64(27))) * MIX2
        z ^= z >> np.uint64(31)
    return ((z >> np.uint64(40)).astype(np.float32) + np.float32(1)) / np.float32(1 << 24)


def test_values_are_splitmix64_bits():
    rows = np.array([0, 5, 1 << 33, 7, 5], dtype=np.int64)
    np.testing.assert_array_equal(uniform_values(rows, 13, 42, normalize=False), numpy_uniform(rows, 13, 42))


def test_normalized_rows_sum_to_one():
    values = uniform_values(np.arange(100), 64, 3, normalize=True)
    np.testing.assert_allclose(values.sum(axis=1), 1.0, rtol=1e-5)
    raw = uniform_values(np.arange(100), 64, 3, normalize=False)
    np.testing.assert_allclose(values, raw / raw.sum(axis=1, keepdims=True), rtol=1e-6)
