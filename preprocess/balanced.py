"""Degree-balanced row and column permutations (`--perm balanced`; how they deal: docs/shard.md).

Double permutation spreads nonzeros evenly only on average: on skewed graphs a few hub rows land in one
band. Here every vertex is dealt to one of K = T * m buckets (m per tile) in rounds that pair the heaviest
and the lightest vertices still to deal, heaviest first to the buckets lightest so far, so every bucket,
and any window of positions, holds its share of hubs and of nonzeros; positions inside a bucket, and the
order of vertices of equal degree, are random. m is a multiple of 12 where the graph allows, so buckets
line up with 2, 3, 4, 6 and 12 times T bands. Rows and columns use independent streams, so pr != pc.
"""

from __future__ import annotations

import numpy as np

from gtool.geometry.tiles import tile_range, tile_size

ALIGNED_BUCKETS = 12
"""Buckets per tile come in multiples of 12 where possible, so 2, 3, 4, 6 and 12 times T bands align."""
FEWER_BUCKETS = (6, 4, 3, 2, 1)
HUB_HEADROOM = 2
"""A bucket's fair share of nonzeros must be at least this many times the largest degree."""


def balanced_permutations(degrees: np.ndarray, seed: int, tiles: int) -> tuple[np.ndarray, np.ndarray]:
    """(pr, pc), position -> original node id, from the nonzeros of each node's row of A + I.

    `degrees` is in original node order; `tiles` is the store's T (the buckets follow its tile ranges).
    """
    degrees = np.asarray(degrees, dtype=np.int64)
    bounds = bucket_bounds(degrees.shape[0], tiles, buckets_per_tile(degrees, tiles))
    rows_rng, cols_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    return dealt_permutation(degrees, bounds, rows_rng), dealt_permutation(degrees, bounds, cols_rng)


def buckets_per_tile(degrees: np.ndarray, tiles: int) -> int:
    """m: the largest multiple of 12 (else 6, 4, 3, 2 or 1) that leaves no bucket empty and gives every
    bucket a fair share of at least HUB_HEADROOM times the largest degree."""
    n = degrees.shape[0]
    top = max(int(degrees.max(initial=0)), 1)
    limit = min(n, float(degrees.sum()) / HUB_HEADROOM / top) / tiles
    if limit >= ALIGNED_BUCKETS:
        return ALIGNED_BUCKETS * int(limit // ALIGNED_BUCKETS)
    return next((m for m in FEWER_BUCKETS if m <= limit), 1)


def bucket_bounds(num_nodes: int, tiles: int, per_tile: int) -> np.ndarray:
    """Position bounds of the tiles * per_tile buckets: each tile's range cut in per_tile near-equal parts."""
    size = tile_size(num_nodes, tiles)
    ranges = np.array([tile_range(k, size, num_nodes) for k in range(tiles)], dtype=np.int64)
    starts, lengths = ranges[:, :1], ranges[:, 1:] - ranges[:, :1]
    inner = starts + lengths * np.arange(1, per_tile + 1) // per_tile
    return np.concatenate([[0], inner.ravel()])


def folded_order(degrees: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Node ids alternating heaviest and lightest remaining: d0, d(N-1), d1, d(N-2), ...

    Nodes of equal degree are in random order.
    """
    shuffled = rng.permutation(degrees.shape[0])
    heaviest_first = shuffled[np.argsort(-degrees[shuffled], kind="stable")]
    del shuffled
    n, half = heaviest_first.shape[0], (heaviest_first.shape[0] + 1) // 2
    folded = np.empty_like(heaviest_first)
    folded[0::2] = heaviest_first[:half]
    folded[1::2] = heaviest_first[half:][::-1]
    return folded if n else heaviest_first


def deal_rounds(weights: np.ndarray, capacities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bucket of each item: round r gives one item to every bucket with more than r places, the
    round's heaviest item to the bucket lightest so far (ties broken at random)."""
    buckets = np.empty(weights.shape[0], dtype=np.int32)
    mass = np.zeros(capacities.shape[0], dtype=np.int64)
    tiebreak = rng.permutation(capacities.shape[0])
    start = 0
    for r in range(int(capacities.max(initial=0))):
        open_buckets = np.flatnonzero(capacities > r)
        stop = start + open_buckets.shape[0]
        heaviest_first = start + np.argsort(-weights[start:stop], kind="stable")
        lightest_first = open_buckets[np.lexsort((tiebreak[open_buckets], mass[open_buckets]))]
        buckets[heaviest_first] = lightest_first
        mass[lightest_first] += weights[heaviest_first]
        start = stop
    return buckets


def dealt_permutation(degrees: np.ndarray, bounds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Position -> node id: nodes dealt to the buckets [bounds[b], bounds[b + 1]), random within each."""
    order = folded_order(degrees, rng)
    buckets = deal_rounds(degrees[order], np.diff(bounds), rng)
    shuffle = rng.permutation(order.shape[0])
    return order[shuffle[np.argsort(buckets[shuffle], kind="stable")]]
