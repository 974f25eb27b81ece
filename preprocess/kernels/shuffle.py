"""The shuffle's kernels: a chunk's edges into partition-ordered keys (map), the ranges of a map file that a
dedupe task reads, a run's distinct keys (dedupe); numpy's forms here, numba's in compiled/shuffle.py.

Map: entry (u, v) goes to position (r, c) = (row_inverse[u], col_inverse[v]) of its matrix, to partition
(ti * T + tj) * slabs + (r mod S) // slab_rows with key (r mod S) * S + (c mod S) (ti = r // S, tj = c // S;
see gtool.preprocess.partitions); the keys of a partition keep the chunk's order, each edge's mirror
right after it.
"""

from __future__ import annotations

import numpy as np

from gtool.preprocess.kernels import compiled_pays, forced
from gtool.preprocess.partitions import PartitionPlan


def bucket_entries(
    rows: np.ndarray,
    cols: np.ndarray,
    row_inverse: np.ndarray,
    col_inverse: np.ndarray,
    plan: PartitionPlan,
    mirror: bool,
    keep_loops: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Tile-local keys of the entries (rows[k], cols[k]) (and (cols[k], rows[k]) with `mirror`), in
    partition order, and the entry count of every partition (int32). Entries with rows[k] == cols[k] are
    dropped unless `keep_loops`."""
    row_inverse, col_inverse = np.asarray(row_inverse), np.asarray(col_inverse)
    if compiled_pays(rows.shape[0] * (1 + mirror)):
        from gtool.preprocess.kernels.compiled import shuffle

        s, tiles, slabs, slab_rows, count = plan.tile_size, plan.tiles, plan.slabs, plan.slab_rows, plan.count
        return shuffle.bucket(
            rows, cols, mirror, keep_loops, row_inverse, col_inverse, s, tiles, slabs, slab_rows, count
        )
    if not keep_loops:
        kept = rows != cols
        rows, cols = rows[kept], cols[kept]
    r, c = row_inverse[rows].astype(np.int64), col_inverse[cols].astype(np.int64)
    if mirror:
        r = np.stack([r, row_inverse[cols]], axis=1).ravel()
        c = np.stack([c, col_inverse[rows]], axis=1).ravel()
    s = plan.tile_size
    tile_row, local_row = np.divmod(r, s)
    parts = (tile_row * plan.tiles + c // s) * plan.slabs + local_row // plan.slab_rows
    keys = local_row * s + c % s
    order = np.argsort(parts, kind="stable")
    return keys[order], np.bincount(parts, minlength=plan.count).astype(np.int32)


def gather_ranges(source: np.ndarray, starts: np.ndarray, stops: np.ndarray, out: np.ndarray) -> int:
    """Copy source[starts[k]:stops[k]] for every k, one after the other, to the front of `out` (room for all
    of them); returns how many items were copied."""
    sizes = np.asarray(stops, dtype=np.int64) - starts
    total = int(sizes.sum())
    if compiled_pays(total):
        from gtool.preprocess.kernels.compiled import shuffle

        return shuffle.gather(source, starts, stops, out)
    firsts = np.cumsum(sizes) - sizes
    out[:total] = source[np.repeat(starts - firsts, sizes) + np.arange(total)]
    return total


def unique_counted(
    keys: np.ndarray, plan: PartitionPlan, row_start: int, num_rows: int, count_slabs: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct keys of sorted `keys` (compacted in place), their count per tile-local row
    [row_start, row_start + num_rows) (int32; empty when num_rows is 0) and, with `count_slabs`, per
    column slab (the row slabs of the transposed tile; empty otherwise)."""
    if compiled_pays(keys.shape[0]):
        from gtool.preprocess.kernels.compiled import shuffle

        s, slab_rows, slabs = plan.tile_size, plan.slab_rows, plan.slabs * count_slabs
        m, rows, columns = shuffle.unique(keys, s, row_start, num_rows, slab_rows, slabs)
        return keys[:m], rows, columns
    first = np.ones(keys.shape[0], dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    distinct = keys[first]
    keys[: distinct.size] = distinct
    s = plan.tile_size
    rows = np.bincount(distinct // s - row_start, minlength=num_rows) if num_rows > 0 else np.zeros(0)
    slabs = plan.slabs if count_slabs else 0
    columns = np.bincount(distinct % s // plan.slab_rows, minlength=slabs) if slabs else np.zeros(0)
    return keys[: distinct.size], rows.astype(np.int32), columns.astype(np.int64)


def warm() -> None:
    """Load numba's kernels of the shuffle, called as the pipeline calls them."""
    plan = PartitionPlan(4, 2)
    ids = np.array([0, 1, 3], dtype=np.int64)
    inverse = np.arange(4, dtype=np.int32)
    with forced(True):
        keys, _ = bucket_entries(ids, ids[::-1].copy(), inverse, inverse, plan, True, False)
        mapped = keys.copy()
        mapped.flags.writeable = False
        gather_ranges(mapped, np.array([1]), np.array([3]), np.empty_like(keys))
        unique_counted(np.sort(keys), plan, 0, 2, True)
