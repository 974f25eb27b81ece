"""Reading a band of node rows (features, labels, splits) into a padded array, one block of rows at a time."""

from __future__ import annotations

import numpy as np
import zarr

from gtool.geometry.bands import Band
from gtool.store.chunks import block_rows, read_checked


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
