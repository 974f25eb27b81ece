"""Reading node rows (features, labels, splits) into a padded array: a band, one block of rows at a time, or
a mini-batch step's rows in one selection."""

from __future__ import annotations

import numpy as np
import zarr

from gtool.errors import DamagedChunkError
from gtool.geometry.bands import Band
from gtool.store.chunks import (
    block_rows,
    damaged_chunk_error,
    missing_chunks_text,
    read_checked,
    stored_absent,
)


def read_band(
    array: zarr.Array,
    rows: Band,
    cols: Band | None,
    fill: int | float,
    every_chunk: bool = True,
    where: str | None = None,
) -> tuple[np.ndarray, int]:
    """array[real rows of `rows`, real columns of `cols`], padded to rows.size x cols.size with `fill`,
    and the number of bytes read.

    cols None keeps every trailing dimension. Only the band is read (zarr slicing), in chunk-aligned
    blocks, into the output, so the temporaries are one block whatever the band size. With `every_chunk`
    (StoreMeta.every_chunk) a missing chunk is damage.
    """
    trailing = tuple(array.shape[1:]) if cols is None else (cols.size,)
    shape = (rows.size, *trailing)
    out = np.zeros(shape, dtype=array.dtype) if fill == 0 else np.full(shape, fill, dtype=array.dtype)
    source_cols = () if cols is None else (slice(cols.start, cols.stop),)
    target_cols = () if cols is None else (slice(0, cols.real),)
    width = int(np.prod(trailing, dtype=np.int64)) if cols is None else cols.real
    if rows.real == 0 or width == 0:
        return out, 0
    step = block_rows(array)
    first = rows.start
    while first < rows.stop:
        last = min((first // step + 1) * step, rows.stop)
        target = (slice(first - rows.start, last - rows.start), *target_cols)
        out[target] = read_checked(array, (slice(first, last), *source_cols), where, every_chunk=every_chunk)
        first = last
    return out, rows.real * width * array.dtype.itemsize


def read_rows(
    array: zarr.Array, rows: np.ndarray, cols: Band, every_chunk: bool = True, where: str | None = None
) -> tuple[np.ndarray, int]:
    """array[rows, real columns of `cols`] for ascending positions `rows`, zero-padded to len(rows) x
    cols.size (a copy only where there is padding), in one orthogonal selection (zarr decodes each chunk
    the rows touch once), and the number of bytes read. With `every_chunk` a missing chunk is damage
    (looked up only for chunks whose selected rows are all zero)."""
    if rows.shape[0] == 0 or cols.real == 0:
        return np.zeros((rows.shape[0], cols.size), dtype=array.dtype), 0
    try:
        values = np.asarray(array.oindex[rows, cols.start : cols.stop])
    except Exception as exc:  # as read_checked: zarr reports a damaged chunk as ValueError or a codec's
        span = (slice(int(rows[0]), int(rows[-1]) + 1), slice(cols.start, cols.stop))
        raise damaged_chunk_error(array, span, exc, where) from None
    out = values if cols.real == cols.size else np.pad(values, ((0, 0), (0, cols.size - cols.real)))
    if every_chunk and (absent := absent_row_chunks(array, rows, values, cols)):
        raise DamagedChunkError(f"{where + ': ' if where else ''}{missing_chunks_text(array, absent)}")
    return out, rows.shape[0] * cols.real * array.dtype.itemsize


def absent_row_chunks(array: zarr.Array, rows: np.ndarray, values: np.ndarray, cols: Band) -> list:
    """The chunks of `rows` x `cols` whose selected values are all the fill value and that the store does
    not hold (whole-array passes; a store lookup only for those all-fill chunks)."""
    chunk_rows, chunk_cols = int(array.chunks[0]), int(array.chunks[1])
    row_chunk = rows // chunk_rows
    filled = ~np.all(values == array.fill_value, axis=1)
    chunks, first = np.unique(row_chunk, return_index=True)
    suspect = chunks[np.add.reduceat(filled, first) == 0]
    col_chunks = range(cols.start // chunk_cols, -(-cols.stop // chunk_cols))
    return stored_absent(array, [(int(r), c) for r in suspect for c in col_chunks])
