"""Each rank's adjacency nonzeros on every grid of a rank count, from nonzeros counted in cells.

The band edges of every band count in play cut the N x N matrix into cells; every shard is a rectangle
of whole cells, so its nonzeros are a sum over cells (2D prefix sums). The cells' counts come from a
store's tiles (gtool.store.cells). Memory: O(cells^2).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gtool.geometry.bands import band_size
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import XYZ, Roles, layer_matrix, layer_orders, layer_roles, row_axis
from gtool.geometry.tiles import tile_range, tile_size


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


class ShardNnzTable:
    """Nonzeros of any band rectangle of any stored matrix, for the band counts its cells were cut by:
    `counts[m]` the nonzeros of matrix m in the cells between `edges` (rows and columns alike),
    `estimated` whether some of them were split by area rather than counted."""

    def __init__(
        self,
        num_nodes: int,
        two_matrices: bool,
        edges: np.ndarray,
        counts: dict[int, np.ndarray],
        estimated: bool,
    ):
        self.num_nodes = num_nodes
        self.two_matrices = two_matrices
        self.edges = edges
        self.estimated = estimated
        self.prefix = {}
        for m, cells in counts.items():
            prefix = np.zeros((cells.shape[0] + 1, cells.shape[1] + 1))
            prefix[1:, 1:] = cells.cumsum(axis=0).cumsum(axis=1)
            self.prefix[m] = prefix

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

    def rank_shards(self, grid: ProcessGrid, layers: int | Sequence[bool], start: Roles = XYZ) -> GridShards:
        """Every rank's adjacency shard of every layer on `grid`, with its nonzeros; `layers` the layers'
        orders or their number, layer 0 playing `start`. A layer's shard is A_m[row band, input band]
        (gtool.geometry.layers), so its nonzeros are a table over the two band indices, looked up at
        every rank's coordinates."""
        orders = layer_orders(layers)
        coords = grid.coords_of(np.arange(grid.size))
        nnz, rows, cols, keys = [], [], [], []
        for layer, (roles, transform_first) in enumerate(
            zip(layer_roles(orders, start), orders, strict=True)
        ):
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
        return GridShards(
            np.stack(nnz, axis=1), np.stack(rows, axis=1), np.stack(cols, axis=1), first_uses(np.stack(keys))
        )


def first_uses(keys: np.ndarray) -> np.ndarray:
    """[rank, layer]: whether the shard key keys[layer, rank] is the first of its rank's layers to hold that
    key (no earlier layer of the rank has it), in one sort of all (rank, key) pairs: linear in the layers
    (comparing each layer with every earlier one took minutes for 10,000 layers)."""
    layers, ranks = keys.shape[:2]
    owner = np.broadcast_to(np.arange(ranks)[None, :, None], (layers, ranks, 1))
    pairs = np.concatenate([owner, keys], axis=2).reshape(layers * ranks, -1)
    first = np.zeros(layers * ranks, dtype=bool)
    first[np.unique(pairs, axis=0, return_index=True)[1]] = True  # each pair's first place, layer-major
    return first.reshape(layers, ranks).T


class AreaShardTable(ShardNnzTable):
    """The shard table of tile counts split by area (double permutation spreads a tile's entries evenly):
    a band rectangle holds each tile's nonzeros in proportion to the part of the tile it covers. Memory
    O(T^2), whatever the band counts; `edges` say which tiles a band edge crosses (`estimated`)."""

    def __init__(
        self,
        num_nodes: int,
        two_matrices: bool,
        tiles: int,
        tile_nnz: dict[int, np.ndarray],
        edges: np.ndarray,
    ):
        self.num_nodes = num_nodes
        self.two_matrices = two_matrices
        self.tiles = tiles
        self.tile_nnz = tile_nnz
        self.edges = edges
        size = tile_size(num_nodes, tiles)
        ranges = np.array([tile_range(k, size, num_nodes) for k in range(tiles)]).reshape(tiles, 2)
        inside = np.searchsorted(edges, ranges[:, 1], "left") - np.searchsorted(edges, ranges[:, 0], "right")
        crossed = np.logical_or.outer(inside > 0, inside > 0)
        self.estimated = any(bool(nnz[crossed].any()) for nnz in tile_nnz.values())

    def _fractions(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """[tile, range]: the fraction of tile k's index range inside [starts[i], stops[i])."""
        size = tile_size(self.num_nodes, self.tiles)
        lo = np.minimum(np.arange(self.tiles) * size, self.num_nodes)[:, None]
        hi = np.minimum(lo + size, self.num_nodes)
        inside = np.clip(np.minimum(stops[None, :], hi) - np.maximum(starts[None, :], lo), 0, None)
        return inside / np.maximum(hi - lo, 1)

    def band_nnz(
        self, matrix: int, rows: tuple[np.ndarray, np.ndarray], cols: tuple[np.ndarray, np.ndarray]
    ) -> np.ndarray:
        left, right = self._fractions(*rows), self._fractions(*cols)
        return np.rint(left.T @ self.tile_nnz[matrix] @ right).astype(np.int64)


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
