"""Each layer's place on the 3D process grid (docs/3d-gcn.md): the shard and blocks a rank holds.

Layer l plays the axes in the roles
(a, b, c) = (x, y, z) rotated l times by (x, y, z) -> (z, x, y): its adjacency shard is
A_{l mod 2}[band a (of G_a), band b (of G_b)], it contracts over b (all-reduce among ranks sharing a and c),
its input block is F_l[band b, feature band c] and its output block F_{l+1}[band a, feature band b].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gtool.geometry.bands import Band, band
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.tiles import TileCut, tiles_for_bands

ShardKey = tuple[int, Band, Band]
"""(matrix, row band, col band): equal keys are the same adjacency shard (one rectangle of one matrix)."""


def layer_roles(layer: int) -> tuple[int, int, int]:
    """Axis indices (a, b, c) playing (row, contraction, depth) in `layer` (0 -> (x, y, z))."""
    a, b, c = 0, 1, 2
    for _ in range(layer % 3):
        a, b, c = c, a, b
    return a, b, c


def order_of_layer_output(layer: int) -> str:
    """'r' or 'c': the node order of layer `layer`'s output rows (layer 0 -> pr order)."""
    return "r" if layer % 2 == 0 else "c"


def logits_order(num_layers: int) -> str:
    """The node order of the final logits: pr when L is odd, pc when L is even."""
    return order_of_layer_output(num_layers - 1)


def layer_widths(num_features: int, hidden: int, num_classes: int, layers: int) -> list[int]:
    """D_0 .. D_L, the widths of F_0 .. F_L: input features, `hidden` between layers, classes."""
    return [num_features] + [hidden] * (layers - 1) + [num_classes]


def layer_matrix(layer: int) -> int:
    """Which stored matrix a layer multiplies by: A0 for even layers, A1 for odd (A0 only if pr == pc)."""
    return layer % 2


@dataclass(frozen=True)
class LayerShard:
    """What one rank holds for one layer."""

    layer: int
    matrix: int
    row_band: Band
    col_band: Band
    roles: tuple[int, int, int]
    coords: tuple[int, int, int]

    @property
    def key(self) -> ShardKey:
        """(matrix, row band, col band): equal keys are the same adjacency shard.

        Bands, not band indices: band 0 of Gx and band 0 of Gy are different rectangles when Gx != Gy.
        """
        return (self.matrix, self.row_band, self.col_band)

    def tiles(self, num_nodes: int, tiles: int) -> list[TileCut]:
        """The stored tiles this shard overlaps, with the cuts that trim them to the shard."""
        return tiles_for_bands(self.row_band, self.col_band, num_nodes, tiles)


def layer_shard(grid: ProcessGrid, rank: int, layer: int, num_nodes: int, two_matrices: bool) -> LayerShard:
    """The adjacency shard rank `rank` multiplies by in `layer`."""
    coords = grid.coords(rank)
    dims = grid.dims
    a, b, c = layer_roles(layer)
    matrix = layer_matrix(layer) if two_matrices else 0
    return LayerShard(
        layer=layer,
        matrix=matrix,
        row_band=band(coords[a], dims[a], num_nodes),
        col_band=band(coords[b], dims[b], num_nodes),
        roles=(a, b, c),
        coords=coords,
    )


def rank_layer_shards(
    grid: ProcessGrid, rank: int, layers: int, num_nodes: int, two_matrices: bool
) -> tuple[LayerShard, ...]:
    """The adjacency shard of every layer 0..layers-1 of a rank."""
    if layers < 1:
        raise ValueError(f"the number of layers must be >= 1, got {layers}")
    return tuple(layer_shard(grid, rank, layer, num_nodes, two_matrices) for layer in range(layers))


def distinct_shards(shards: Iterable[LayerShard]) -> dict[ShardKey, LayerShard]:
    """The distinct shards among `shards` (first layer using each), in layer order."""
    distinct: dict[ShardKey, LayerShard] = {}
    for shard in shards:
        distinct.setdefault(shard.key, shard)
    return distinct


def tiles_of_shards(shards: Iterable[LayerShard], num_nodes: int, tiles: int) -> list[tuple[int, int, int]]:
    """Every stored tile (matrix, i, j) that some shard of `shards` overlaps, sorted."""
    distinct = distinct_shards(shards).values()
    return sorted({(s.matrix, c.i, c.j) for s in distinct for c in s.tiles(num_nodes, tiles)})


def feature_block(grid: ProcessGrid, rank: int, num_nodes: int, num_features: int) -> tuple[Band, Band]:
    """(row band, feature band) of a rank's input-feature block: F0[band b, feature band c] of layer 0."""
    coords, dims = grid.coords(rank), grid.dims
    _, b, c = layer_roles(0)
    return band(coords[b], dims[b], num_nodes), band(coords[c], dims[c], num_features)


def label_band(grid: ProcessGrid, rank: int, layers: int, num_nodes: int) -> Band:
    """The row band of a rank's logits (and so of its labels and splits): the last layer's row band."""
    coords, dims = grid.coords(rank), grid.dims
    a = layer_roles(layers - 1)[0]
    return band(coords[a], dims[a], num_nodes)


@dataclass(frozen=True)
class RankGeometry:
    """Everything a rank holds, as index ranges: the loader reads it, `gtool stats --grid` sizes it."""

    grid: ProcessGrid
    rank: int
    layer_shards: tuple[LayerShard, ...]
    feature_rows: Band
    feature_cols: Band
    label_rows: Band
    label_order: str

    @property
    def shards(self) -> dict[ShardKey, LayerShard]:
        """The distinct adjacency shards of the rank."""
        return distinct_shards(self.layer_shards)

    def tiles(self, num_nodes: int, tiles: int) -> list[tuple[int, int, int]]:
        """Every stored tile (matrix, i, j) the rank reads, sorted."""
        return tiles_of_shards(self.layer_shards, num_nodes, tiles)


def rank_geometry(
    grid: ProcessGrid, rank: int, layers: int, num_nodes: int, num_features: int, two_matrices: bool
) -> RankGeometry:
    """The shards, feature block and label rows of rank `rank` of `grid` for a `layers`-layer GCN."""
    feature_rows, feature_cols = feature_block(grid, rank, num_nodes, num_features)
    return RankGeometry(
        grid=grid,
        rank=rank,
        layer_shards=rank_layer_shards(grid, rank, layers, num_nodes, two_matrices),
        feature_rows=feature_rows,
        feature_cols=feature_cols,
        label_rows=label_band(grid, rank, layers, num_nodes),
        label_order=logits_order(layers),
    )


def rank_tiles(
    grid: ProcessGrid, rank: int, layers: int, num_nodes: int, tiles: int, two_matrices: bool
) -> list[tuple[int, int, int]]:
    """The stored tiles (matrix, i, j) rank `rank` needs for a `layers`-layer GCN, sorted."""
    return tiles_of_shards(rank_layer_shards(grid, rank, layers, num_nodes, two_matrices), num_nodes, tiles)
