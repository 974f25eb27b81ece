"""The 3D-parallel GCN of one rank: its layer plans, weight shards, adjacency shards and forward pass."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.geometry.bands import Band, band
from gtool.geometry.layers import layer_roles, layer_widths
from gtool.loader.rank_data import RankData
from gtool.trainer.config import TrainConfig
from gtool.trainer.distributed import AxisGroup, GridComm
from gtool.trainer.dropout import NO_DROPOUT, MaskSpec, dropout, relu_dropout
from gtool.trainer.layers import BlockedAdjacency, aggregate, transform
from gtool.trainer.randomness import initial_weight
from gtool.trainer.sharding import ShardedBlock


def padded_slice(part: Band) -> slice:
    """The band's range in padded coordinates (a band past the real indices still has its place)."""
    return slice(part.index * part.size, (part.index + 1) * part.size)


@dataclass(frozen=True)
class LayerPlan:
    """Layer `layer` as seen by one rank, with roles (a, b, c).

    It reads input rows `inputs` (band b of N) and columns `in_cols` (band c of in_dim), and writes
    output rows `rows` (band a of N) and columns `out_cols` (band b of out_dim).
    """

    layer: int
    roles: tuple[int, int, int]
    in_dim: int
    out_dim: int
    rows: Band
    inputs: Band
    in_cols: Band
    out_cols: Band

    @property
    def input_block(self) -> tuple[int, int, int, int]:
        """(first row, rows, first column, columns) of the input block in padded global coordinates."""
        rows, cols = padded_slice(self.inputs), padded_slice(self.in_cols)
        return rows.start, self.inputs.size, cols.start, self.in_cols.size


def plan_layers(comm: GridComm, dims: list[int], num_nodes: int) -> list[LayerPlan]:
    """The plan of every layer for this rank."""
    coords, sizes = comm.coords, comm.grid.dims
    plans = []
    for layer in range(len(dims) - 1):
        a, b, c = layer_roles(layer)
        plans.append(
            LayerPlan(
                layer=layer,
                roles=(a, b, c),
                in_dim=dims[layer],
                out_dim=dims[layer + 1],
                rows=band(coords[a], sizes[a], num_nodes),
                inputs=band(coords[b], sizes[b], num_nodes),
                in_cols=band(coords[c], sizes[c], dims[layer]),
                out_cols=band(coords[b], sizes[b], dims[layer + 1]),
            )
        )
    return plans


def weight_block(plan: LayerPlan, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """This rank's block W[in band c, out band b] of the layer's full (zero-padded) initial weight."""
    full = initial_weight(seed, plan.layer, plan.in_dim, plan.out_dim, dtype)
    rows, cols = padded_slice(plan.in_cols), padded_slice(plan.out_cols)
    block = torch.zeros(plan.in_cols.size, plan.out_cols.size, dtype=dtype)
    real = full[rows, cols]
    block[: real.shape[0], : real.shape[1]] = real
    return block


def blocked_shards(data: RankData, blocks: int, dtype: torch.dtype) -> list[BlockedAdjacency]:
    """Each layer's adjacency shard in row blocks; layers that share a shard share one copy."""
    distinct: dict[tuple, BlockedAdjacency] = {}
    for layer, key in enumerate(data.layer_keys):
        if key not in distinct:
            distinct[key] = BlockedAdjacency(data.shard(layer), blocks, dtype)
    return [distinct[key] for key in data.layer_keys]


def row_normalized(features: torch.Tensor, feature_group: AxisGroup) -> torch.Tensor:
    """Rows divided by their L1 norm over all feature bands (all-zero rows stay zero)."""
    norms = feature_group.all_reduce(features.abs().sum(dim=1))
    return features / torch.where(norms > 0, norms, torch.ones_like(norms)).unsqueeze(1)


class ParallelGCN:
    """A GCN of `config.layers` layers (no bias; ReLU between layers, none after the last).

    Weights and, with learnable features, the input features are `ShardedBlock`s over the group that
    replicates them (the layer's a-axis).
    """

    def __init__(self, data: RankData, comm: GridComm, config: TrainConfig, device: torch.device):
        meta = data.meta
        dtype = config.torch_dtype
        self.comm = comm
        self.config = config
        self.num_nodes = meta.num_nodes
        self.dims = layer_widths(meta.num_features, config.hidden, meta.num_classes, config.layers)
        self.plans = plan_layers(comm, self.dims, self.num_nodes)
        self.adjacency = blocked_shards(data, config.agg_blocks, dtype)
        self.weights = [
            ShardedBlock(weight_block(plan, config.seed, dtype).to(device), comm.axes[plan.roles[0]])
            for plan in self.plans
        ]
        features = self._checked_features(data).to(device=device, dtype=dtype)
        first = self.plans[0]
        if config.normalize_features == "row":
            features = row_normalized(features, comm.axes[first.roles[2]])
        learned = config.learnable_features
        self.learned_features = ShardedBlock(features, comm.axes[first.roles[0]]) if learned else None
        self.features = None if learned else features

    def _checked_features(self, data: RankData) -> torch.Tensor:
        first = self.plans[0]
        expected = (first.inputs.size, first.in_cols.size)
        if tuple(data.features.shape) != expected:
            raise ValueError(
                f"rank {self.comm.rank}: feature block is {tuple(data.features.shape)}, "
                f"layer 0 of a {self.comm.grid} grid needs {expected}"
            )
        return data.features

    def parameters(self) -> list[torch.nn.Parameter]:
        """This rank's trainable parts, weights first (layer order), then the features part if learned."""
        params = [w.shard for w in self.weights]
        if self.learned_features is not None:
            params.append(self.learned_features.shard)
        return params

    def state(self) -> dict[str, torch.Tensor]:
        """This rank's parameter parts by name (what a checkpoint stores)."""
        state = {f"weight.{i}": w.shard.detach() for i, w in enumerate(self.weights)}
        if self.learned_features is not None:
            state["features"] = self.learned_features.shard.detach()
        return state

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        """Copy parameter parts saved by `state` (same grid, rank and shapes) into this model."""
        own = self.state()
        if set(own) != set(state):
            raise ValueError(f"checkpoint holds {sorted(state)}, this model has {sorted(own)}")
        with torch.no_grad():
            for name, tensor in own.items():
                if tensor.shape != state[name].shape:
                    got, want = tuple(state[name].shape), tuple(tensor.shape)
                    raise ValueError(f"checkpoint {name} has shape {got}, expected {want}")
                tensor.copy_(state[name])

    def input_block(self) -> torch.Tensor:
        """F_0[band b, feature band c] of layer 0: the stored or the learned features."""
        return self.learned_features.full() if self.learned_features is not None else self.features

    def mask(self, layer: int, epoch: int) -> MaskSpec:
        """The dropout mask of layer `layer`'s input in `epoch`."""
        config = self.config
        return MaskSpec.of(config.seed, layer, epoch, config.dropout, self.plans[layer].in_dim)

    def forward(self, epoch: int, training: bool) -> torch.Tensor:
        """Logits block [rows band a, class band b] of the last layer (dropout only when `training`).

        What each layer keeps for backward: the aggregate H (for dW) and, after every layer but the last,
        one byte per element of the next input (positive and kept); masks are recomputed, never stored.
        A layer's input is released once aggregated, its aggregate once transformed (unless saved).
        """
        timer, axes, config = self.comm.timer, self.comm.axes, self.config
        dropping = training and config.dropout > 0
        x = self.input_block()
        if dropping:
            with timer.phase("dense"):
                x = dropout(x, self.mask(0, epoch), self.plans[0].input_block)
        last = len(self.plans) - 1
        for plan, adjacency, weight in zip(self.plans, self.adjacency, self.weights, strict=True):
            a, b, c = plan.roles
            owns_input_grad = plan.layer == 0 and self.learned_features is not None
            hidden = aggregate(x, adjacency, axes[b], None if owns_input_grad else axes[a], timer)
            del x
            x = transform(hidden, weight.full(), axes[b], axes[c], timer)
            del hidden
            if plan.layer == last:
                break
            following = self.plans[plan.layer + 1]
            with timer.phase("dense"):
                if not training:
                    x = torch.relu(x)
                else:
                    spec = self.mask(following.layer, epoch) if dropping else NO_DROPOUT
                    x = relu_dropout(x, spec, following.input_block)
        return x
