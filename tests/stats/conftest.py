"""Small stores for `gtool stats`, and the figures it must report, counted directly with numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp

from gtool.store.reader import Store
from tests.support.reference import reassemble
from tests.support.stores import StoreFactory

SEED = 3


@dataclass(frozen=True)
class StoreCase:
    """A source sharded with one tile count and permutation scheme."""

    source: str
    tiles: int
    perm: str

    def __str__(self) -> str:
        return f"{self.source}-{self.tiles}x{self.tiles}-{self.perm}"


@dataclass
class StatsStore:
    """A store and its matrices rebuilt from the tiles (small graphs only)."""

    case: StoreCase
    path: str
    store: Store
    matrices: dict[int, sp.csr_matrix]


def build(stores: StoreFactory, case: StoreCase, seed: int = SEED, **options) -> StatsStore:
    """The session's store of a case (generated node data) with its matrices reassembled."""
    path = stores(
        case.source,
        tiles=case.tiles,
        perm=case.perm,
        seed=seed,
        num_features=6,
        **options,
    )
    store = Store(path)
    return StatsStore(case, path, store, {m: reassemble(store, m) for m in store.matrices})


# N = 143 with 5 x 5 tiles of 29 (the last one 27): no band count of the grids divides N or T.
CASES = [StoreCase("grid:13x11", 5, p) for p in ("none", "single", "double", "balanced")] + [
    StoreCase("rmat:8:4", 4, "double"),  # skewed, duplicate edges, isolated nodes
]


@pytest.fixture(scope="package", params=CASES, ids=str)
def stats_store(request: pytest.FixtureRequest, stores: StoreFactory) -> StatsStore:
    return build(stores, request.param)


def tile_counts(matrix: sp.spmatrix, tiles: int, size: int) -> np.ndarray:
    """T x T nonzeros per tile of a matrix."""
    coo = matrix.tocoo()
    return np.bincount(coo.row // size * tiles + coo.col // size, minlength=tiles * tiles).reshape(
        tiles, tiles
    )


def touched_per_tile(matrix: sp.spmatrix, tiles: int, size: int, axis: int) -> np.ndarray:
    """T x T distinct rows (axis 0) or columns (axis 1) holding nonzeros, per tile."""
    coo = matrix.tocoo()
    lines, other = (coo.row, coo.col) if axis == 0 else (coo.col, coo.row)
    pairs = np.unique(np.stack([lines, other // size]), axis=1)
    tile_i, tile_j = (pairs[0] // size, pairs[1]) if axis == 0 else (pairs[1], pairs[0] // size)
    return np.bincount(tile_i * tiles + tile_j, minlength=tiles * tiles).reshape(tiles, tiles)
