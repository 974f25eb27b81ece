"""The shuffle kernels against plain numpy: partition order, keys, counts, distinct keys and their counts."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.preprocess.kernels.shuffle import bucket_entries, unique_counted
from gtool.preprocess.partitions import PartitionPlan


def numpy_bucket(rows, cols, row_inverse, col_inverse, plan, mirror, keep_loops):
    """The map stage as numpy writes it: orient, drop loops, gather, partition, stable sort."""
    if mirror:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    if not keep_loops:
        keep = rows != cols
        rows, cols = rows[keep], cols[keep]
    r, c = row_inverse[rows].astype(np.int64), col_inverse[cols].astype(np.int64)
    s = plan.tile_size
    part = ((r // s) * plan.tiles + c // s) * plan.slabs + (r % s) // plan.slab_rows
    order = np.argsort(part, kind="stable")
    keys = ((r % s) * s + c % s)[order]
    return keys, part[order], np.bincount(part, minlength=plan.count)


@pytest.mark.parametrize("n, tiles", [(1000, 4), (997, 3), (50, 1), (4096, 16)])
@pytest.mark.parametrize("mirror, keep_loops", [(True, False), (False, False), (False, True)])
def test_bucket_matches_numpy(n, tiles, mirror, keep_loops):
    """The same keys in every partition (in any order: the dedupe stage sorts each run)."""
    rng = np.random.default_rng(n + tiles)
    rows, cols = rng.integers(0, n, 5000), rng.integers(0, n, 5000)
    rows[:50] = cols[:50]
    plan = PartitionPlan(n, tiles)
    row_inverse = rng.permutation(n).astype(np.int32)
    col_inverse = rng.permutation(n).astype(np.int32)
    keys, counts = bucket_entries(rows, cols, row_inverse, col_inverse, plan, mirror, keep_loops)
    want_keys, want_parts, want_counts = numpy_bucket(
        rows, cols, row_inverse, col_inverse, plan, mirror, keep_loops
    )
    np.testing.assert_array_equal(counts, want_counts)
    assert counts.dtype == np.int32
    bounds = np.concatenate([[0], np.cumsum(counts)])
    for p in np.flatnonzero(counts):
        part_keys = keys[bounds[p] : bounds[p + 1]]
        np.testing.assert_array_equal(np.sort(part_keys), np.sort(want_keys[want_parts == p]))


def test_bucket_takes_int32_ids_and_int64_inverses():
    plan = PartitionPlan(10, 2)
    rows, cols = np.array([1, 2, 9], dtype=np.int32), np.array([3, 2, 0], dtype=np.int32)
    inverse = np.arange(10, dtype=np.int64)
    keys, counts = bucket_entries(rows, cols, inverse, inverse, plan, True, False)
    assert counts.sum() == 4 and keys.dtype == np.int64


@pytest.mark.parametrize("count_slabs", [False, True])
def test_unique_counted_matches_numpy(count_slabs):
    plan = PartitionPlan(5000, 4)
    s = plan.tile_size
    rng = np.random.default_rng(3)
    rows = rng.integers(100, 400, 20000)
    keys = np.sort(rows * s + rng.integers(0, s, 20000) // 97)
    want = np.unique(keys)
    got, row_counts, slab_counts = unique_counted(keys.copy(), plan, 90, 320, count_slabs)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(row_counts, np.bincount(want // s - 90, minlength=320))
    assert row_counts.dtype == np.int32
    if count_slabs:
        np.testing.assert_array_equal(
            slab_counts, np.bincount(want % s // plan.slab_rows, minlength=plan.slabs)
        )
    else:
        assert slab_counts.size == 0


def test_unique_counted_empty():
    keys, rows, _ = unique_counted(np.zeros(0, dtype=np.int64), PartitionPlan(10, 2), 0, 0, False)
    assert keys.size == 0 and rows.size == 0
