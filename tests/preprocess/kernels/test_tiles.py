"""The write-stage kernels against plain numpy: split keys, transposed runs, weights."""

from __future__ import annotations

import numpy as np

from gtool.preprocess.kernels.tiles import split_keys, transpose_runs, weights

S = 300


def sorted_distinct_keys(seed: int, count: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.unique(rng.integers(0, S, count) * S + rng.integers(0, S, count))


def test_split_keys():
    keys = sorted_distinct_keys(0, 5000)
    rows, cols = split_keys(keys, S)
    np.testing.assert_array_equal(rows, keys // S)
    np.testing.assert_array_equal(cols, keys % S)
    assert rows.dtype == cols.dtype == np.int32


def test_transpose_runs_sorts_by_column_then_row():
    keys = sorted_distinct_keys(1, 20000)
    runs = np.split(keys, [3000, 3001, 12000])
    for lo, hi in [(0, S), (0, 1), (17, 180), (299, 300)]:
        rows, cols = transpose_runs(runs, lo, hi, S)
        r, c = keys // S, keys % S
        inside = (c >= lo) & (c < hi)
        want = np.sort(c[inside] * S + r[inside])
        np.testing.assert_array_equal(rows.astype(np.int64) * S + cols, want)
        assert rows.dtype == cols.dtype == np.int32


def test_transpose_runs_empty():
    rows, cols = transpose_runs([np.zeros(0, dtype=np.int64)], 0, S, S)
    assert rows.size == cols.size == 0


def test_weights():
    rng = np.random.default_rng(2)
    row_scale, col_scale = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    rows, cols = rng.integers(0, 200, 500).astype(np.int32), rng.integers(0, 300, 500).astype(np.int32)
    got = weights(rows, cols, row_scale, col_scale, 600, 100)
    np.testing.assert_array_equal(got, row_scale[600 + rows] * col_scale[100 + cols])
    assert got.dtype == np.float32
