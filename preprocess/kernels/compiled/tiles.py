"""The write stage's kernels: a tile's (row, col) from its sorted keys, from the runs of the tile it
transposes (a counting sort by column, which keeps rows sorted within each column), and its weights."""

from __future__ import annotations

import numpy as np

from gtool.compiled import kernel


@kernel(nogil=True)
def split(keys, s):
    rows = np.empty(keys.shape[0], dtype=np.int32)
    cols = np.empty(keys.shape[0], dtype=np.int32)
    for k in range(keys.shape[0]):
        rows[k] = keys[k] // s
        cols[k] = keys[k] % s
    return rows, cols


@kernel(nogil=True)
def count_columns(keys, s, lo, hi, counts):
    for k in range(keys.shape[0]):
        c = keys[k] % s
        if lo <= c < hi:
            counts[c - lo + 1] += 1


@kernel(nogil=True)
def scatter_columns(keys, s, lo, hi, slots, rows_of_columns):
    for k in range(keys.shape[0]):
        c = keys[k] % s
        if lo <= c < hi:
            rows_of_columns[slots[c - lo]] = keys[k] // s
            slots[c - lo] += 1


@kernel(nogil=True)
def weigh(rows, cols, row_scale, col_scale, row_base, col_base):
    vals = np.empty(rows.shape[0], dtype=np.float32)
    for k in range(rows.shape[0]):
        vals[k] = row_scale[row_base + rows[k]] * col_scale[col_base + cols[k]]
    return vals
