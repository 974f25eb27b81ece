"""The grids a rank count allows and the padded block shapes of every layer on one of them.

Bands are padded to equal sizes (gtool.geometry.bands), so every rank of a grid holds blocks of the same
shapes; only the nonzeros of its adjacency shards differ from rank to rank (gtool.plan.model.bandnnz).
"""

from __future__ import annotations

from dataclasses import dataclass

from gtool.geometry.bands import band_size
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import layer_roles


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
    """Layer `layer` on every rank of a grid: roles (a, b, c), their group sizes and the padded blocks.

    The rank multiplies its `rows` x `inputs` adjacency shard by an `inputs` x `in_cols` input block and
    a `in_cols` x `out_cols` weight block into an `rows` x `out_cols` output block.
    """

    layer: int
    roles: tuple[int, int, int]
    sizes: tuple[int, int, int]
    in_dim: int
    out_dim: int
    rows: int
    inputs: int
    in_cols: int
    out_cols: int

    @property
    def weight_part(self) -> int:
        """Elements of this rank's flat part of the weight block (split evenly over the a-group)."""
        return band_size(self.in_cols * self.out_cols, self.sizes[0])


def layer_shapes(grid: ProcessGrid, num_nodes: int, widths: list[int]) -> list[LayerShape]:
    """The shape of every layer of a GCN with layer widths `widths` (D_0 .. D_L) on `grid`."""
    shapes = []
    for layer in range(len(widths) - 1):
        a, b, c = layer_roles(layer)
        ga, gb, gc = grid.dims[a], grid.dims[b], grid.dims[c]
        shapes.append(
            LayerShape(
                layer=layer,
                roles=(a, b, c),
                sizes=(ga, gb, gc),
                in_dim=widths[layer],
                out_dim=widths[layer + 1],
                rows=band_size(num_nodes, ga),
                inputs=band_size(num_nodes, gb),
                in_cols=band_size(widths[layer], gc),
                out_cols=band_size(widths[layer + 1], gb),
            )
        )
    return shapes
