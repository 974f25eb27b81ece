"""The write stage's kernels: a tile's (row, col) from its sorted keys, from the runs of the tile it
transposes (a counting sort by column, which keeps rows sorted within each column), and its weights."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def _split(keys, s):
    rows = np.empty(keys.shape[0], dtype=np.int32)
    cols = np.empty(keys.shape[0], dtype=np.int32)
    for k in range(keys.shape[0]):
        rows[k] = keys[k] // s
        cols[k] = keys[k] % s
    return rows, cols


def split_keys(keys: np.ndarray, tile_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) as int32 of tile-local keys row * S + col."""
    return _split(np.asarray(keys), tile_size)


@njit(nogil=True, cache=True)
def _count_columns(keys, s, lo, hi, counts):
    for k in range(keys.shape[0]):
        c = keys[k] % s
        if lo <= c < hi:
            counts[c - lo + 1] += 1


@njit(nogil=True, cache=True)
def _scatter_columns(keys, s, lo, hi, slots, rows_of_columns):
    for k in range(keys.shape[0]):
        c = keys[k] % s
        if lo <= c < hi:
            rows_of_columns[slots[c - lo]] = keys[k] // s
            slots[c - lo] += 1


def transpose_runs(runs: list[np.ndarray], lo: int, hi: int, tile_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) as int32, sorted, of the transpose of the entries whose column is in [lo, hi), from
    sorted runs of distinct keys given in row order: entry (r, c) becomes (c, r)."""
    counts = np.zeros(hi - lo + 1, dtype=np.int64)
    runs = [np.asarray(run) for run in runs]
    for run in runs:
        _count_columns(run, tile_size, lo, hi, counts)
    slots = np.cumsum(counts)[:-1]
    cols = np.empty(int(counts.sum()), dtype=np.int32)
    for run in runs:
        _scatter_columns(run, tile_size, lo, hi, slots, cols)
    rows = np.repeat(np.arange(lo, hi, dtype=np.int32), counts[1:])
    return rows, cols


@njit(nogil=True, cache=True)
def _weights(rows, cols, row_scale, col_scale, row_base, col_base):
    vals = np.empty(rows.shape[0], dtype=np.float32)
    for k in range(rows.shape[0]):
        vals[k] = row_scale[row_base + rows[k]] * col_scale[col_base + cols[k]]
    return vals


def weights(
    rows: np.ndarray,
    cols: np.ndarray,
    row_scale: np.ndarray,
    col_scale: np.ndarray,
    row_base: int,
    col_base: int,
) -> np.ndarray:
    """float32 row_scale[row_base + rows] * col_scale[col_base + cols]."""
    return _weights(rows, cols, np.asarray(row_scale), np.asarray(col_scale), row_base, col_base)


def warm() -> None:
    keys = np.array([1, 2, 4], dtype=np.int64)
    rows, cols = split_keys(keys, 3)
    transpose_runs([keys], 0, 3, 3)
    scale = np.ones(3, dtype=np.float32)
    weights(rows, cols, scale, scale, 0, 0)
