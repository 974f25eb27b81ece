"""The value invariants of a store's arrays (docs/store-format.md, invariants 3 and 6): what `gtool verify`
checks for the whole store and the loader for what each rank reads. Each check returns what is wrong,
or None."""

from __future__ import annotations

import hashlib

import numpy as np

from gtool.store import layout

SPLIT_VALUES = np.array([layout.SPLIT_NONE, *layout.SPLIT_CODES.values()])


def weight_problem(values: np.ndarray) -> str | None:
    """Adjacency weights must be finite and positive."""
    bad = ~(np.isfinite(values) & (values > 0))
    if not bad.any():
        return None
    k = int(np.flatnonzero(bad)[0])
    return f"weights that are not finite and positive (entry {k} is {values[k]})"


def label_problem(labels: np.ndarray, num_classes: int) -> str | None:
    """Class ids must lie in [-1, num_classes) (-1: unlabelled); multi-label entries in {-1, 0, 1}."""
    low, high = (layout.LABEL_NONE, num_classes - 1) if labels.ndim == 1 else (layout.LABEL_NONE, 1)
    if labels.size and (labels.min() < low or labels.max() > high):
        return f"values outside [{low}, {high}]"
    return None


def split_problem(split: np.ndarray) -> str | None:
    """Split codes must be -1 (none), 0 (train), 1 (valid) or 2 (test)."""
    if np.all(np.isin(split, SPLIT_VALUES)):
        return None
    return f"codes other than {SPLIT_VALUES.tolist()}"


def id_range_problem(ids: np.ndarray, num_nodes: int) -> str | None:
    """Node ids (of a permutation, or a slice of one) must lie in [0, N)."""
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        return f"node ids outside [0, {num_nodes})"
    return None


def permutation_problem(ids: np.ndarray, num_nodes: int) -> str | None:
    """A permutation (perm/r, perm/c) must hold every node id 0..N-1 exactly once."""
    if ids.shape != (num_nodes,):
        return f"shape {ids.shape}, expected ({num_nodes},)"
    if problem := id_range_problem(ids, num_nodes):
        return problem
    seen = np.zeros(num_nodes, dtype=bool)
    seen[ids] = True
    missing = num_nodes - int(np.count_nonzero(seen))
    return f"not a permutation ({missing} of {num_nodes} node ids never appear)" if missing else None


DIGEST_BYTES = 16
HASHED_IDS = 1 << 22
"""Node ids hashed per call: a bounded copy when the ids are not little-endian int64 already."""


class IdsHash:
    """BLAKE2b-128 of a sequence of node ids as little-endian int64, fed in blocks in order."""

    def __init__(self) -> None:
        self.hasher = hashlib.blake2b(digest_size=DIGEST_BYTES)

    def update(self, ids: np.ndarray) -> None:
        for start in range(0, ids.shape[0], HASHED_IDS):
            block = np.ascontiguousarray(ids[start : start + HASHED_IDS], dtype="<i8")
            self.hasher.update(block.data)

    def digest(self) -> bytes:
        return self.hasher.digest()


def combined_digest(rows: bytes, cols: bytes) -> str:
    """The permutations digest from the IdsHash digests of pr and of pc, as hex."""
    return hashlib.blake2b(rows + cols, digest_size=DIGEST_BYTES).hexdigest()


def permutations_digest(pr: np.ndarray, pc: np.ndarray) -> str:
    """What identifies a store's node order (metadata permutation.digest): a digest of pr and pc, equal
    for two stores exactly when they put every node at the same positions (almost surely)."""
    parts = []
    for ids in (pr, pc):
        hashed = IdsHash()
        hashed.update(ids)
        parts.append(hashed.digest())
    return combined_digest(*parts)


def first_non_finite_row(block: np.ndarray) -> int | None:
    """The first row of a feature block holding NaN or an infinity, or None when every value is finite."""
    finite = np.isfinite(block)
    if finite.all():
        return None
    return int(np.flatnonzero(~finite.reshape(finite.shape[0], -1).all(axis=1))[0])


SPLITMIX_GOLDEN, SPLITMIX_MIX1, SPLITMIX_MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
"""SplitMix64's increment and finalizer multipliers, which every hash of gtool mixes with: the digests of
node values here, the generated features (gtool.preprocess.kernels.randomfeatures), training's seeds
(gtool.trainer.nn.randomness)."""
MIX = (np.uint64(SPLITMIX_MIX1), np.uint64(SPLITMIX_MIX2))
STEP = np.uint64(SPLITMIX_GOLDEN)
DIGESTS = 1 << 64
"""Digests are sums modulo 2^64: those of blocks add up modulo DIGESTS."""


def node_value_digest(ids: np.ndarray, values: np.ndarray) -> int:
    """An order-free digest of the (node id, value row) pairs of `ids` and `values` (rows): the sum modulo
    2^64 of a 64-bit mix of each pair, so that two arrays holding the same nodes' values in different
    orders (labels/r and labels/c) have the same digest, and almost surely not otherwise."""
    rows = values.reshape(ids.shape[0], -1).astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        mixed = ids.astype(np.int64).view(np.uint64) * STEP
        for column in rows.T:  # one for class ids, K for multi-label rows
            mixed = mixed + column
            mixed = (mixed ^ (mixed >> np.uint64(30))) * MIX[0]
            mixed = (mixed ^ (mixed >> np.uint64(27))) * MIX[1]
            mixed = mixed ^ (mixed >> np.uint64(31))
        return int(np.sum(mixed, dtype=np.uint64))
