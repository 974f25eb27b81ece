"""Tile nonzeros a store would have under every permutation scheme, counted without rewriting it.

Each stored entry of A0 is mapped back to original node ids through perm/r and perm/c, then to the tile
another scheme (same seed) would put it in, and counted into a T x T array per scheme and matrix.
Memory: the two stored permutations, two node -> tile arrays per scheme and the counts (O(T^2 + N)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gtool.geometry.tiles import tile_size
from gtool.preprocess import DEGREE_SCHEMES, SCHEMES, make_permutations
from gtool.store.metadata import tile_stats
from gtool.store.reader import Store, TileData

BASELINES = ("none", "single", "double")
COMPARED = BASELINES + tuple(s for s in SCHEMES if s not in BASELINES)
"""Schemes side by side: the Plexus baselines first, then the others gtool offers."""


def stored_scheme(store: Store) -> tuple[str, int]:
    """(scheme, seed) the store was permuted with."""
    return store.meta.permutation.scheme, store.meta.permutation.seed


def needs_degrees(schemes: tuple[str, ...]) -> bool:
    """Whether some scheme depends on node degrees (a RowDegrees scan must come first)."""
    return any(s in DEGREE_SCHEMES for s in schemes)


class RowDegrees:
    """Tile visitor: nonzeros of every row of A + I, i.e. node degrees, from the tiles of A0."""

    matrices = (0,)

    def __init__(self, store: Store):
        self.tile_size = store.tile_size
        self.by_position = np.zeros(store.num_nodes, dtype=np.int64)

    def visit(self, matrix: int, i: int, j: int, tile: TileData) -> None:
        counts = np.bincount(tile.row)
        start = i * self.tile_size
        self.by_position[start : start + counts.shape[0]] += counts

    def original_order(self, pr: np.ndarray) -> np.ndarray:
        """Degrees by original node id (stored row p is node pr[p])."""
        degrees = np.empty_like(self.by_position)
        degrees[pr] = self.by_position
        return degrees


@dataclass(frozen=True)
class Placement:
    """Where a scheme puts each original node: the tile of its row position and of its column position."""

    scheme: str
    row_tile: np.ndarray
    col_tile: np.ndarray
    two_matrices: bool


def node_tiles(perm: np.ndarray, size: int, dtype: np.dtype) -> np.ndarray:
    """Node id -> tile index of its position in `perm` (position -> node id)."""
    tiles = np.empty(perm.shape[0], dtype=dtype)
    tiles[perm] = (np.arange(perm.shape[0]) // size).astype(dtype)
    return tiles


def placement(scheme: str, num_nodes: int, seed: int, tiles: int, degrees: np.ndarray | None) -> Placement:
    """A scheme's placement of the nodes over a T x T tiling."""
    pr, pc = make_permutations(scheme, num_nodes, seed, degrees=degrees, tiles=tiles)
    size, dtype = tile_size(num_nodes, tiles), np.min_scalar_type(tiles - 1)
    two = not np.array_equal(pr, pc)
    row_tile = node_tiles(pr, size, dtype)
    return Placement(scheme, row_tile, node_tiles(pc, size, dtype) if two else row_tile, two)


class SchemeTileNnz:
    """Tile visitor over A0: T x T nonzero counts of each matrix under each placement."""

    matrices = (0,)

    def __init__(self, store: Store, placements: list[Placement]):
        self.tiles, self.tile_size = store.tiles, store.tile_size
        self.pr, self.pc = store.perm("r"), store.perm("c")
        self.placements = placements
        cells = self.tiles * self.tiles
        self.counts = {
            p.scheme: {m: np.zeros(cells, dtype=np.int64) for m in ((0, 1) if p.two_matrices else (0,))}
            for p in placements
        }

    def visit(self, matrix: int, i: int, j: int, tile: TileData) -> None:
        rows = self.pr[i * self.tile_size + tile.row.astype(np.int64)]
        cols = self.pc[j * self.tile_size + tile.col.astype(np.int64)]
        for p in self.placements:
            counts = self.counts[p.scheme]
            counts[0] += self.cell_counts(p.row_tile[rows], p.col_tile[cols])
            if p.two_matrices:
                counts[1] += self.cell_counts(p.col_tile[rows], p.row_tile[cols])

    def cell_counts(self, row_tiles: np.ndarray, col_tiles: np.ndarray) -> np.ndarray:
        """Nonzeros per tile, flat i * T + j, of entries lying in tiles (row_tiles, col_tiles)."""
        t = self.tiles
        return np.bincount(row_tiles.astype(np.int64) * t + col_tiles, minlength=t * t)

    def results(self, stored: str) -> list[SchemeTiles]:
        """The counts as T x T arrays, one SchemeTiles per placement."""
        t = self.tiles
        return [
            SchemeTiles(scheme, scheme == stored, {m: c.reshape(t, t) for m, c in per_matrix.items()})
            for scheme, per_matrix in self.counts.items()
        ]


@dataclass(frozen=True)
class SchemeTiles:
    """Tile nonzeros of each matrix a scheme would store; `stored` marks the store's own scheme."""

    scheme: str
    stored: bool
    tile_nnz: dict[int, np.ndarray]

    def summary(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "stored": self.stored,
            "matrices": {str(m): tile_stats(c) for m, c in self.tile_nnz.items()},
        }


def scheme_counter(
    store: Store, degrees: np.ndarray | None, schemes: tuple[str, ...] = COMPARED
) -> SchemeTileNnz:
    """A SchemeTileNnz visitor for `schemes`, with the store's seed (`degrees` for degree-aware ones)."""
    _, seed = stored_scheme(store)
    placements = [placement(s, store.num_nodes, seed, store.tiles, degrees) for s in schemes]
    return SchemeTileNnz(store, placements)
