"""Row and column permutations (pr, pc) of docs/3d-gcn.md: position -> original node id."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gtool.preprocess.balanced import balanced_permutations

SCHEMES = ("double", "single", "none", "balanced")
DEGREE_SCHEMES = frozenset({"balanced"})
"""Schemes whose permutations depend on the degrees of A + I (counted before the permutation)."""
MIN_SCATTER = 1 << 20
"""Positions a thread of `inverse` scatters at least (fewer are not worth a thread)."""


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
    """original node id -> position, as int32 when it fits (it is held for every edge lookup).

    With `threads`, each thread scatters its share of the positions (numpy releases the GIL): a scatter
    into N random places waits on memory, which several threads wait on at once (2^26 nodes: 2.2 s
    in one thread)."""
    n = perm.shape[0]
    dtype = np.int32 if n < 2**31 else np.int64
    inv = np.empty(n, dtype=dtype)

    def scatter(bounds: tuple[int, int]) -> None:
        inv[perm[bounds[0] : bounds[1]]] = np.arange(*bounds, dtype=dtype)

    parts = min(threads, max(1, n // MIN_SCATTER))
    if parts == 1:
        scatter((0, n))
        return inv
    cuts = [n * k // parts for k in range(parts + 1)]
    with ThreadPoolExecutor(parts, thread_name_prefix="gtool-inverse") as pool:
        list(pool.map(scatter, zip(cuts[:-1], cuts[1:], strict=True)))
    return inv
