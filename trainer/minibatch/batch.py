"""Every block one rank needs for one mini-batch step, cut from its own shards and node rows.

Layer l's output rows are the members of its row band (in the layer's output order) and its input rows
the members of its contraction band (in the other order); both in position order, so that the output
block of layer l and the input block of layer l+1, which are the same band of the same order, list the
same members alike on every rank. Dropout masks are keyed by the members' places in the sorted sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.geometry.bands import Band
from gtool.geometry.layers import LayerGeometry, order_of_layer_output, rank_layers
from gtool.loader import RankData, read_node_ids
from gtool.store.reader import Store, open_store
from gtool.trainer.minibatch.cut import BandMembers, BandNodes, SampledBlock, cut_shard
from gtool.trainer.minibatch.schedule import Schedule
from gtool.trainer.nn.adjacency import BlockedAdjacency

BandKey = tuple[str, Band]
"""(node order 'r' or 'c', band): a band of positions in one order."""


def other_order(order: str) -> str:
    return "c" if order == "r" else "r"


@dataclass(frozen=True)
class LayerBands:
    """The two bands of a layer's shard: its rows and its inputs (columns), each in its node order."""

    rows: BandKey
    inputs: BandKey


@dataclass
class StepBatch:
    """One rank's part of one step's sample.

    adjacency[l]: layer l's block of A_S; input_rows: rows of the stored feature block that are layer 0's
    input; dropout_rows[l]: the places in the sample of layer l's input rows; input_members[l] and
    output_members[l]: the members of layer l's input and output bands (a residual moves one to the
    other); target_rows: rows of the stored label block that are the logits' rows; size: the number of
    sampled nodes; adjacency: the blocks as the layers multiply by them.
    """

    epoch: int
    step: int
    size: int
    blocks: list[SampledBlock]
    input_rows: torch.Tensor
    dropout_rows: list[torch.Tensor]
    target_rows: torch.Tensor
    adjacency: list[BlockedAdjacency]
    input_members: list[BandMembers]
    output_members: list[BandMembers]


def blocked(blocks: list[SampledBlock], agg_blocks: int, dtype: torch.dtype) -> list[BlockedAdjacency]:
    """Each layer's block as CSR with its transpose (layers that share a block share one copy)."""
    made: dict[int, BlockedAdjacency] = {}
    for block in blocks:
        if id(block) not in made:
            made[id(block)] = BlockedAdjacency(block.csr(), block.transpose_csr(), agg_blocks, dtype)
    return [made[id(block)] for block in blocks]


def layer_bands(layer: LayerGeometry, two_matrices: bool) -> LayerBands:
    """The bands of `layer`'s shard; with one stored matrix (pr == pc) every band is named in pr order."""
    rows = order_of_layer_output(layer.layer) if two_matrices else "r"
    columns = other_order(rows) if two_matrices else "r"
    return LayerBands((rows, layer.rows), (columns, layer.inputs))


class RankSampler:
    """Cuts this rank's part of any step's sample: the node ids of its bands are read once, at start."""

    def __init__(
        self,
        data: RankData,
        store: str,
        schedule: Schedule,
        device: torch.device,
        agg_blocks: int = 1,
        dtype: torch.dtype = torch.float32,
    ):
        self.data = data
        self.schedule = schedule
        self.device, self.agg_blocks, self.dtype = device, agg_blocks, dtype
        two = data.two_matrices
        geometry = rank_layers(data.grid, data.rank, data.orders, schedule.num_nodes, two, data.start)
        self.layers = [layer_bands(layer, two) for layer in geometry]
        self.target_band = self.layers[-1].rows
        keys = {key for bands in self.layers for key in (bands.rows, bands.inputs)}
        opened = open_store(store)
        self.nodes = {key: self._band_nodes(opened, key, device) for key in sorted(keys, key=str)}
        self.order: tuple[int, torch.Tensor] | None = None

    def _band_nodes(self, opened: Store, key: BandKey, device: torch.device) -> BandNodes:
        order, band = key
        ids = read_node_ids(opened, order, band)
        return BandNodes(ids, self.schedule.num_nodes, band.size, device)

    def epoch_order(self, seed: int, epoch: int) -> torch.Tensor:
        """The node order of `epoch`, drawn once per epoch."""
        if self.order is None or self.order[0] != epoch:
            self.order = (epoch, self.schedule.order(seed, epoch))
        return self.order[1]

    def cut(self, seed: int, epoch: int, step: int) -> StepBatch:
        """This rank's part of step `step` of `epoch`: no communication, work in B and member entries."""
        sample = self.schedule.sample(self.epoch_order(seed, epoch), step).to(self.device)
        members: dict[BandKey, BandMembers] = {
            key: nodes.members(sample) for key, nodes in self.nodes.items()
        }
        rescaling = self.schedule.rescaling(int(sample.shape[0]))
        cut: dict[tuple, SampledBlock] = {}
        blocks = []
        for layer, bands in enumerate(self.layers):
            key = self.data.layer_keys[layer]
            if key not in cut:
                shard, slots = self.data.shards[key].matrix, self.nodes[bands.inputs].column_slots
                cut[key] = cut_shard(shard, members[bands.rows], members[bands.inputs], rescaling, slots)
            blocks.append(cut[key])
        return StepBatch(
            epoch=epoch,
            step=step,
            size=int(sample.shape[0]),
            blocks=blocks,
            input_rows=members[self.layers[0].inputs].positions,
            dropout_rows=[members[bands.inputs].indices for bands in self.layers],
            target_rows=members[self.target_band].positions,
            adjacency=blocked(blocks, self.agg_blocks, self.dtype),
            input_members=[members[bands.inputs] for bands in self.layers],
            output_members=[members[bands.rows] for bands in self.layers],
        )
