"""The 3D-parallel building blocks as torch modules a user stacks (docs/python.md).

Each block is built from the `Layout` of its input and gives the layout of its output (`.output`), so a
stack is written by chaining layouts; its parameters are this rank's flat parts (`ShardedBlock`), so any
torch optimizer steps them. Full-graph training: the blocks hold the whole graph's adjacency shards.
"""

from __future__ import annotations

import torch

from gtool.geometry.layers import LayerGeometry, linear_geometry, roles_after, roles_after_linear
from gtool.loader import load_layer_shard
from gtool.trainer.models.gcn import block_of_weight
from gtool.trainer.models.grid import Grid, Layout
from gtool.trainer.models.places import Place, block_of
from gtool.trainer.nn.adjacency import BlockedAdjacency
from gtool.trainer.nn.dropout import NO_DROPOUT, MaskSpec, relu_dropout
from gtool.trainer.nn.fused import rms_relu_dropout
from gtool.trainer.nn.loss import accuracies, cross_entropy
from gtool.trainer.nn.products import aggregate, transform
from gtool.trainer.nn.randomness import DENSE_WEIGHTS, initial_weight
from gtool.trainer.nn.reshard import HeldRows, plan_moves, reshard
from gtool.trainer.nn.sharded import ShardedBlock


def _checked(name: str, x: torch.Tensor, shape: tuple[int, int]) -> None:
    if tuple(x.shape) != shape:
        raise ValueError(f"{name}: an input block of shape {tuple(x.shape)}, its layout needs {shape}")


def _block_shape(grid: Grid, layout: Layout) -> tuple[int, int]:
    _, b, c = layout.roles
    return grid.node_band(b).size, grid.feature_band(c, layout.width).size


def _initial(grid: Grid, weight: torch.Tensor | None, shape: tuple[int, int], stream: int) -> torch.Tensor:
    """The full initial weight: `weight` (checked), or Glorot-uniform from the grid's seed and a new key."""
    if weight is None:
        return initial_weight(grid.seed, grid.next_key(), *shape, grid.dtype, stream)
    if tuple(weight.shape) != shape:
        raise ValueError(f"an initial weight of shape {tuple(weight.shape)}, the block needs {shape}")
    return weight.detach().to(grid.dtype)


class GCNConv(torch.nn.Module):
    """A GCN convolution A X W of `out_features` columns (no bias: add a `Bias`), aggregate-first ((A X) W)
    or `transform_first` (A (X W)); `weight` the full initial weight (in x out), Glorot if None. It
    multiplies by the adjacency that maps its input's node order to the other (`Grid.other_order`)."""

    def __init__(
        self,
        grid: Grid,
        layout: Layout,
        out_features: int,
        transform_first: bool = False,
        weight: torch.Tensor | None = None,
        blocks: int = 1,
    ):
        super().__init__()
        a, b, c = layout.roles
        dims, coords = grid.grid.dims, grid.coords
        row_axis = c if transform_first else a
        self.grid = grid
        self.input, self.output = (
            layout,
            Layout(roles_after(layout.roles, transform_first), grid.other_order(layout.order), out_features),
        )
        self.geometry = LayerGeometry(
            layer=0,
            roles=layout.roles,
            sizes=(dims[a], dims[b], dims[c]),
            coords=coords,
            matrix=int(layout.order == "r") if grid.two_matrices else 0,
            rows=grid.node_band(row_axis),
            inputs=grid.node_band(b),
            transform_first=transform_first,
        )
        key = self.geometry.key
        if key not in grid.shards:
            grid.shards[key] = load_layer_shard(grid.store, self.geometry, grid.device)
        self.adjacency = BlockedAdjacency.of(grid.shards[key], blocks, grid.dtype)
        full = _initial(grid, weight, (layout.width, out_features), 1)
        axis = self.geometry.weight_axis
        self.sharded = ShardedBlock(block_of_weight(self.geometry, full).to(grid.device), grid.axis(axis))
        self.weight = self.sharded.shard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _checked("GCNConv", x, _block_shape(self.grid, self.input))
        a, b, c = self.input.roles
        axis, timer, weight = self.grid.axis, self.grid.comm.timer, self.sharded.full()
        if self.geometry.transform_first:
            product = transform(x, weight, axis(a), axis(c), timer)
            return aggregate(product, self.adjacency, axis(b), axis(c), timer)
        product = aggregate(x, self.adjacency, axis(b), axis(a), timer)
        return transform(product, weight, axis(b), axis(c), timer)


class Linear(torch.nn.Module):
    """A dense layer X W (the 3D GEMM: an input projection, an output head) of `out_features` columns, no
    bias (add a `Bias`); `weight` the full initial weight (in x out), Glorot if None."""

    def __init__(self, grid: Grid, layout: Layout, out_features: int, weight: torch.Tensor | None = None):
        super().__init__()
        self.grid = grid
        self.input = layout
        self.output = Layout(roles_after_linear(layout.roles), layout.order, out_features)
        geometry = linear_geometry(grid.grid, grid.rank, layout.roles, grid.num_nodes)
        place = Place(geometry.in_cols(layout.width), geometry.out_cols(out_features), geometry.weight_axis)
        full = _initial(grid, weight, (layout.width, out_features), DENSE_WEIGHTS)
        self.sharded = ShardedBlock(block_of(full, place).to(grid.device), grid.axis(place.axis))
        self.weight = self.sharded.shard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _checked("Linear", x, _block_shape(self.grid, self.input))
        a, _, c = self.input.roles
        axis = self.grid.axis
        return transform(x, self.sharded.full(), axis(a), axis(c), self.grid.comm.timer)


class Bias(torch.nn.Module):
    """A learnable bias added to every real row of a block in `layout` (padding rows stay zero); zeros
    initially."""

    def __init__(self, grid: Grid, layout: Layout):
        super().__init__()
        _, b, c = layout.roles
        self.grid = grid
        self.input = self.output = layout
        self.real_rows = grid.node_band(b).real
        cols = grid.feature_band(c, layout.width)
        full = torch.zeros(layout.width, dtype=grid.dtype)
        self.sharded = ShardedBlock(block_of(full, Place(None, cols, b)).to(grid.device), grid.axis(b))
        self.bias = self.sharded.shard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = self.sharded.full()
        if self.real_rows == x.shape[0]:
            return x + bias
        return torch.cat([x[: self.real_rows] + bias, x[self.real_rows :]])


class NormReluDropout(torch.nn.Module):
    """residual + dropout(relu(RMSNorm(z))) in one fused pass each way (`norm` False: without the norm);
    the norm's learnable scale starts at ones. Dropout `p` while training, its masks those of the grid's
    epoch (`Grid.set_epoch`) and this block's key: equal on every grid shape."""

    def __init__(self, grid: Grid, layout: Layout, p: float = 0.0, norm: bool = True):
        super().__init__()
        _, b, c = layout.roles
        self.grid = grid
        self.input = self.output = layout
        self.p = p
        self.key = grid.next_key()
        rows, cols = grid.node_band(b), grid.feature_band(c, layout.width)
        self.placement = (rows.index * rows.size, rows.size, cols.index * cols.size, cols.size)
        self.sharded: ShardedBlock | None = None
        if norm:
            full = torch.ones(layout.width, dtype=grid.dtype)
            self.sharded = ShardedBlock(block_of(full, Place(None, cols, b)).to(grid.device), grid.axis(b))
            self.scale = self.sharded.shard

    def forward(self, z: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        grid, width = self.grid, self.input.width
        dropping = self.training and self.p > 0
        spec = MaskSpec.of(grid.seed, self.key, grid.epoch, self.p, width) if dropping else NO_DROPOUT
        if self.sharded is not None:
            group = grid.axis(self.input.roles[2])
            return rms_relu_dropout(
                z, self.sharded.full(), group, width, spec, self.placement, residual, training=self.training
            )
        y = relu_dropout(z, spec, self.placement) if self.training else torch.relu(z)
        return y if residual is None else y + residual


class Skip(torch.nn.Module):
    """A skip connection's move: a block in layout `source` in the layout `target` (same width), one
    all-to-all when they differ (roles or node order), nothing when they are equal."""

    def __init__(self, grid: Grid, source: Layout, target: Layout):
        super().__init__()
        if source.width != target.width:
            raise ValueError(f"Skip: a block of width {source.width} cannot join one of width {target.width}")
        self.grid = grid
        self.input, self.output = source, target
        self.moves = None
        if source != target:
            rows_in, rows_out = grid.node_band(source.roles[1]), grid.node_band(target.roles[1])
            sent = grid.positions(source.order, rows_in, target.order)
            filled = grid.positions(target.order, rows_out, source.order)
            self.moves = plan_moves(
                grid.grid,
                grid.rank,
                source.roles,
                target.roles,
                source.width,
                grid.num_nodes,
                HeldRows(torch.arange(sent.shape[0], device=grid.device), sent),
                HeldRows(torch.arange(filled.shape[0], device=grid.device), filled),
                rows_in.size,
                rows_out.size,
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.moves is None:
            return x
        replicas = self.grid.axis(self.input.roles[0])
        return reshard(x, self.moves, self.grid.comm.whole_grid, replicas)


class CrossEntropy(torch.nn.Module):
    """The mean softmax cross-entropy of logits in `layout` over the store's labelled training nodes (the
    same value on every rank), and their accuracy per split."""

    def __init__(self, grid: Grid, layout: Layout):
        super().__init__()
        self.grid = grid
        self.input = layout
        self.targets = grid.targets(layout)

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return cross_entropy(logits, self.targets, self.grid.comm.timer)

    def accuracy(self, logits: torch.Tensor) -> dict[str, float]:
        """Accuracy on train, valid and test."""
        return accuracies(logits, self.targets)
