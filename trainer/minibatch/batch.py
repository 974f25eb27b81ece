"""Every block one rank needs for one mini-batch step, cut from its own shards and node rows.

The blocks of a model name what they need as they are built (`models.grid.Grid`): each adjacency shard
with the bands of its rows and columns, and every band whose rows they keep. A band's members are the
sample's nodes in it, in position order, so that blocks of the same band of the same order list the same
members alike on every rank. Dropout masks are keyed by the members' places in the sorted sample. A grid
streaming its features also gets its members' feature rows, read from the store in one selection.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.geometry.layers import ShardKey
from gtool.loader import ReadStats, read_feature_rows, read_node_ids
from gtool.trainer.minibatch.cut import BandMembers, BandNodes, SampledBlock, cut_shard
from gtool.trainer.minibatch.schedule import Schedule
from gtool.trainer.models.grid import BandKey, Grid, Sample
from gtool.trainer.nn.adjacency import BlockedAdjacency


@dataclass
class StepBatch:
    """One rank's part of one step's sample: `size` sampled nodes; `blocks[key]` the sample's block of
    adjacency shard `key` (as COO), `adjacency[key]` the same as the products multiply by it; `members`
    the sample's members of every band the model needs; `features` their feature rows (streamed, else
    None), till the step hands them to the grid (`Grid.begin`)."""

    epoch: int
    step: int
    size: int
    blocks: dict[ShardKey, SampledBlock]
    adjacency: dict[ShardKey, BlockedAdjacency]
    members: dict[BandKey, BandMembers]
    features: torch.Tensor | None = None

    @property
    def sample(self) -> Sample:
        """What the blocks take of it."""
        return Sample(self.step, self.adjacency, self.members)


class RankSampler:
    """Cuts this rank's part of any step's sample for the model built on `grid`: the node ids of its
    bands are read once, at start; `read` counts the feature rows read from the store since."""

    def __init__(self, grid: Grid, schedule: Schedule):
        self.grid = grid
        self.schedule = schedule
        self.nodes = {key: self._band_nodes(key) for key in sorted(grid.bands, key=str)}
        self.order: tuple[int, torch.Tensor] | None = None
        self.read = ReadStats()

    def _band_nodes(self, key: BandKey) -> BandNodes:
        order, band = key
        ids = read_node_ids(self.grid.store, order, band)
        return BandNodes(ids, self.schedule.num_nodes, band.size, self.grid.device)

    def epoch_order(self, seed: int, epoch: int) -> torch.Tensor:
        """The node order of `epoch`, drawn once per epoch."""
        if self.order is None or self.order[0] != epoch:
            self.order = (epoch, self.schedule.order(seed, epoch))
        return self.order[1]

    def cut(self, seed: int, epoch: int, step: int) -> StepBatch:
        """This rank's part of step `step` of `epoch`: no communication, work in B and member entries."""
        grid = self.grid
        sample = self.schedule.sample(self.epoch_order(seed, epoch), step).to(grid.device)
        members = {key: nodes.members(sample) for key, nodes in self.nodes.items()}
        rescaling = self.schedule.rescaling(int(sample.shape[0]))
        blocks = {
            key: cut_shard(
                grid.shards[key].matrix,
                members[rows],
                members[inputs],
                rescaling,
                self.nodes[inputs].column_slots,
            )
            for key, (rows, inputs) in grid.convs.items()
        }
        adjacency = {
            key: BlockedAdjacency(block.csr(), block.transpose_csr(), grid.agg_blocks, grid.dtype)
            for key, block in blocks.items()
        }
        features = self.feature_rows(members) if grid.streams_features else None
        return StepBatch(epoch, step, int(sample.shape[0]), blocks, adjacency, members, features)

    def feature_rows(self, members: dict[BandKey, BandMembers]) -> torch.Tensor:
        """The members' rows of this rank's feature block (node band y in pc order, feature band z), read
        from the store: what `Grid.features()[members.positions]` holds."""
        grid = self.grid
        key = grid.band_key(grid.input)
        positions = (members[key].positions + key[1].start).cpu().numpy()
        rows = read_feature_rows(grid.store, positions, grid.feature_cols(), self.read)
        return rows.to(grid.device, grid.dtype)
