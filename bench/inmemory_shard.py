"""The in-memory approach gtool replaces (as in the Plexus scripts), for side-by-side benchmarks.

Loads the whole edge list, builds Â with scipy, applies the double permutation, then scans the full
nonzero list once per tile. Run: python -m bench.inmemory_shard rmat:18:8 16
"""

from __future__ import annotations

import sys
import time

import numpy as np

from gtool.geometry.tiles import tile_size
from gtool.preprocess.permutation import inverse, make_permutations
from gtool.preprocess.sources.generators import parse_generator
from tests.support.reference import normalized_adjacency, source_edges


def shard_in_memory(spec: str, tiles: int, seed: int = 0) -> int:
    source = parse_generator(spec)
    n = source.num_nodes()
    src, dst = source_edges(source)
    adj = normalized_adjacency(src, dst, n).tocoo()
    pr, pc = make_permutations("double", n, seed)
    rows, cols = inverse(pr)[adj.row], inverse(pc)[adj.col]
    s = tile_size(n, tiles)
    total = 0
    for i in range(tiles):
        for j in range(tiles):
            mask = (rows // s == i) & (cols // s == j)
            order = np.lexsort((cols[mask], rows[mask]))
            total += int(order.size)
    return total


if __name__ == "__main__":
    start = time.perf_counter()
    nnz = shard_in_memory(sys.argv[1], int(sys.argv[2]))
    print(f"in-memory: {nnz} nonzeros in {time.perf_counter() - start:.1f} s")
