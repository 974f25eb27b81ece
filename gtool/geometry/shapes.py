"""The grids a rank count allows and the padded block shapes of every layer on one of them.

Bands are padded to equal sizes (gtool.geometry.bands), so every rank of a grid holds blocks of the same
shapes; only the nonzeros of its adjacency shards differ from rank to rank (gtool.geometry.bandnnz).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import XYZ, LayerGeometry, LinearGeometry, Roles, rank_layers


def factorizations(ranks: int) -> list[ProcessGrid]:
    """Every GX x GY x GZ grid of exactly `ranks` processes, in lexicographic order."""
    if ranks < 1:
        raise ValueError(f"the number of ranks must be >= 1, got {ranks}")
    divisors = [d for d in range(1, ranks + 1) if ranks % d == 0]
    return [
        ProcessGrid(gx, gy, ranks // (gx * gy))
        for gx in divisors
        for gy in divisors
        if (ranks // gx) % gy == 0
    ]


@dataclass(frozen=True)
class LayerShape:
    """A layer's padded block sizes, the same on every rank of a grid: what the model prices.

    The bands come from the layer's geometry (gtool.geometry.layers, rank 0's): the rank multiplies its
    `rows` x `inputs` adjacency shard and its `in_cols` x `out_cols` weight block with an `inputs` x
    `in_cols` input block (in the layer's order) into a `rows` x `out_cols` output block.
    """

    geometry: LayerGeometry
    in_dim: int
    out_dim: int

    @property
    def layer(self) -> int:
        return self.geometry.layer

    @property
    def roles(self) -> tuple[int, int, int]:
        return self.geometry.roles

    @property
    def transform_first(self) -> bool:
        return self.geometry.transform_first

    @property
    def sizes(self) -> tuple[int, int, int]:
        """(G_a, G_b, G_c): the group sizes of the layer's roles."""
        return self.geometry.sizes

    @property
    def rows(self) -> int:
        return self.geometry.rows.size

    @property
    def inputs(self) -> int:
        return self.geometry.inputs.size

    @property
    def real_rows(self) -> int:
        """Real (unpadded) rows of the output block: those a residual's reshard fills."""
        return self.geometry.rows.real

    @property
    def in_cols(self) -> int:
        return self.geometry.in_cols(self.in_dim).size

    @property
    def out_cols(self) -> int:
        return self.geometry.out_cols(self.out_dim).size

    @property
    def weight_part(self) -> int:
        """Elements of a rank's flat part of the weight block (split evenly over its weight axis' group)."""
        return self.geometry.weight_part(self.in_dim, self.out_dim)


def layer_shapes(
    grid: ProcessGrid,
    num_nodes: int,
    widths: list[int],
    orders: Sequence[bool],
    start: Roles = XYZ,
    rank: int = 0,
) -> list[LayerShape]:
    """The shape of every layer of a GCN with layer widths `widths` (D_0 .. D_L) and orders `orders` (True:
    transform-first, gtool.architecture.ModelConfig.orders) on `grid`, layer 0 playing `start`.

    Padded shapes do not depend on the rank nor on which stored matrix a layer multiplies by (rank 0's
    geometry, one matrix); only real sizes (a residual's) do."""
    geometry = rank_layers(grid, rank, orders, num_nodes, False, start)
    return [LayerShape(g, widths[g.layer], widths[g.layer + 1]) for g in geometry]


@dataclass(frozen=True)
class StackParts:
    """What a model has around its GCN layers, as one rank holds it (gtool.architecture.ModelConfig.parts):
    the input projection and output head (None: absent), and whether its layers have a bias, its blocks an
    RMSNorm and a residual add. Their rows are the layers': the projection's those of layer 0's input
    block, the head's those of the last layer's output block (a step's members in a mini-batch)."""

    projection: LinearGeometry | None
    head: LinearGeometry | None
    num_features: int
    hidden: int
    num_classes: int
    bias: bool = False
    norm: bool = False
    residual: bool = False

    def blocks(self, layers: int) -> range:
        """The GCN layers followed by a block (norm, ReLU, dropout, residual): all but the last, and the
        last too before an output head."""
        return range(layers if self.head is not None else layers - 1)

    def has_residual(self, shape: LayerShape, layers: int) -> bool:
        """Whether GCN layer `shape` adds its input to its output (in a block, equal widths)."""
        return self.residual and shape.layer in self.blocks(layers) and shape.in_dim == shape.out_dim

    def output_axes(self, last: LayerShape) -> tuple[int, int]:
        """The axes whose bands the logits' rows and classes are (the head's b and a, or the last layer's
        output axes)."""
        if self.head is not None:
            return self.head.roles[1], self.head.roles[0]
        return last.geometry.row_axis, last.geometry.out_col_axis


GCN_PARTS = StackParts(None, None, 0, 0, 0)
"""A plain GCN: nothing around its layers."""
