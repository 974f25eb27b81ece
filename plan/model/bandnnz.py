"""Each rank's adjacency nonzeros on every grid of a rank count, from the store's tile statistics.

The band edges of every band count in play cut the N x N matrix into cells; every shard is a rectangle
of whole cells, so its nonzeros are a sum over cells (2D prefix sums). A cell's nonzeros come from the
store's per-tile counts: exact for the tiles lying inside one cell, and for a tile a band edge crosses
its count is split in proportion to area (double permutation spreads a tile's entries evenly) unless
`exact` is asked for, which reads those tiles once and counts their entries cell by cell (or unless a
tile scan visited them: `CellCounts` is a tile visitor, as `gtool stats` uses it).
Memory: O(T^2 + cells^2).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gtool.geometry.bands import band_size
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import rank_layers
from gtool.geometry.tiles import tile_range, tile_size
from gtool.store.reader import Store, TileData
from gtool.store.scan import Progress


def band_edges(num_nodes: int, band_counts: Iterable[int]) -> np.ndarray:
    """Sorted distinct edges (0 .. N) of the real parts of g equal bands, for every g given."""
    edges = {0, num_nodes}
    for g in band_counts:
        size = band_size(num_nodes, g)
        edges.update(min(k * size, num_nodes) for k in range(g + 1))
    return np.array(sorted(edges), dtype=np.int64)


def overlap_fractions(edges: np.ndarray, num_nodes: int, tiles: int) -> np.ndarray:
    """[tile, cell]: the fraction of tile k's index range that lies in each cell between `edges`."""
    size = tile_size(num_nodes, tiles)
    fractions = np.zeros((tiles, len(edges) - 1))
    for k in range(tiles):
        lo, hi = tile_range(k, size, num_nodes)
        if hi > lo:
            inside = np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo)
            fractions[k] = np.clip(inside, 0, None) / (hi - lo)
    return fractions


class CellCounts:
    """Nonzeros of every stored matrix in the cells between `edges` (rows and columns alike); a tile
    visitor (gtool.store.scan) that counts the tiles a band edge crosses exactly."""

    def __init__(self, store: Store, edges: np.ndarray):
        self.store = store
        self.edges = edges
        self.matrices = store.matrices
        self.tile = tile_size(store.num_nodes, store.tiles)
        self.fractions = overlap_fractions(edges, store.num_nodes, store.tiles)
        self.whole = self.fractions.max(axis=1) == 1.0
        """Tiles (along one dimension) lying inside a single cell."""
        self.counts = {m: self.fractions.T @ store.tile_nnz(m) @ self.fractions for m in store.matrices}
        self.counted = {m: np.logical_and.outer(self.whole, self.whole) for m in store.matrices}
        """Tiles whose cells hold their exact counts: those inside one cell, and those visited."""

    @property
    def estimated(self) -> bool:
        """Whether some tile with nonzeros was split by area rather than counted."""
        return any(bool(self.store.tile_nnz(m)[~self.counted[m]].any()) for m in self.store.matrices)

    def visit(self, matrix: int, i: int, j: int, tile: TileData) -> None:
        """Replace tile (i, j)'s share by area with its entries counted cell by cell."""
        if self.counted[matrix][i, j]:
            return
        self.counted[matrix][i, j] = True
        share = np.outer(self.fractions[i], self.fractions[j]) * float(tile.nnz)
        rows = np.searchsorted(self.edges, tile.row.astype(np.int64) + i * self.tile, side="right") - 1
        cols = np.searchsorted(self.edges, tile.col.astype(np.int64) + j * self.tile, side="right") - 1
        cells = self.counts[matrix].shape[0]
        by_cell = np.bincount(rows * cells + cols, minlength=cells * cells).reshape(cells, cells)
        self.counts[matrix] += by_cell - share

    def count_crossed(self, progress: Progress | None = None) -> None:
        """Read every tile a band edge crosses once and count its entries exactly."""
        t = self.store.tiles
        for m in self.store.matrices:
            nnz = self.store.tile_nnz(m)
            for i in range(t):
                for j in range(t):
                    if nnz[i, j] and not self.counted[m][i, j]:
                        tile = self.store.read_tile(m, i, j)
                        self.visit(m, i, j, tile)
                        if progress is not None:
                            progress(tile.nnz)


class ShardNnzTable:
    """Nonzeros of any band rectangle of any stored matrix, for the band counts its cells were cut by."""

    def __init__(self, cells: CellCounts):
        self.num_nodes = cells.store.num_nodes
        self.two_matrices = cells.store.two_matrices
        self.edges = cells.edges
        self.estimated = cells.estimated
        self.prefix = {}
        for m, counts in cells.counts.items():
            prefix = np.zeros((counts.shape[0] + 1, counts.shape[1] + 1))
            prefix[1:, 1:] = counts.cumsum(axis=0).cumsum(axis=1)
            self.prefix[m] = prefix

    @classmethod
    def of(
        cls, store: Store, band_counts: Iterable[int], exact: bool = False, progress: Progress | None = None
    ) -> ShardNnzTable:
        """The table of `store` for these band counts: tiles a band edge crosses split by area, or read
        and counted when `exact`."""
        cells = CellCounts(store, band_edges(store.num_nodes, band_counts))
        if exact:
            cells.count_crossed(progress)
        return cls(cells)

    def _cell(self, index: int) -> int:
        return int(np.searchsorted(self.edges, min(index, self.num_nodes)))

    def rect_nnz(self, matrix: int, rows: tuple[int, int], cols: tuple[int, int]) -> int:
        """Nonzeros of A_matrix[rows, cols] (half-open ranges whose ends are band edges)."""
        r0, r1 = self._cell(rows[0]), self._cell(rows[1])
        c0, c1 = self._cell(cols[0]), self._cell(cols[1])
        p = self.prefix[matrix]
        return round(p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0])

    def rank_shards(self, grid: ProcessGrid, layers: int | Sequence[bool]) -> list[list[RankShard]]:
        """[rank][layer]: each rank's adjacency shard of each layer on `grid`, with its nonzeros; `layers`
        the layers' orders or their number (gtool.geometry.layers.rank_layers)."""
        memo: dict[tuple, int] = {}
        shards = []
        for rank in range(grid.size):
            per_layer = []
            for shard in rank_layers(grid, rank, layers, self.num_nodes, self.two_matrices):
                rows, cols = shard.rows, shard.inputs
                if shard.key not in memo:
                    memo[shard.key] = self.rect_nnz(
                        shard.matrix, (rows.start, rows.stop), (cols.start, cols.stop)
                    )
                per_layer.append(RankShard(shard.key, memo[shard.key], rows.size, cols.size))
            shards.append(per_layer)
        return shards


@dataclass(frozen=True)
class RankShard:
    """One layer's adjacency shard on one rank: its identity, nonzeros and padded shape."""

    key: tuple
    nnz: int
    rows: int
    cols: int


def grid_band_counts(grids: Iterable[ProcessGrid]) -> set[int]:
    """Every band count along any axis of `grids`."""
    return {g for grid in grids for g in grid.dims}
