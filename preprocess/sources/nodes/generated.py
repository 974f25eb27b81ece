"""Node data gtool makes up when a source has none: random features, degree classes, a random split."""

from __future__ import annotations

import numpy as np

from gtool.preprocess.permutation import inverse
from gtool.preprocess.sources.base import FeatureSource
from gtool.store import layout

DEGREE_CLASSES = 32
"""Degree-quantile classes made when a source has no labels and --num-classes is not given."""


class RandomFeatures(FeatureSource):
    """`--num-features F` uniform random row-normalized features, a pure function of (seed, node)."""

    def __init__(self, num_nodes: int, num_features: int, seed: int):
        self.num_features = num_features
        self.seed = seed
        self._num_nodes = num_nodes
        self.where = f"random features (F={num_features}, seed={seed})"

    @property
    def num_rows(self) -> int:
        return self._num_nodes

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        from gtool.preprocess.kernels.randomfeatures import uniform_values

        return uniform_values(rows, self.num_features, self.seed, normalize=True)


def uniform_rows(rows: np.ndarray, num_features: int, seed: int) -> np.ndarray:
    """float32 values in (0, 1], one row per node id of `rows`, a pure function of (seed, node, column):
    value (i, k) comes from the top 24 bits of SplitMix64(rows[i] * F + k + seed * MIX2)."""
    from gtool.preprocess.kernels.randomfeatures import uniform_values

    return uniform_values(rows, num_features, seed, normalize=False)


def degree_classes(degrees: np.ndarray, num_classes: int, threads: int = 1) -> np.ndarray:
    """Labels by degree quantile: nodes ranked by degree (ties by id) are cut into equal-size classes.

    A node's rank is the inverse of the degree order, scattered by up to `threads` threads."""
    n = degrees.shape[0]
    rank = inverse(degree_order(degrees), threads)
    return rank.astype(np.int64) * num_classes // max(n, 1)


def degree_order(degrees: np.ndarray) -> np.ndarray:
    """Node ids by degree, ties by id: np.argsort(degrees, kind="stable"), by numpy's radix sort (faster
    than its merge sort of int64) on the degrees capped at 2^16 - 1, the few nodes at the cap
    then ordered among themselves by their full degree."""
    cap = np.iinfo(np.uint16).max
    order = np.argsort(np.minimum(degrees, cap).astype(np.uint16), kind="stable")
    hubs = np.count_nonzero(degrees >= cap)
    if hubs:
        tail = order[-hubs:]
        order[-hubs:] = tail[np.argsort(degrees[tail], kind="stable")]
    return order


def random_split(num_nodes: int, seed: int, fractions: tuple[float, float] = (0.6, 0.2)) -> np.ndarray:
    """A seeded random 60/20/20 train/valid/test split as int8 codes."""
    order = np.random.default_rng([seed, 0x5B1]).permutation(num_nodes)
    n_train = int(round(fractions[0] * num_nodes))
    n_valid = int(round(fractions[1] * num_nodes))
    split = np.full(num_nodes, layout.SPLIT_CODES["test"], dtype=np.int8)
    split[order[:n_train]] = layout.SPLIT_CODES["train"]
    split[order[n_train : n_train + n_valid]] = layout.SPLIT_CODES["valid"]
    return split
