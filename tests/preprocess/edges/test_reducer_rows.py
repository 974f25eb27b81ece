"""A batch's row counts of one tile row: summed over its runs, on the union of their row ranges."""

from __future__ import annotations

import numpy as np

from gtool.preprocess.edges.reducer import added


def test_row_counts_add_up_over_the_union_of_the_runs_rows():
    total, start = added(np.zeros(0, dtype=np.int64), 0, np.array([1, 2, 3], dtype=np.int32), 5)
    assert (start, total.tolist(), total.dtype) == (5, [1, 2, 3], np.int64)
    total, start = added(total, start, np.array([10, 10], dtype=np.int32), 6)  # inside
    assert (start, total.tolist()) == (5, [1, 12, 13])
    total, start = added(total, start, np.array([1, 1], dtype=np.int32), 2)  # before, with a gap
    assert (start, total.tolist()) == (2, [1, 1, 0, 1, 12, 13])
    total, start = added(total, start, np.array([4, 4], dtype=np.int32), 7)  # overlapping the end
    assert (start, total.tolist()) == (2, [1, 1, 0, 1, 12, 17, 4])
