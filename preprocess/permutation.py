"""Row and column permutations (pr, pc) of docs/3d-gcn.md: position -> original node id."""

from __future__ import annotations

import numpy as np

from gtool.preprocess.balanced import balanced_permutations
from gtool.preprocess.engine.threaded import in_parts
from gtool.store.metadata import DEGREE_SCHEMES, PERMUTATION_SCHEMES

SCHEMES = PERMUTATION_SCHEMES


def make_permutations(
    scheme: str, num_nodes: int, seed: int, degrees: np.ndarray | None = None, tiles: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """(pr, pc) for a scheme: two independent random permutations, one shared, the identity, or two
    degree-balanced ones (`degrees` of A + I in original node order, `tiles` = T of the store)."""
    if scheme in DEGREE_SCHEMES:
        if degrees is None or degrees.shape[0] != num_nodes:
            raise ValueError(f"permutation scheme {scheme!r} needs the degree of every node")
        return balanced_permutations(degrees, seed, tiles)
    if scheme == "none":
        ident = np.arange(num_nodes, dtype=np.int64)
        return ident, ident
    rng = np.random.default_rng(seed)
    pr = np.asarray(rng.permutation(num_nodes), dtype=np.int64)
    if scheme == "single":
        return pr, pr
    if scheme == "double":
        return pr, np.asarray(rng.permutation(num_nodes), dtype=np.int64)
    raise ValueError(f"unknown permutation scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")


def inverse(perm: np.ndarray, threads: int = 1) -> np.ndarray:
    """original node id -> position, as int32 when it fits (it is held for every edge lookup); scattered
    by up to `threads` threads (a scatter of many nodes is slow in one thread)."""
    n = perm.shape[0]
    dtype = np.int32 if n < 2**31 else np.int64
    inv = np.empty(n, dtype=dtype)

    def scatter(start: int, stop: int) -> None:
        inv[perm[start:stop]] = np.arange(start, stop, dtype=dtype)

    in_parts(n, threads, scatter)
    return inv
