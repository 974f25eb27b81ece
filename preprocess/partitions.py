"""How edges are bucketed for the shuffle: T x T tiles, each cut into row slabs.

Partition p = (i * T + j) * slabs + s holds the entries of tile (i, j) whose tile-local row r has
r // slab_rows == s. Consecutive partitions of one tile are consecutive row ranges, so a reduce task
can take any run of them and its sorted output concatenates into a sorted tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from gtool.geometry.bands import ceil_div
from gtool.geometry.tiles import tile_range, tile_size

MAX_SLABS = 64
PARTITION_LIMIT = 1 << 16


@dataclass(frozen=True)
class PartitionPlan:
    """Tile and slab geometry of the shuffle."""

    num_nodes: int
    tiles: int

    @property
    def tile_size(self) -> int:
        return tile_size(self.num_nodes, self.tiles)

    @property
    def slabs(self) -> int:
        """Row slabs per tile: at most 64, and fewer than 2^16 partitions in all (each map task reports
        an entry count per partition)."""
        return max(1, min(MAX_SLABS, self.tile_size, (PARTITION_LIMIT - 1) // (self.tiles * self.tiles)))

    @property
    def slab_rows(self) -> int:
        return ceil_div(self.tile_size, self.slabs)

    @property
    def count(self) -> int:
        return self.tiles * self.tiles * self.slabs

    def tile_partitions(self, i: int, j: int) -> range:
        """Partition ids of tile (i, j), in row order."""
        first = (i * self.tiles + j) * self.slabs
        return range(first, first + self.slabs)

    def slab_row_start(self, partition: int) -> int:
        """Tile-local first row of a partition's slab."""
        return (partition % self.slabs) * self.slab_rows

    def tile_rows(self, i: int) -> int:
        """Number of real rows in tile row i."""
        start, stop = tile_range(i, self.tile_size, self.num_nodes)
        return stop - start
