"""A store's nonzeros in the cells that band edges cut its matrices into, for the shard tables of
gtool.geometry.bandnnz.

A cell's nonzeros come from the store's per-tile counts: exact for the tiles lying inside one cell, and
for a tile a band edge crosses its count is split in proportion to area (double permutation spreads a
tile's entries evenly) unless the tile is read and its entries counted cell by cell (`exact`, or a tile
scan that visited it: `CellCounts` is a tile visitor, as `gtool stats` uses it). Memory: O(T^2 + cells^2).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gtool.geometry.bandnnz import AreaShardTable, ShardNnzTable, band_edges, overlap_fractions
from gtool.geometry.tiles import tile_size
from gtool.store.reader import Store, TileData
from gtool.store.scan import Progress


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

    def table(self) -> ShardNnzTable:
        """The shard table of the cells as counted so far."""
        store = self.store
        return ShardNnzTable(store.num_nodes, store.two_matrices, self.edges, self.counts, self.estimated)


def shard_table(
    store: Store, band_counts: Iterable[int], exact: bool = False, progress: Progress | None = None
) -> ShardNnzTable:
    """The shard table of `store` for these band counts: tiles a band edge crosses split by area (from the
    tile counts alone, whatever the band counts), or read and counted when `exact` (memory O(cells^2),
    cells cut by the band edges of every count)."""
    edges = band_edges(store.num_nodes, band_counts)
    if not exact:
        tile_nnz = {m: store.tile_nnz(m) for m in store.matrices}
        return AreaShardTable(store.num_nodes, store.two_matrices, store.tiles, tile_nnz, edges)
    cells = CellCounts(store, edges)
    cells.count_crossed(progress)
    return cells.table()
