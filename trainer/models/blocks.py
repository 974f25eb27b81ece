"""The 3D-parallel building blocks: torch modules that gtool's models and a user's are stacked from.

Each block is built from the `Layout` of its input and gives the layout of its output (`.output`), so a
stack is written by chaining layouts; its parameters are this rank's flat parts (`ShardedBlock`), so any
torch optimizer steps them. A block takes the step's graph when it runs (`Grid.step`: the full graph or
a mini-batch's sample), so one model serves training, mini-batches, evaluation and prediction. Each has
a plain-PyTorch serial twin (`models.serial`).
"""

from __future__ import annotations

import torch

from gtool.geometry.layers import LayerGeometry, linear_geometry, roles_after, roles_after_linear
from gtool.trainer.models.grid import Grid, Layout
from gtool.trainer.nn.dropout import NO_DROPOUT, MaskSpec, RowsBlock, dropout, relu_dropout
from gtool.trainer.nn.fused import rms_relu_dropout
from gtool.trainer.nn.products import aggregate, transform
from gtool.trainer.nn.randomness import DENSE_WEIGHTS, initial_weight
from gtool.trainer.nn.reshard import HeldRows, Moves, Resharding, plan_moves, reshard_start
from gtool.trainer.nn.sharded import Place, ShardedBlock


def _checked(name: str, grid: Grid, x: torch.Tensor, layout: Layout) -> None:
    """A full-graph input block must have its layout's padded shape (a mini-batch's has its members' rows)."""
    _, b, c = layout.roles
    shape = (grid.node_band(b).size, grid.feature_band(c, layout.width).size)
    if grid.step.batch is None and tuple(x.shape) != shape:
        raise ValueError(f"{name}: an input block of shape {tuple(x.shape)}, its layout needs {shape}")


def _initial(grid: Grid, weight: torch.Tensor | None, shape: tuple[int, int], stream: int) -> torch.Tensor:
    """The full initial weight: `weight` (checked), or Glorot-uniform from the grid's seed and a new key."""
    if weight is None:
        return initial_weight(grid.seed, grid.next_key(), *shape, grid.dtype, stream)
    if tuple(weight.shape) != shape:
        raise ValueError(f"an initial weight of shape {tuple(weight.shape)}, the block needs {shape}")
    return weight.detach().to(grid.dtype)


def _vector(grid: Grid, value: torch.Tensor, layout: Layout) -> ShardedBlock:
    """A learnable vector over `layout`'s columns (a bias, a norm scale), replicated over its rows' axis."""
    _, b, c = layout.roles
    place = Place(None, grid.feature_band(c, layout.width), b)
    return ShardedBlock.of(value.to(grid.dtype), place, grid.axis(b), grid.device)


def mask_place(grid: Grid, layout: Layout) -> tuple[int, int, int, int] | RowsBlock:
    """Where a block of `layout` lies for its dropout mask in the current step: padded global coordinates,
    or a mini-batch's members' places in the sample."""
    rows, cols = grid.node_band(layout.roles[1]), grid.feature_band(layout.roles[2], layout.width)
    members = grid.members(grid.band_key(layout))
    if members is None:
        return (rows.index * rows.size, rows.size, cols.index * cols.size, cols.size)
    return RowsBlock(members.indices, cols.index * cols.size, cols.size)


class GCNConv(torch.nn.Module):
    """A GCN convolution A X W of `out_features` columns (no bias: add a `Bias`), aggregate-first ((A X) W)
    or `transform_first` (A (X W)); `weight` the full initial weight (in x out), Glorot if None. It
    multiplies by the adjacency that maps its input's node order to the other (`Grid.other_order`): the
    step's, when it runs. `reduce_input_grad` False leaves the input's gradient partial, for an input
    that reduces its own (learned features)."""

    def __init__(
        self,
        grid: Grid,
        layout: Layout,
        out_features: int,
        transform_first: bool = False,
        weight: torch.Tensor | None = None,
        reduce_input_grad: bool = True,
    ):
        super().__init__()
        a, b, c = layout.roles
        dims, coords = grid.grid.dims, grid.coords
        self.grid = grid
        self.input = layout
        self.output = Layout(
            roles_after(layout.roles, transform_first), grid.other_order(layout.order), out_features
        )
        self.reduce_input_grad = reduce_input_grad
        self.geometry = LayerGeometry(
            layer=0,
            roles=layout.roles,
            sizes=(dims[a], dims[b], dims[c]),
            coords=coords,
            matrix=int(layout.order == "r") if grid.two_matrices else 0,
            rows=grid.node_band(c if transform_first else a),
            inputs=grid.node_band(b),
            transform_first=transform_first,
        )
        self.key = self.geometry.key
        grid.shard(self.key, self.geometry)
        grid.convs[self.key] = (grid.needs_rows(self.output), grid.needs_rows(layout))
        full = _initial(grid, weight, (layout.width, out_features), 1)
        g = self.geometry
        place = Place(g.in_cols(layout.width), g.out_cols(out_features), g.weight_axis)
        self.sharded = ShardedBlock.of(full, place, grid.axis(place.axis), grid.device)
        self.weight = self.sharded.shard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _checked("GCNConv", self.grid, x, self.input)
        a, b, c = self.input.roles
        grid, weight = self.grid, self.sharded.full()
        adjacency, timer, axis = grid.adjacency(self.key), grid.timer, grid.axis
        input_grad = axis(a) if self.reduce_input_grad else None
        if self.geometry.transform_first:
            product = transform(x, weight, input_grad, axis(c), timer)
            return aggregate(product, adjacency, axis(b), axis(c), timer)
        product = aggregate(x, adjacency, axis(b), input_grad, timer)
        return transform(product, weight, axis(b), axis(c), timer)


class Linear(torch.nn.Module):
    """A dense layer X W (the 3D GEMM: an input projection, an output head) of `out_features` columns, no
    bias (add a `Bias`); `weight` the full initial weight (in x out), Glorot if None."""

    def __init__(
        self,
        grid: Grid,
        layout: Layout,
        out_features: int,
        weight: torch.Tensor | None = None,
        reduce_input_grad: bool = True,
    ):
        super().__init__()
        self.grid = grid
        self.input = layout
        self.output = Layout(roles_after_linear(layout.roles), layout.order, out_features)
        self.reduce_input_grad = reduce_input_grad
        geometry = linear_geometry(grid.grid, grid.rank, layout.roles, grid.num_nodes)
        place = Place(geometry.in_cols(layout.width), geometry.out_cols(out_features), geometry.weight_axis)
        full = _initial(grid, weight, (layout.width, out_features), DENSE_WEIGHTS)
        self.sharded = ShardedBlock.of(full, place, grid.axis(place.axis), grid.device)
        self.weight = self.sharded.shard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _checked("Linear", self.grid, x, self.input)
        a, _, c = self.input.roles
        axis = self.grid.axis
        input_grad = axis(a) if self.reduce_input_grad else None
        return transform(x, self.sharded.full(), input_grad, axis(c), self.grid.timer)


class Bias(torch.nn.Module):
    """A learnable bias added to every real row of a block in `layout` (padding rows stay zero); `value`
    its initial value (zeros if None)."""

    def __init__(self, grid: Grid, layout: Layout, value: torch.Tensor | None = None):
        super().__init__()
        self.grid = grid
        self.input = self.output = layout
        self.real_rows = grid.node_band(layout.roles[1]).real
        initial = torch.zeros(layout.width) if value is None else value
        self.sharded = _vector(grid, initial, layout)
        self.bias = self.sharded.shard

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = self.sharded.full()
        with self.grid.timer.phase("dense"):
            if self.grid.step.batch is not None or self.real_rows == x.shape[0]:
                return x + bias
            return torch.cat([x[: self.real_rows] + bias, x[self.real_rows :]])


class Dropout(torch.nn.Module):
    """Dropout `p` of a block in `layout` while training; its masks are those of the grid's step and this
    block's `key` (a new one if None): equal on every grid shape."""

    def __init__(self, grid: Grid, layout: Layout, p: float, key: int | None = None):
        super().__init__()
        self.grid = grid
        self.input = self.output = layout
        self.p = p
        self.key = grid.next_key() if key is None else key
        grid.needs_rows(layout)

    def spec(self) -> MaskSpec:
        """The mask of the current step (keeping everything when not training)."""
        if not self.training or self.p == 0:
            return NO_DROPOUT
        step = self.grid.step
        return MaskSpec.of(self.grid.seed, self.key, step.epoch, self.p, self.input.width, step.number)

    def mask_elements(self) -> int:
        """Elements of this block's full-graph mask (0 when it drops nothing)."""
        if self.p == 0:
            return 0
        _, b, c = self.input.roles
        return self.grid.node_band(b).size * self.grid.feature_band(c, self.input.width).size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        with self.grid.timer.phase("dense"):
            return dropout(x, self.spec(), mask_place(self.grid, self.input))


class NormReluDropout(Dropout):
    """residual + dropout(relu(RMSNorm(z))) in one fused pass each way (`norm` False: without the norm);
    the norm's learnable scale starts at `scale`. Dropout `p` while training, as `Dropout`'s."""

    def __init__(
        self,
        grid: Grid,
        layout: Layout,
        p: float = 0.0,
        norm: bool = True,
        key: int | None = None,
        scale: float = 1.0,
    ):
        super().__init__(grid, layout, p, key)
        self.sharded: ShardedBlock | None = None
        if norm:
            self.sharded = _vector(grid, torch.full((layout.width,), scale), layout)
            self.scale = self.sharded.shard

    def mask_elements(self) -> int:
        """Elements of this block's full-graph mask (its ReLU runs the same pass without dropout)."""
        _, b, c = self.input.roles
        return self.grid.node_band(b).size * self.grid.feature_band(c, self.input.width).size

    def forward(self, z: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        grid, width, spec = self.grid, self.input.width, self.spec()
        placement = mask_place(grid, self.input)
        if self.sharded is not None:  # timed inside: dense, its row sums' all-reduce comm
            group = grid.axis(self.input.roles[2])
            return rms_relu_dropout(
                z, self.sharded.full(), group, width, spec, placement, residual, training=self.training
            )
        with grid.timer.phase("dense"):
            y = relu_dropout(z, spec, placement) if self.training else torch.relu(z)
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
        self.moves: Moves | None = None
        self.sources = (grid.needs_rows(source), grid.needs_rows(target))
        self.positions: tuple[torch.Tensor, torch.Tensor] | None = None

    def _plan(self) -> Moves:
        """The moves of the current step (the full graph's are planned once)."""
        grid, source, target = self.grid, self.input, self.output
        if self.positions is None:
            rows_in, rows_out = grid.node_band(source.roles[1]), grid.node_band(target.roles[1])
            self.positions = (
                grid.positions(source.order, rows_in, target.order),
                grid.positions(target.order, rows_out, source.order),
            )
        sent, filled = self.positions
        inputs, outputs = (grid.members(key) for key in self.sources)
        if inputs is None or outputs is None:
            in_rows, out_rows = grid.node_band(source.roles[1]).size, grid.node_band(target.roles[1]).size
        else:
            sent, filled = sent[inputs.positions], filled[outputs.positions]
            in_rows, out_rows = inputs.count, outputs.count
        device = grid.device
        return plan_moves(
            grid.grid,
            grid.rank,
            source.roles,
            target.roles,
            source.width,
            grid.num_nodes,
            HeldRows(torch.arange(sent.shape[0], device=device), sent),
            HeldRows(torch.arange(filled.shape[0], device=device), filled),
            in_rows,
            out_rows,
        )

    def start(self, x: torch.Tensor) -> Resharding | torch.Tensor:
        """Begin the move of `x` (its all-to-all runs while the caller computes): `.wait()` for it; `x`
        itself when the layouts are equal."""
        if self.input == self.output:
            return x
        full_graph = self.grid.step.batch is None
        moves = self.moves if full_graph else None
        if moves is None:
            moves = self._plan()
            if full_graph:
                self.moves = moves
        replicas = self.grid.axis(self.input.roles[0])
        return reshard_start(x, moves, self.grid.comm.whole_grid, replicas)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moving = self.start(x)
        return moving if isinstance(moving, torch.Tensor) else moving.wait()


class CrossEntropy(torch.nn.Module):
    """The mean softmax cross-entropy of logits in `layout` over the store's labelled training nodes (the
    same value on every rank), and their accuracy per split."""

    def __init__(self, grid: Grid, layout: Layout):
        super().__init__()
        self.grid = grid
        self.input = layout
        self.targets = grid.targets(layout)

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return self.targets.loss(logits, self.grid.timer)

    def accuracy(self, logits: torch.Tensor) -> dict[str, float]:
        """Accuracy on train, valid and test (a multi-label store's: ROC-AUC)."""
        return self.targets.scores(logits)
