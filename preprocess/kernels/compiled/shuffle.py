"""The shuffle's kernels: a chunk's edges into partition-ordered keys (map), the ranges of a map file that a
dedupe task reads, a run's distinct keys (dedupe).

Map: entry (u, v) goes to position (r, c) = (row_inverse[u], col_inverse[v]) of its matrix, to partition
(ti * T + tj) * slabs + (r mod S) // slab_rows with key (r mod S) * S + (c mod S) (ti = r // S, tj = c // S;
see gtool.preprocess.partitions). One pass computes every entry's partition and key and counts the
partitions, a second scatters the keys into partition order (a counting sort: stable, no comparisons).
"""

from __future__ import annotations

import numpy as np

from gtool.compiled import kernel


@kernel(nogil=True)
def bucket(rows, cols, mirror, keep_loops, row_inverse, col_inverse, s, tiles, slabs, slab_rows, count):
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


@kernel(nogil=True)
def gather(source, starts, stops, out):
    filled = 0
    for k in range(starts.shape[0]):
        size = stops[k] - starts[k]
        out[filled : filled + size] = source[starts[k] : stops[k]]
        filled += size
    return filled


@kernel(nogil=True)
def unique(keys, s, row_start, num_rows, slab_rows, slabs):
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
