"""Each layer's place on the 3D process grid (docs/3d-gcn.md): the shard and blocks a rank holds.

Layer l plays the axes in the roles
(a, b, c) = (x, y, z) rotated l times by (x, y, z) -> (z, x, y): its adjacency shard is
A_{l mod 2}[band a (of G_a), band b (of G_b)], it contracts over b (all-reduce among ranks sharing a and c),
its input block is F_l[band b, feature band c] and its output block F_{l+1}[band a, feature band b].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gtool.geometry.bands import Band, band, band_size
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


def padded_slice(part: Band) -> slice:
    """The band's range in padded coordinates (a band past the real indices still has its place)."""
    return slice(part.index * part.size, (part.index + 1) * part.size)


@dataclass(frozen=True)
class LayerGeometry:
    """Layer `layer` as one rank of a grid holds it: the one definition every room uses.

    The axes play roles (a, b, c) in groups of `sizes` = (G_a, G_b, G_c) ranks; the rank sits at `coords`.
    It multiplies its adjacency shard A_matrix[rows, inputs] (band a by band b of the N nodes) by its input
    block F_l[inputs, in_cols(D_l)] and its weight block W_l[in_cols(D_l), out_cols(D_l+1)] into its output
    block F_l+1[rows, out_cols(D_l+1)]. Node bands are fields; feature bands depend on the layer's widths.
    Bands are padded to equal sizes, so every rank of a grid holds blocks of the same shapes.
    """

    layer: int
    roles: tuple[int, int, int]
    sizes: tuple[int, int, int]
    coords: tuple[int, int, int]
    matrix: int
    rows: Band
    inputs: Band

    @property
    def key(self) -> ShardKey:
        """(matrix, row band, col band): equal keys are the same adjacency shard.

        Bands, not band indices: band 0 of Gx and band 0 of Gy are different rectangles when Gx != Gy.
        """
        return (self.matrix, self.rows, self.inputs)

    def tiles(self, num_nodes: int, tiles: int) -> list[TileCut]:
        """The stored tiles the adjacency shard overlaps, with the cuts that trim them to the shard."""
        return tiles_for_bands(self.rows, self.inputs, num_nodes, tiles)

    def in_cols(self, in_dim: int) -> Band:
        """Band c of the layer's input width D_l: the columns of its input block and rows of its weight."""
        return band(self.coords[self.roles[2]], self.sizes[2], in_dim)

    def out_cols(self, out_dim: int) -> Band:
        """Band b of the layer's output width D_l+1: the columns of its output and of its weight block."""
        return band(self.coords[self.roles[1]], self.sizes[1], out_dim)

    def input_block(self, in_dim: int) -> tuple[int, int, int, int]:
        """(first row, rows, first column, columns) of the input block in padded global coordinates."""
        rows, cols = padded_slice(self.inputs), padded_slice(self.in_cols(in_dim))
        return rows.start, self.inputs.size, cols.start, cols.stop - cols.start

    def weight_part(self, in_dim: int, out_dim: int) -> int:
        """Elements of this rank's flat part of the weight block (split evenly over the a-group)."""
        return band_size(self.in_cols(in_dim).size * self.out_cols(out_dim).size, self.sizes[0])


def layer_geometry(
    grid: ProcessGrid, rank: int, layer: int, num_nodes: int, two_matrices: bool
) -> LayerGeometry:
    """Layer `layer` as rank `rank` of `grid` holds it."""
    coords = grid.coords(rank)
    dims = grid.dims
    a, b, c = layer_roles(layer)
    return LayerGeometry(
        layer=layer,
        roles=(a, b, c),
        sizes=(dims[a], dims[b], dims[c]),
        coords=coords,
        matrix=layer_matrix(layer) if two_matrices else 0,
        rows=band(coords[a], dims[a], num_nodes),
        inputs=band(coords[b], dims[b], num_nodes),
    )


def rank_layers(
    grid: ProcessGrid, rank: int, layers: int, num_nodes: int, two_matrices: bool
) -> tuple[LayerGeometry, ...]:
    """Every layer 0..layers-1 as rank `rank` holds it."""
    if layers < 1:
        raise ValueError(f"the number of layers must be >= 1, got {layers}")
    return tuple(layer_geometry(grid, rank, layer, num_nodes, two_matrices) for layer in range(layers))


def distinct_shards(layers: Iterable[LayerGeometry]) -> dict[ShardKey, LayerGeometry]:
    """The distinct adjacency shards among `layers` (first layer using each), in layer order."""
    distinct: dict[ShardKey, LayerGeometry] = {}
    for layer in layers:
        distinct.setdefault(layer.key, layer)
    return distinct


@dataclass(frozen=True)
class RankGeometry:
    """Everything a rank holds, as index ranges: the loader reads it, `gtool stats --grid` sizes it.

    Its input features are layer 0's input block F0[inputs, in_cols(F)]; its labels and splits are the
    rows of its logits, the last layer's row band, in the last layer's output order."""

    grid: ProcessGrid
    rank: int
    layers: tuple[LayerGeometry, ...]
    num_features: int

    @property
    def shards(self) -> dict[ShardKey, LayerGeometry]:
        """The distinct adjacency shards of the rank."""
        return distinct_shards(self.layers)

    @property
    def feature_rows(self) -> Band:
        return self.layers[0].inputs

    @property
    def feature_cols(self) -> Band:
        return self.layers[0].in_cols(self.num_features)

    @property
    def label_rows(self) -> Band:
        return self.layers[-1].rows

    @property
    def label_order(self) -> str:
        return logits_order(len(self.layers))

    def tiles(self, num_nodes: int, tiles: int) -> list[tuple[int, int, int]]:
        """Every stored tile (matrix, i, j) the rank reads, sorted."""
        return sorted({(s.matrix, c.i, c.j) for s in self.shards.values() for c in s.tiles(num_nodes, tiles)})


def rank_geometry(
    grid: ProcessGrid, rank: int, layers: int, num_nodes: int, num_features: int, two_matrices: bool
) -> RankGeometry:
    """The shards, feature block and label rows of rank `rank` of `grid` for a `layers`-layer GCN."""
    return RankGeometry(grid, rank, rank_layers(grid, rank, layers, num_nodes, two_matrices), num_features)
