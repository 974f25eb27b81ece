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
from gtool.geometry.layers import layer_matrix, layer_orders, layer_roles, row_axis
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

    def _cells(self, indices: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.edges, np.minimum(indices, self.num_nodes))

    def band_nnz(
        self, matrix: int, rows: tuple[np.ndarray, np.ndarray], cols: tuple[np.ndarray, np.ndarray]
    ) -> np.ndarray:
        """[row range, column range]: nonzeros of A_matrix over every pair of the given ranges (half-open,
        as (starts, stops); their ends band edges), by 2D prefix sums."""
        r0, r1 = (self._cells(ends)[:, None] for ends in rows)
        c0, c1 = (self._cells(ends)[None, :] for ends in cols)
        p = self.prefix[matrix]
        return np.rint(p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0]).astype(np.int64)

    def rank_shards(self, grid: ProcessGrid, layers: int | Sequence[bool]) -> GridShards:
        """Every rank's adjacency shard of every layer on `grid`, with its nonzeros; `layers` the layers'
        orders or their number. A layer's shard is A_m[row band, input band] (gtool.geometry.layers), so
        its nonzeros are a table over the two band indices, looked up at every rank's coordinates."""
        orders = layer_orders(layers)
        coords = grid.coords_of(np.arange(grid.size))
        nnz, rows, cols, keys = [], [], [], []
        for layer, (roles, transform_first) in enumerate(zip(layer_roles(orders), orders, strict=True)):
            row, col = row_axis(roles, transform_first), roles[1]
            matrix = layer_matrix(layer) if self.two_matrices else 0
            row_starts, row_stops, row_size = band_ranges(self.num_nodes, grid.dims[row])
            col_starts, col_stops, col_size = band_ranges(self.num_nodes, grid.dims[col])
            table = self.band_nnz(matrix, (row_starts, row_stops), (col_starts, col_stops))
            nnz.append(table[coords[row], coords[col]])
            rows.append(np.full(grid.size, row_size))
            cols.append(np.full(grid.size, col_size))
            shard = (matrix, row_size, coords[row], col_size, coords[col])  # a ShardKey: equal Bands alike
            keys.append(np.stack(np.broadcast_arrays(*shard), axis=1))
        first = np.ones((grid.size, len(keys)), dtype=bool)
        for later, key in enumerate(keys):
            for earlier in keys[:later]:
                first[:, later] &= ~(earlier == key).all(axis=1)
        return GridShards(np.stack(nnz, axis=1), np.stack(rows, axis=1), np.stack(cols, axis=1), first)


def band_ranges(num_nodes: int, bands: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The real ranges [start, stop) of `bands` equal bands over N indices, and their padded size
    (gtool.geometry.bands.band of every band index)."""
    size = band_size(num_nodes, bands)
    starts = np.arange(bands, dtype=np.int64) * size
    return np.minimum(starts, num_nodes), np.minimum(starts + size, num_nodes), size


@dataclass(frozen=True)
class GridShards:
    """Every rank's adjacency shard of every layer on a grid, as arrays [rank, layer]: its nonzeros, its
    padded rows and columns, and whether it is the first layer of the rank to hold that shard (a rank
    holds each distinct shard once)."""

    nnz: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    first: np.ndarray


def grid_band_counts(grids: Iterable[ProcessGrid]) -> set[int]:
    """Every band count along any axis of `grids`."""
    return {g for grid in grids for g in grid.dims}
