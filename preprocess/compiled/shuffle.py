"""The shuffle's kernels: a chunk's edges into partition-ordered keys (map), the ranges of a map file that a
dedupe task reads, a run's distinct keys (dedupe).

Map: entry (u, v) goes to position (r, c) = (row_inverse[u], col_inverse[v]) of its matrix, to partition
(ti * T + tj) * slabs + (r mod S) // slab_rows with key (r mod S) * S + (c mod S) (ti = r // S, tj = c // S;
see gtool.preprocess.partitions). One pass computes every entry's partition and key and counts the
partitions, a second scatters the keys into partition order (a counting sort: stable, no comparisons).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gtool.preprocess.partitions import PartitionPlan


@njit(nogil=True, cache=True)
def _bucket(rows, cols, mirror, keep_loops, row_inverse, col_inverse, s, tiles, slabs, slab_rows, count):
    n = rows.shape[0]
    size = 2 * n if mirror else n
    parts = np.empty(size, dtype=np.int32)
    keys = np.empty(size, dtype=np.int64)
    counts = np.zeros(count, dtype=np.int64)
    m = 0
    for e in range(n):
        u, v = rows[e], cols[e]
        if u == v and not keep_loops:
            continue
        for side in range(2 if mirror else 1):
            r = np.int64(row_inverse[u if side == 0 else v])
            c = np.int64(col_inverse[v if side == 0 else u])
            ti, lr = r // s, r % s
            p = (ti * tiles + c // s) * slabs + lr // slab_rows
            parts[m] = p
            keys[m] = lr * s + c % s
            counts[p] += 1
            m += 1
    starts = np.empty(count, dtype=np.int64)
    total = 0
    for p in range(count):
        starts[p] = total
        total += counts[p]
    out = np.empty(m, dtype=np.int64)
    for e in range(m):
        p = parts[e]
        out[starts[p]] = keys[e]
        starts[p] += 1
    return out, counts.astype(np.int32)


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
    return _bucket(
        rows,
        cols,
        mirror,
        keep_loops,
        np.asarray(row_inverse),
        np.asarray(col_inverse),
        plan.tile_size,
        plan.tiles,
        plan.slabs,
        plan.slab_rows,
        plan.count,
    )


@njit(nogil=True, cache=True)
def _gather(source, starts, stops, out):
    filled = 0
    for k in range(starts.shape[0]):
        size = stops[k] - starts[k]
        out[filled : filled + size] = source[starts[k] : stops[k]]
        filled += size
    return filled


def gather_ranges(source: np.ndarray, starts: np.ndarray, stops: np.ndarray, out: np.ndarray) -> int:
    """Copy source[starts[k]:stops[k]] for every k, one after the other, to the front of `out` (room for all
    of them); returns how many items were copied."""
    return _gather(source, starts, stops, out)


@njit(nogil=True, cache=True)
def _unique(keys, s, row_start, num_rows, slab_rows, slabs):
    row_counts = np.zeros(num_rows, dtype=np.int32)
    slab_counts = np.zeros(slabs, dtype=np.int64)
    m = 0
    for k in range(keys.shape[0]):
        key = keys[k]
        if m > 0 and keys[m - 1] == key:
            continue
        keys[m] = key
        m += 1
        if num_rows > 0:
            row_counts[key // s - row_start] += 1
        if slabs > 0:
            slab_counts[key % s // slab_rows] += 1
    return m, row_counts, slab_counts


def unique_counted(
    keys: np.ndarray, plan: PartitionPlan, row_start: int, num_rows: int, count_slabs: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct keys of sorted `keys` (compacted in place), their count per tile-local row
    [row_start, row_start + num_rows) (int32; empty when num_rows is 0) and, with `count_slabs`, per
    column slab (the row slabs of the transposed tile; empty otherwise)."""
    m, rows, slabs = _unique(
        keys, plan.tile_size, row_start, num_rows, plan.slab_rows, plan.slabs * count_slabs
    )
    return keys[:m], rows, slabs


def warm() -> None:
    plan = PartitionPlan(4, 2)
    ids = np.array([0, 1, 3], dtype=np.int64)
    inverse = np.arange(4, dtype=np.int32)
    keys, _ = bucket_entries(ids, ids[::-1].copy(), inverse, inverse, plan, True, False)
    mapped = keys.copy()
    mapped.flags.writeable = False
    gather_ranges(mapped, np.array([1]), np.array([3]), np.empty_like(keys))
    unique_counted(np.sort(keys), plan, 0, 2, True)
