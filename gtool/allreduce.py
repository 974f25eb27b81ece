"""Per-epoch all-reduce volume of a 3D-parallel GCN (the performance model of ../shared/docs/3d-gcn.md).

Layer l with roles (a, b, c), padded row bands B_a, B_b and widths D_l -> D_{l+1}:

    forward   H = A F      B_a x D_l/G_c        over the b-group
              Q = H W      B_a x D_{l+1}/G_b    over the c-group
    backward  dH = dQ W^T  B_a x D_l/G_c        over the b-group
              dW = H^T dQ  D_l/G_c x D_{l+1}/G_b over the a-group (the group that replicates W)
              dF = A^T dH  B_b x D_l/G_c        over the a-group (not at layer 0: features are inputs)

A ring all-reduce of M bytes over g ranks sends 2 (g - 1) / g * M bytes per rank.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gtool.geometry import band_size
from gtool.grid import AXES, ProcessGrid, layer_shard

VALUE_BYTES = 4
"""float32 activations and gradients."""


def ring_allreduce_bytes(message_bytes: int, group_size: int) -> float:
    """Bytes each rank sends in a ring all-reduce of `message_bytes` over `group_size` ranks."""
    return 2 * (group_size - 1) / group_size * message_bytes


@dataclass(frozen=True)
class Collective:
    """One all-reduce of one layer, done by every group along `axis`."""

    layer: int
    direction: str
    operand: str
    axis: int
    group_size: int
    shape: tuple[int, int]

    @property
    def message_bytes(self) -> int:
        return self.shape[0] * self.shape[1] * VALUE_BYTES

    @property
    def rank_bytes(self) -> float:
        """Bytes each rank sends for it."""
        return ring_allreduce_bytes(self.message_bytes, self.group_size)

    def summary(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "direction": self.direction,
            "operand": self.operand,
            "group": AXES[self.axis],
            "group_size": self.group_size,
            "shape": list(self.shape),
            "message_bytes": self.message_bytes,
            "rank_bytes": self.rank_bytes,
        }


def layer_collectives(
    grid: ProcessGrid, layer: int, num_nodes: int, d_in: int, d_out: int
) -> list[Collective]:
    """The forward and backward all-reduces of one layer, shaped by its shards."""
    shard = layer_shard(grid, 0, layer, num_nodes, two_matrices=False)
    a, b, c = shard.roles
    dims = grid.dims
    rows_a, rows_b = shard.row_band.size, shard.col_band.size
    cols_in, cols_out = band_size(d_in, dims[c]), band_size(d_out, dims[b])
    collectives = [
        Collective(layer, "forward", "H = A F", b, dims[b], (rows_a, cols_in)),
        Collective(layer, "forward", "Q = H W", c, dims[c], (rows_a, cols_out)),
        Collective(layer, "backward", "dH = dQ W^T", b, dims[b], (rows_a, cols_in)),
        Collective(layer, "backward", "dW = H^T dQ", a, dims[a], (cols_in, cols_out)),
    ]
    if layer > 0:
        collectives.append(Collective(layer, "backward", "dF = A^T dH", a, dims[a], (rows_b, cols_in)))
    return collectives


def epoch_collectives(grid: ProcessGrid, num_nodes: int, widths: list[int]) -> list[Collective]:
    """Every all-reduce of one training epoch (forward and backward of each layer)."""
    return [
        c
        for layer in range(len(widths) - 1)
        for c in layer_collectives(grid, layer, num_nodes, widths[layer], widths[layer + 1])
    ]


def bytes_by_group(collectives: Iterable[Collective]) -> dict[str, float]:
    """Bytes each rank sends per epoch in its x-, y- and z-group."""
    totals = dict.fromkeys(AXES, 0.0)
    for c in collectives:
        totals[AXES[c.axis]] += c.rank_bytes
    return totals
