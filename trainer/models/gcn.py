"""The 3D-parallel GCN of one rank: its layers' geometry, weight shards, adjacency shards and forward pass."""

from __future__ import annotations

import torch

from gtool.geometry.layers import LayerGeometry, padded_slice, rank_layers
from gtool.loader import RankData
from gtool.trainer.comm.groups import AxisGroup, GridComm
from gtool.trainer.config import TrainConfig
from gtool.trainer.minibatch.batch import StepBatch
from gtool.trainer.nn.adjacency import BlockedAdjacency
from gtool.trainer.nn.dropout import NO_DROPOUT, MaskSpec, RowsBlock, dropout, relu_dropout
from gtool.trainer.nn.products import aggregate, transform
from gtool.trainer.nn.randomness import initial_weight
from gtool.trainer.nn.sharded import ShardedBlock


def block_of_weight(geometry: LayerGeometry, full: torch.Tensor) -> torch.Tensor:
    """This rank's zero-padded block W[in band c, out band b (a transform-first)] of the full weight `full`
    (D_l x D_l+1)."""
    in_cols, out_cols = geometry.in_cols(full.shape[0]), geometry.out_cols(full.shape[1])
    block = full.new_zeros(in_cols.size, out_cols.size)
    real = full[padded_slice(in_cols), padded_slice(out_cols)]
    block[: real.shape[0], : real.shape[1]] = real
    return block


def weight_block(geometry: LayerGeometry, dims: list[int], seed: int, dtype: torch.dtype) -> torch.Tensor:
    """This rank's block W[in_cols, out_cols] of the layer's full (zero-padded) initial weight."""
    layer = geometry.layer
    return block_of_weight(geometry, initial_weight(seed, layer, dims[layer], dims[layer + 1], dtype))


def blocked_shards(data: RankData, blocks: int, dtype: torch.dtype) -> list[BlockedAdjacency]:
    """Each layer's adjacency shard in row blocks; layers that share a shard share one copy."""
    distinct: dict[tuple, BlockedAdjacency] = {}
    for layer, key in enumerate(data.layer_keys):
        if key not in distinct:
            distinct[key] = BlockedAdjacency.of(data.shard(layer), blocks, dtype)
    return [distinct[key] for key in data.layer_keys]


def row_normalized(features: torch.Tensor, feature_group: AxisGroup) -> torch.Tensor:
    """Rows divided by their L1 norm over all feature bands (all-zero rows stay zero)."""
    norms = feature_group.all_reduce(features.abs().sum(dim=1))
    return features / torch.where(norms > 0, norms, torch.ones_like(norms)).unsqueeze(1)


class ParallelGCN:
    """A GCN of `config.model.layers` layers (no bias; ReLU between layers, none after the last).

    Weights and, with learnable features, the input features are `ShardedBlock`s over the group that
    replicates them (the layer's weight axis; layer 0's a-axis). Each layer multiplies in its order
    (`config.model.layer_order`).
    """

    def __init__(self, data: RankData, comm: GridComm, config: TrainConfig, device: torch.device):
        meta = data.meta
        dtype = config.torch_dtype
        self.comm = comm
        self.config = config
        self.num_nodes = meta.num_nodes
        self.dims = config.model.widths(meta.num_features, meta.num_classes)
        orders = config.model.orders(meta.num_features, meta.num_classes)
        if data.orders != orders:
            raise ValueError(
                f"rank data was loaded for layer orders {data.orders}, the run's are {orders} "
                f"(--layer-order {config.model.layer_order}; True: transform-first)"
            )
        self.layers = rank_layers(comm.grid, comm.rank, orders, self.num_nodes, data.two_matrices)
        self.adjacency = blocked_shards(data, config.model.agg_blocks, dtype)
        self.weights = [
            ShardedBlock(
                weight_block(g, self.dims, config.runtime.seed, dtype).to(device), comm.axes[g.weight_axis]
            )
            for g in self.layers
        ]
        features = self._checked_features(data).to(device=device, dtype=dtype)
        first = self.layers[0]
        if config.model.normalize_features == "row":
            features = row_normalized(features, comm.axes[first.roles[2]])
        learned = config.model.learnable_features
        self.learned_features = ShardedBlock(features, comm.axes[first.roles[0]]) if learned else None
        self.features = None if learned else features

    def _checked_features(self, data: RankData) -> torch.Tensor:
        first = self.layers[0]
        expected = (first.inputs.size, first.in_cols(self.dims[0]).size)
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
        if self.learned_features is not None:
            return self.learned_features.full()
        assert self.features is not None  # kept whenever they are not learned
        return self.features

    def input_placement(
        self, layer: int, batch: StepBatch | None = None
    ) -> tuple[int, int, int, int] | RowsBlock:
        """(first row, rows, first column, columns) of layer `layer`'s input block, padded, global; in a
        mini-batch, its rows are the members' places in the sample."""
        placement = self.layers[layer].input_block(self.dims[layer])
        if batch is None:
            return placement
        return RowsBlock(batch.dropout_rows[layer], placement[2], placement[3])

    def mask(self, layer: int, epoch: int, batch: StepBatch | None = None) -> MaskSpec:
        """The dropout mask of layer `layer`'s input in `epoch` (and the mini-batch step of `batch`)."""
        config = self.config
        step = None if batch is None else batch.step
        return MaskSpec.of(config.runtime.seed, layer, epoch, config.model.dropout, self.dims[layer], step)

    def forward(self, epoch: int, training: bool, batch: StepBatch | None = None) -> torch.Tensor:
        """Logits block [rows, class band] of the last layer (dropout only when `training`); with `batch`,
        of the mini-batch: its members' rows of every block, multiplied by its sampled blocks.

        What each layer keeps for backward: what multiplies its weight (for dW: the aggregate H, or the
        input F transform-first) and, after every layer but the last, one byte per element of the next
        input (positive and kept); masks are recomputed, never stored. Aggregate-first, a layer's input is
        released once aggregated, its aggregate once transformed (unless saved); transform-first, the
        product F W once aggregated.
        """
        return self.propagate(range(len(self.layers)), epoch, training, batch=batch)

    def first_input(self, epoch: int, training: bool, batch: StepBatch | None = None) -> torch.Tensor:
        """Layer 0's input block (in a mini-batch, its members' rows), with its dropout when `training`."""
        x = self.input_block()
        if batch is not None:
            x = x[batch.input_rows]
        if training and self.config.model.dropout > 0:
            with self.comm.timer.phase("dense"):
                x = dropout(x, self.mask(0, epoch, batch), self.input_placement(0, batch))
        return x

    def propagate(
        self,
        layers: range,
        epoch: int,
        training: bool,
        x: torch.Tensor | None = None,
        batch: StepBatch | None = None,
    ) -> torch.Tensor:
        """Consecutive `layers` applied to `x`, the input block of the first (None: layer 0's, made here so
        that it is released once aggregated): the input block of the layer after them (ReLU, and its
        dropout when `training`), or the logits block when they end the model; with `batch`, of the
        mini-batch, multiplied by its sampled blocks."""
        if x is None:
            x = self.first_input(epoch, training, batch)
        timer, axes, config = self.comm.timer, self.comm.axes, self.config
        dropping = training and config.model.dropout > 0
        adjacencies = self.adjacency if batch is None else batch.adjacency
        last = len(self.layers) - 1
        for index in layers:
            layer, adjacency, weight = self.layers[index], adjacencies[index], self.weights[index]
            a, b, c = layer.roles
            owns_input_grad = layer.layer == 0 and self.learned_features is not None
            input_grad = None if owns_input_grad else axes[a]
            if layer.transform_first:
                product = transform(x, weight.full(), input_grad, axes[c], timer)
                del x
                x = aggregate(product, adjacency, axes[b], axes[c], timer)
            else:
                product = aggregate(x, adjacency, axes[b], input_grad, timer)
                del x
                x = transform(product, weight.full(), axes[b], axes[c], timer)
            del product
            if layer.layer == last:
                break
            following = layer.layer + 1
            with timer.phase("dense"):
                if not training:
                    x = torch.relu(x)
                else:
                    spec = self.mask(following, epoch, batch) if dropping else NO_DROPOUT
                    x = relu_dropout(x, spec, self.input_placement(following, batch))
        return x
