"""What one rank of a 3D grid holds: the contract between the loader and the trainer."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gtool.geometry.bands import Band
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import LayerOrders, Roles, ShardKey
from gtool.store.metadata import StoreMeta


@dataclass
class AdjacencyShard:
    """One adjacency shard A_m[row band, col band], padded to (row_band.size, col_band.size).

    `matrix` is the CSR shard with local indices; `transpose` is its transpose, also CSR, for the
    backward pass (None where it was not asked for: a mini-batch run cuts its own).
    """

    matrix_id: int
    row_band: Band
    col_band: Band
    matrix: torch.Tensor
    transpose: torch.Tensor | None

    @property
    def key(self) -> ShardKey:
        """(matrix, row band, col band), as gtool.geometry.layers.LayerGeometry.key."""
        return (self.matrix_id, self.row_band, self.col_band)

    @property
    def nnz(self) -> int:
        return int(self.matrix.values().shape[0])


@dataclass
class ReadStats:
    """What a load read: tiles, decoded bytes (tiles and node data) and wall seconds."""

    tiles: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def add_tile(self, nbytes: int) -> None:
        """Count one tile read of `nbytes` decoded bytes."""
        self.tiles += 1
        self.bytes += nbytes

    def add_bytes(self, nbytes: int) -> None:
        """Count `nbytes` decoded bytes of node data read."""
        self.bytes += nbytes


@dataclass
class RankData:
    """Everything rank `rank` of `grid` needs to train a GCN whose layers have `orders` (True:
    transform-first) and whose first layer plays `start`.

    - shards: the distinct adjacency shards, by (matrix, row band, col band) (gtool.geometry.layers.ShardKey);
      layer_keys[l] names layer l's.
    - features: X'[row band, feature band] (zero-padded), X' = features in pc order, for layer 0's input
      block (rows: band of layer 0's contraction axis; columns: band of its depth axis over F); None
      when not read (a run that reads each step's rows from the store).
    - labels / split: the last layer's row band in the last layer's order, `label_order` (padded with -1).
    """

    grid: ProcessGrid
    rank: int
    orders: LayerOrders
    meta: StoreMeta
    shards: dict[ShardKey, AdjacencyShard]
    layer_keys: list[ShardKey]
    features: torch.Tensor | None
    feature_rows: Band
    feature_cols: Band
    labels: torch.Tensor
    split: torch.Tensor
    label_rows: Band
    start: Roles = (0, 1, 2)
    label_order: str = "r"
    """The node order of the label rows (the last layer's output order)."""
    read: ReadStats = field(default_factory=ReadStats)

    @property
    def layers(self) -> int:
        return len(self.orders)

    @property
    def two_matrices(self) -> bool:
        """Whether the store holds A1 beside A0 (pr != pc)."""
        return len(self.meta.matrices) == 2

    def shard(self, layer: int) -> AdjacencyShard:
        """The adjacency shard layer `layer` multiplies by."""
        return self.shards[self.layer_keys[layer]]
