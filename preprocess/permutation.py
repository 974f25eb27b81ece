"""Row and column permutations (pr, pc) of ../shared/docs/3d-gcn.md: position -> original node id."""

from __future__ import annotations

import numpy as np

SCHEMES = ("double", "single", "none")


def make_permutations(scheme: str, num_nodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(pr, pc) for a scheme: two independent random permutations, one shared, or the identity."""
    if scheme == "none":
        ident = np.arange(num_nodes, dtype=np.int64)
        return ident, ident
    rng = np.random.default_rng(seed)
    pr = rng.permutation(num_nodes).astype(np.int64)
    if scheme == "single":
        return pr, pr
    if scheme == "double":
        return pr, rng.permutation(num_nodes).astype(np.int64)
    raise ValueError(f"unknown permutation scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")


def inverse(perm: np.ndarray) -> np.ndarray:
    """original node id -> position, as int32 when it fits (it is held for every edge lookup)."""
    dtype = np.int32 if perm.shape[0] < 2**31 else np.int64
    inv = np.empty(perm.shape[0], dtype=dtype)
    inv[perm] = np.arange(perm.shape[0], dtype=dtype)
    return inv
