"""The 3D-parallel model of one rank: a GCN, or the ScaleGNN stack (input projection, GCN layers each
followed by RMSNorm, ReLU, dropout and a residual add, output head), and its forward pass."""

from __future__ import annotations

import numpy as np
import torch

from gtool.geometry.bands import Band
from gtool.geometry.layers import LayerGeometry, order_of_layer_output, padded_slice, roles_after
from gtool.loader import RankData, read_node_ids, read_positions
from gtool.store.reader import open_store
from gtool.trainer.comm.groups import AxisGroup, GridComm
from gtool.trainer.config import TrainConfig
from gtool.trainer.minibatch.batch import StepBatch
from gtool.trainer.models.places import (
    block_of,
    feature_place,
    initial_parameters,
    is_vector,
    stack_geometry,
)
from gtool.trainer.nn.adjacency import BlockedAdjacency
from gtool.trainer.nn.dropout import NO_DROPOUT, MaskSpec, RowsBlock, dropout, relu_dropout
from gtool.trainer.nn.fused import rms_relu_dropout
from gtool.trainer.nn.products import aggregate, transform
from gtool.trainer.nn.reshard import HeldRows, Moves, plan_moves, reshard
from gtool.trainer.nn.sharded import ShardedBlock

Placement = tuple[int, int, int, int] | RowsBlock


def block_of_weight(geometry: LayerGeometry, full: torch.Tensor) -> torch.Tensor:
    """This rank's zero-padded block W[in band c, out band b (a transform-first)] of the full weight `full`
    (D_l x D_l+1)."""
    in_cols, out_cols = geometry.in_cols(full.shape[0]), geometry.out_cols(full.shape[1])
    block = full.new_zeros(in_cols.size, out_cols.size)
    real = full[padded_slice(in_cols), padded_slice(out_cols)]
    block[: real.shape[0], : real.shape[1]] = real
    return block


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


def _other(order: str) -> str:
    return "c" if order == "r" else "r"


def _placement(rows_start: int, rows: int, cols_start: int, cols: int, batch_rows: torch.Tensor | None):
    """A block's place for its dropout mask: padded global coordinates, or a mini-batch's sample places."""
    if batch_rows is None:
        return (rows_start, rows, cols_start, cols)
    return RowsBlock(batch_rows, cols_start, cols)


class ParallelGCN:
    """One rank's part of the model of `config.model` (gcn or scalegnn and its switches).

    Parameters are `ShardedBlock`s over the group that replicates them (`places.StackGeometry.places`):
    weights over their layer's weight axis, biases and norm scales over their block's row axis, learned
    features over the x-axis. GCN layers multiply in their order (`config.model.layer_order`); a residual
    moves its layer's input to the output's layout (`nn.reshard`).
    """

    def __init__(self, data: RankData, comm: GridComm, config: TrainConfig, device: torch.device):
        meta = data.meta
        dtype = config.torch_dtype
        self.comm = comm
        self.config = config
        self.num_nodes = meta.num_nodes
        self.geometry = stack_geometry(
            config.model,
            comm.grid,
            comm.rank,
            meta.num_nodes,
            meta.num_features,
            meta.num_classes,
            data.two_matrices,
        )
        self.dims = self.geometry.dims
        orders = tuple(g.transform_first for g in self.geometry.layers)
        if data.orders != orders or data.start != config.model.start:
            raise ValueError(
                f"rank data was loaded for layer orders {data.orders} from roles {data.start}, the run's "
                f"are {orders} from {config.model.start} (--layer-order {config.model.layer_order})"
            )
        self.layers = self.geometry.layers
        self.two_matrices = data.two_matrices
        self.adjacency = blocked_shards(data, config.model.agg_blocks, dtype)
        full = initial_parameters(
            config.model, config.runtime.seed, meta.num_features, meta.num_classes, dtype
        )
        self.places = self.geometry.places()
        self.blocks = {
            name: ShardedBlock(block_of(full[name], place).to(device), comm.axes[place.axis])
            for name, place in self.places.items()
        }
        self.weights = [self.blocks[f"weight.{g.layer}"] for g in self.layers]
        features = self._checked_features(data).to(device=device, dtype=dtype)
        if config.model.normalize_features == "row":
            features = row_normalized(features, comm.axes[2])
        learned = config.model.learnable_features
        self.learned_features = ShardedBlock(features, comm.axes[0]) if learned else None
        self.features = None if learned else features
        self.feature_place = feature_place(comm.grid, comm.rank, meta.num_nodes, meta.num_features)
        self.input_widths = [meta.num_features] + self.dims[1:]
        self._positions: dict[tuple, torch.Tensor] = {}
        self._moves: dict[int, Moves] = {}

    def _checked_features(self, data: RankData) -> torch.Tensor:
        expected = (data.feature_rows.size, data.feature_cols.size)
        if tuple(data.features.shape) != expected:
            raise ValueError(
                f"rank {self.comm.rank}: feature block is {tuple(data.features.shape)}, "
                f"the first layer of a {self.comm.grid} grid needs {expected}"
            )
        return data.features

    def named_parameters(self) -> dict[str, torch.nn.Parameter]:
        """This rank's trainable parts by name: weights (forward order), learned features, then vectors."""
        named = {name: block.shard for name, block in self.blocks.items() if not is_vector(name)}
        if self.learned_features is not None:
            named["features"] = self.learned_features.shard
        named.update({name: block.shard for name, block in self.blocks.items() if is_vector(name)})
        return named

    def parameters(self) -> list[torch.nn.Parameter]:
        """This rank's trainable parts, weights first (forward order), then the features part if learned,
        then biases and norm scales."""
        return list(self.named_parameters().values())

    def vectors(self) -> list[torch.nn.Parameter]:
        """The parts of biases and norm scales (no weight decay)."""
        return [block.shard for name, block in self.blocks.items() if is_vector(name)]

    def state(self) -> dict[str, torch.Tensor]:
        """This rank's parameter parts by name (what a checkpoint stores)."""
        return {name: param.detach() for name, param in self.named_parameters().items()}

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
        """The stored or the learned feature block F[band y, feature band z]."""
        if self.learned_features is not None:
            return self.learned_features.full()
        assert self.features is not None  # kept whenever they are not learned
        return self.features

    def mask(self, index: int, epoch: int, batch: StepBatch | None = None) -> MaskSpec:
        """The dropout mask of the input of GCN layer `index` (0: the features; L: the output head's)."""
        config = self.config
        step = None if batch is None else batch.step
        width = self.input_widths[index]
        return MaskSpec.of(config.runtime.seed, index, epoch, config.model.dropout_rate, width, step)

    def feature_placement(self, batch: StepBatch | None) -> Placement:
        rows, cols = self.feature_place.rows, self.feature_place.cols
        assert rows is not None
        members = None if batch is None else batch.dropout_rows[0]
        return _placement(rows.index * rows.size, rows.size, cols.index * cols.size, cols.size, members)

    def output_placement(self, layer: int, batch: StepBatch | None) -> Placement:
        """GCN layer `layer`'s output block (the next one's input block), for its dropout mask."""
        g = self.layers[layer]
        rows, cols = g.rows, g.out_cols(self.dims[layer + 1])
        members = None if batch is None else batch.output_members[layer].indices
        return _placement(rows.index * rows.size, rows.size, cols.index * cols.size, cols.size, members)

    def mask_elements(self) -> int:
        """Elements of the dropout masks one full-graph training epoch computes on this rank: the feature
        block's (when the rate is not 0) and every block output's."""
        places = [self.output_placement(index, None) for index in self.geometry.blocks]
        if self.config.model.dropout_rate > 0:
            places.append(self.feature_placement(None))
        return sum(place[1] * place[3] for place in places if isinstance(place, tuple))  # no batch: tuples

    def forward(self, epoch: int, training: bool, batch: StepBatch | None = None) -> torch.Tensor:
        """Logits block [rows, class band] (dropout only when `training`); with `batch`, of the mini-batch:
        its members' rows of every block, multiplied by its sampled blocks."""
        hidden = self.propagate(range(len(self.layers)), epoch, training, batch=batch)
        return self.output(hidden, batch)

    def first_input(self, epoch: int, training: bool, batch: StepBatch | None = None) -> torch.Tensor:
        """The first GCN layer's input block: the features (their members' rows in a mini-batch), with
        their dropout when `training`, through the input projection if any."""
        x = self.input_block()
        if batch is not None:
            x = x[batch.input_rows]
        if training and self.config.model.dropout_rate > 0:
            with self.comm.timer.phase("dense"):
                x = dropout(x, self.mask(0, epoch, batch), self.feature_placement(batch))
        projection = self.geometry.projection
        if projection is None:
            return x
        axes, timer = self.comm.axes, self.comm.timer
        input_grad = None if self.learned_features is not None else axes[projection.roles[0]]
        x = transform(
            x, self.blocks["projection.weight"].full(), input_grad, axes[projection.roles[2]], timer
        )
        rows = self.feature_place.rows
        assert rows is not None
        return self._biased(x, "projection.bias", rows.real if batch is None else x.shape[0])

    def output(self, hidden: torch.Tensor, batch: StepBatch | None = None) -> torch.Tensor:
        """The logits from the last GCN layer's block output through the output head (without a head,
        `hidden` are the logits already)."""
        head = self.geometry.head
        if head is None:
            return hidden
        axes = self.comm.axes
        weight = self.blocks["head.weight"].full()
        logits = transform(hidden, weight, axes[head.roles[0]], axes[head.roles[2]], self.comm.timer)
        real = self.layers[-1].rows.real if batch is None else logits.shape[0]
        return self._biased(logits, "head.bias", real)

    def _biased(self, x: torch.Tensor, name: str, real_rows: int) -> torch.Tensor:
        """`x` plus the bias `name` on its `real_rows` (padding rows stay zero), or `x` without a bias."""
        if name not in self.blocks:
            return x
        bias = self.blocks[name].full()
        with self.comm.timer.phase("dense"):
            if real_rows == x.shape[0]:
                return x + bias
            return torch.cat([x[:real_rows] + bias, x[real_rows:]])

    def propagate(
        self,
        layers: range,
        epoch: int,
        training: bool,
        x: torch.Tensor | None = None,
        batch: StepBatch | None = None,
    ) -> torch.Tensor:
        """Consecutive GCN `layers` applied to `x`, the input block of the first (None: the first layer's,
        made here): the input block of the layer after them (or of the output head), or the logits block
        when they end a model without a head; with `batch`, of the mini-batch."""
        if x is None:
            x = self.first_input(epoch, training, batch)
        timer, axes = self.comm.timer, self.comm.axes
        adjacencies = self.adjacency if batch is None else batch.adjacency
        for index in layers:
            layer, adjacency, weight = self.layers[index], adjacencies[index], self.weights[index]
            a, b, c = layer.roles
            owns_input_grad = (
                index == 0 and self.learned_features is not None and self.geometry.projection is None
            )
            input_grad = None if owns_input_grad else axes[a]
            residual = self._residual(index, x, batch) if self.geometry.residual(index) else None
            if layer.transform_first:
                product = transform(x, weight.full(), input_grad, axes[c], timer)
                del x
                x = aggregate(product, adjacency, axes[b], axes[c], timer)
            else:
                product = aggregate(x, adjacency, axes[b], input_grad, timer)
                del x
                x = transform(product, weight.full(), axes[b], axes[c], timer)
            del product
            x = self._biased(x, f"bias.{index}", layer.rows.real if batch is None else x.shape[0])
            if index not in self.geometry.blocks:
                break
            x = self._block_output(x, index, epoch, training, batch, residual)
        return x

    def _block_output(
        self,
        z: torch.Tensor,
        index: int,
        epoch: int,
        training: bool,
        batch: StepBatch | None,
        residual: torch.Tensor | None,
    ) -> torch.Tensor:
        """residual + dropout(relu(norm(z))) of GCN layer `index`'s output (norm and residual if any)."""
        dropping = training and self.config.model.dropout_rate > 0
        spec = self.mask(index + 1, epoch, batch) if dropping else NO_DROPOUT
        placement = self.output_placement(index, batch)
        layer = self.layers[index]
        if f"scale.{index}" in self.blocks:  # its row sums are all-reduced: timed as comm, not dense
            scale = self.blocks[f"scale.{index}"].full()
            group, width = self.comm.axes[layer.out_col_axis], self.dims[index + 1]
            return rms_relu_dropout(z, scale, group, width, spec, placement, residual, training=training)
        with self.comm.timer.phase("dense"):
            y = relu_dropout(z, spec, placement) if training else torch.relu(z)
            return y if residual is None else y + residual

    def _residual(self, index: int, x: torch.Tensor, batch: StepBatch | None) -> torch.Tensor:
        """GCN layer `index`'s input block `x` moved to its output block's layout."""
        layer = self.layers[index]
        moves = self._moves.get(index) if batch is None else None
        if moves is None:
            moves = self._plan(index, batch)
            if batch is None:
                self._moves[index] = moves
        return reshard(x, moves, self.comm.whole_grid, self.comm.axes[layer.roles[0]])

    def _orders(self, index: int) -> tuple[str, str]:
        """GCN layer `index`'s input and output node orders (both pr's with one stored matrix)."""
        if not self.two_matrices:
            return "r", "r"
        return _other(order_of_layer_output(index)), order_of_layer_output(index)

    def _plan(self, index: int, batch: StepBatch | None) -> Moves:
        layer = self.layers[index]
        source_order, target_order = self._orders(index)
        if not self._positions:
            self._read_positions()
        sent = self._positions[(source_order, layer.inputs, target_order)]
        filled = self._positions[(target_order, layer.rows, source_order)]
        device = self.weights[0].shard.device
        if batch is None:
            sent_rows = HeldRows(torch.arange(sent.shape[0], device=device), sent)
            filled_rows = HeldRows(torch.arange(filled.shape[0], device=device), filled)
            in_rows, out_rows = layer.inputs.size, layer.rows.size
        else:
            inputs, outputs = batch.input_members[index], batch.output_members[index]
            sent_rows = HeldRows(torch.arange(inputs.count, device=device), sent[inputs.positions])
            filled_rows = HeldRows(torch.arange(outputs.count, device=device), filled[outputs.positions])
            in_rows, out_rows = inputs.count, outputs.count
        roles = (layer.roles, roles_after(layer.roles, layer.transform_first))
        grid, rank, width = self.comm.grid, self.comm.rank, self.dims[index]
        return plan_moves(
            grid, rank, *roles, width, self.num_nodes, sent_rows, filled_rows, in_rows, out_rows
        )

    def _read_positions(self) -> None:
        """For every residual, the positions of its input rows in the output's node order and of its
        output rows in the input's: one pass over each stored permutation for all of them."""
        wanted: dict[tuple, Band] = {}
        for index in (i for i in range(len(self.layers)) if self.geometry.residual(i)):
            layer, (source, target) = self.layers[index], self._orders(index)
            wanted[(source, layer.inputs, target)] = layer.inputs
            wanted[(target, layer.rows, source)] = layer.rows
        found = {
            key: np.arange(band.start, band.stop, dtype=np.int64)
            for key, band in wanted.items()
            if key[0] == key[2]
        }
        store = open_store(self.config.store)
        for other in ("r", "c"):
            keys = [key for key in wanted if key[2] == other and key[0] != other]
            if keys:
                ids = [read_node_ids(store, key[0], wanted[key]) for key in keys]
                distinct, inverse = np.unique(np.concatenate(ids), return_inverse=True)
                positions = read_positions(store, other, distinct)[inverse]
                for key, part in zip(
                    keys, np.split(positions, np.cumsum([len(i) for i in ids])[:-1]), strict=True
                ):
                    found[key] = part
        device = self.weights[0].shard.device
        self._positions = {key: torch.from_numpy(value).to(device) for key, value in found.items()}
