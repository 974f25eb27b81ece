"""The CPU passes of mini-batch cuts (`cut`), numba's: GIL-free, so a cut runs beside the training step. A
module of their own, imported when a CPU cut first runs: a process that never cuts never imports numba."""

from __future__ import annotations

import numpy as np

from gtool.compiled import kernel


@kernel(nogil=True)
def transposed(rows, cols, values, count):
    """(pointers, rows, values) of the COO entries (rows, cols, values) in column order, stable."""
    pointers = np.zeros(count + 1, dtype=np.int64)
    for column in cols:
        pointers[column + 1] += 1
    for column in range(count):
        pointers[column + 1] += pointers[column]
    placed = pointers[:-1].copy()
    out_rows = np.empty_like(rows)
    out_values = np.empty_like(values)
    for entry in range(cols.shape[0]):
        at = placed[cols[entry]]
        out_rows[at] = rows[entry]
        out_values[at] = values[entry]
        placed[cols[entry]] = at + 1
    return pointers, out_rows, out_values


@kernel(nogil=True)
def cut_entries(
    indptr, indices, values, row_positions, row_places, column_positions, column_places, slots, rescaling
):
    """(block rows, block columns, values) of the member rows' entries in member columns, in entry order;
    `slots` (all -1) is set to the member columns' places for the pass and reset after it."""
    for place in range(column_positions.shape[0]):
        slots[column_positions[place]] = place
    total = 0
    for position in row_positions:
        total += indptr[position + 1] - indptr[position]
    block_rows = np.empty(total, dtype=np.int64)
    block_cols = np.empty(total, dtype=np.int64)
    block_values = np.empty(total, dtype=values.dtype)
    kept = 0
    for row in range(row_positions.shape[0]):
        position = row_positions[row]
        for entry in range(indptr[position], indptr[position + 1]):
            column = slots[indices[entry]]
            if column >= 0:
                value = values[entry]
                block_rows[kept] = row
                block_cols[kept] = column
                block_values[kept] = value if row_places[row] == column_places[column] else value * rescaling
                kept += 1
    for position in column_positions:
        slots[position] = -1
    return block_rows[:kept].copy(), block_cols[:kept].copy(), block_values[:kept].copy()  # not the buffers
