"""The input block of every model a run trains: the rank's stored features (held, or each mini-batch
step's rows read from the store with its sample), or learned ones."""

from __future__ import annotations

import torch

from gtool.geometry.layers import XYZ
from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.models.grid import Grid
from gtool.trainer.nn.sharded import Place, ShardedBlock


def row_normalized(features: torch.Tensor, feature_group: AxisGroup) -> torch.Tensor:
    """Rows divided by their L1 norm over all feature bands (all-zero rows stay zero)."""
    norms = feature_group.all_reduce(features.abs().sum(dim=1))
    return features / torch.where(norms > 0, norms, torch.ones_like(norms)).unsqueeze(1)


class Features(torch.nn.Module):
    """The feature block F[band y, feature band z] in the layout `grid.input` (a mini-batch's members'
    rows of it in a step), `normalize`d ('row': each row by its L1 norm), or learned from them (`learnable`:
    split over the x-group; the block that takes it must leave its gradient partial). On a grid that
    streams its features (`Grid.streams_features`) the rows come with each step, normalized there."""

    def __init__(self, grid: Grid, normalize: str = "none", learnable: bool = False):
        super().__init__()
        self.grid = grid
        self.output = grid.input
        self.rows = grid.needs_rows(self.output)
        self.normalize = normalize
        self.sharded: ShardedBlock | None = None
        self.block: torch.Tensor | None = None
        if grid.streams_features:
            if learnable:
                raise ValueError("learnable features train every feature row: read them from memory")
            return
        block = grid.features()
        if normalize == "row":
            block = row_normalized(block, grid.axis(XYZ[2]))
        if learnable:
            rows, cols = grid.node_band(XYZ[1]), grid.feature_band(XYZ[2], self.output.width)
            shape = (grid.num_nodes, self.output.width)
            self.sharded = ShardedBlock(block, Place(rows, cols, XYZ[0]), shape, grid.axis(XYZ[0]))
            self.features = self.sharded.shard
        else:
            self.block = block

    @property
    def learnable(self) -> bool:
        return self.sharded is not None

    def forward(self) -> torch.Tensor:
        if self.grid.streams_features:
            rows = self.grid.step_features()
            return row_normalized(rows, self.grid.axis(XYZ[2])) if self.normalize == "row" else rows
        x = self.block if self.sharded is None else self.sharded.full()
        assert x is not None
        members = self.grid.members(self.rows)
        return x if members is None else x[members.positions]
