"""The write stage's kernels: a tile's (row, col) from its sorted keys, from the runs of the tile it
transposes (sorted by column, rows kept sorted within each column), and its weights; numpy's forms here,
numba's in compiled/tiles.py."""

from __future__ import annotations

import numpy as np

from gtool.preprocess.kernels import compiled_pays, forced


def split_keys(keys: np.ndarray, tile_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) as int32 of tile-local keys row * S + col."""
    if compiled_pays(keys.shape[0]):
        from gtool.preprocess.kernels.compiled import tiles

        return tiles.split(np.asarray(keys), tile_size)
    rows, cols = np.divmod(np.asarray(keys), tile_size)
    return rows.astype(np.int32), cols.astype(np.int32)


def transpose_runs(runs: list[np.ndarray], lo: int, hi: int, tile_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) as int32, sorted, of the transpose of the entries whose column is in [lo, hi), from
    sorted runs of distinct keys given in row order: entry (r, c) becomes (c, r)."""
    if compiled_pays(sum(run.shape[0] for run in runs)):
        from gtool.preprocess.kernels.compiled import tiles

        counts = np.zeros(hi - lo + 1, dtype=np.int64)
        runs = [np.asarray(run) for run in runs]
        for run in runs:
            tiles.count_columns(run, tile_size, lo, hi, counts)
        slots = np.cumsum(counts)[:-1]
        cols = np.empty(int(counts.sum()), dtype=np.int32)
        for run in runs:
            tiles.scatter_columns(run, tile_size, lo, hi, slots, cols)
        return np.repeat(np.arange(lo, hi, dtype=np.int32), counts[1:]), cols
    keys = np.concatenate([np.asarray(run, dtype=np.int64) for run in [np.zeros(0), *runs]])
    rows_of, columns = np.divmod(keys, tile_size)
    inside = (columns >= lo) & (columns < hi)
    rows_of, columns = rows_of[inside], columns[inside]
    order = np.argsort(columns, kind="stable")
    counts = np.bincount(columns - lo, minlength=hi - lo)
    return np.repeat(np.arange(lo, hi, dtype=np.int32), counts), rows_of[order].astype(np.int32)


def weights(
    rows: np.ndarray,
    cols: np.ndarray,
    row_scale: np.ndarray,
    col_scale: np.ndarray,
    row_base: int,
    col_base: int,
) -> np.ndarray:
    """float32 row_scale[row_base + rows] * col_scale[col_base + cols] (the product in the scales' type)."""
    if compiled_pays(rows.shape[0]):
        from gtool.preprocess.kernels.compiled import tiles

        return tiles.weigh(rows, cols, np.asarray(row_scale), np.asarray(col_scale), row_base, col_base)
    row_at, col_at = row_base + rows.astype(np.int64), col_base + cols.astype(np.int64)
    product = np.asarray(row_scale)[row_at] * np.asarray(col_scale)[col_at]
    return product.astype(np.float32)


def warm() -> None:
    """Load numba's kernels of the write stage, called as the pipeline calls them."""
    keys = np.array([1, 2, 4], dtype=np.int64)
    scale = np.ones(3, dtype=np.float32)
    with forced(True):
        rows, cols = split_keys(keys, 3)
        transpose_runs([keys], 0, 3, 3)
        weights(rows, cols, scale, scale, 0, 0)
