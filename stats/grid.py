"""How a store loads the ranks of a 3D grid: each rank's shard nonzeros per layer, and what it reads.

Shards, tiles and feature/label blocks come from gtool.geometry.layers (the loader's own geometry), so these
figures describe exactly what `gtool train` would load; each shard's nonzeros come from the planner's table
(gtool.geometry.bandnnz), its cells counted exactly by the stats' tile scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gtool.geometry.bandnnz import band_edges
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import XYZ, LayerOrders, Roles, rank_geometry, rank_layers
from gtool.store import layout
from gtool.store.cells import CellCounts
from gtool.store.metadata import spread
from gtool.store.reader import Store


def grid_cells(grid: ProcessGrid, store: Store) -> CellCounts:
    """The cells of the grid's bands: a tile visitor, after whose scan every shard's count is exact."""
    return CellCounts(store, band_edges(store.num_nodes, set(grid.dims)))


@dataclass(frozen=True)
class LayerBalance:
    """One layer: the matrix, the band counts of its shards, and the nonzeros of each rank's shard."""

    layer: int
    matrix: int
    bands: tuple[int, int]
    rank_nnz: np.ndarray

    def summary(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "matrix": self.matrix,
            "bands": list(self.bands),
            **spread(self.rank_nnz),
            "rank_nnz": self.rank_nnz.astype(int).tolist(),
        }


def layer_balance(
    grid: ProcessGrid, layers: LayerOrders, store: Store, cells: CellCounts, start: Roles = XYZ
) -> list[LayerBalance]:
    """Per layer (`layers`: their orders, layer 0 playing `start`), each rank's shard nonzeros (from the
    grid's cells, `grid_cells`, after their scan)."""
    shards = cells.table().rank_shards(grid, layers, start)
    balance = []
    for layer, first in enumerate(rank_layers(grid, 0, layers, store.num_nodes, store.two_matrices, start)):
        bands = (grid.dims[first.row_axis], grid.dims[first.roles[1]])
        rank_nnz = shards.nnz[:, layer]
        balance.append(LayerBalance(layer, first.matrix, bands, rank_nnz))
    return balance


@dataclass(frozen=True)
class RankRead:
    """What a rank reads from the store: its tiles, and the bytes of tiles, features and labels/splits."""

    rank: int
    coords: tuple[int, int, int]
    tiles: int
    tile_bytes: int
    feature_bytes: int
    label_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.tile_bytes + self.feature_bytes + self.label_bytes

    def summary(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "coords": list(self.coords),
            "tiles": self.tiles,
            "tile_bytes": self.tile_bytes,
            "feature_bytes": self.feature_bytes,
            "label_bytes": self.label_bytes,
            "total_bytes": self.total_bytes,
        }


def row_bytes(store: Store, path: str) -> int:
    """Bytes of one node's row of a node array (labels may be N x K)."""
    array = store.array(path)
    return array.dtype.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))


def rank_reads(grid: ProcessGrid, layers: LayerOrders, store: Store, start: Roles = XYZ) -> list[RankRead]:
    """Per rank (`layers`: the layers' orders, layer 0 playing `start`), the tiles it reads (every tile
    its shards overlap, whole) and the bytes of its reads."""
    n, t = store.num_nodes, store.tiles
    tile_nnz = {m: store.tile_nnz(m) for m in store.matrices}
    feature_value = store.array(layout.FEATURES).dtype.itemsize
    reads = []
    for rank in range(grid.size):
        geometry = rank_geometry(grid, rank, layers, n, store.num_features, store.two_matrices, start)
        tiles = geometry.tiles(n, t)
        order = geometry.label_order
        label_row = row_bytes(store, layout.LABELS[order]) + row_bytes(store, layout.SPLIT[order])
        reads.append(
            RankRead(
                rank=rank,
                coords=grid.coords(rank),
                tiles=len(tiles),
                tile_bytes=layout.ENTRY_BYTES * sum(int(tile_nnz[m][i, j]) for m, i, j in tiles),
                feature_bytes=geometry.feature_rows.real * geometry.feature_cols.real * feature_value,
                label_bytes=geometry.label_rows.real * label_row,
            )
        )
    return reads
