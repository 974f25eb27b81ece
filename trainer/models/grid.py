"""A rank's seat on the 3D grid: its groups, its store (opened once), what it has read of it, and the step
the blocks of a model run in (the full graph, or a mini-batch's sample), docs/python.md.

A `Layout` names an activation block by the roles (a, b, c) its next operation plays: the block holds
rows of node band b, in node order `order` ('r' or 'c', the store's two permutations), and columns of
feature band c of `width`, and is replicated over the a-axis (docs/3d-gcn.md). Blocks are made once and
run in any step: each asks the grid, when it runs, for the adjacency and the rows of the current step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gtool.architecture import ModelConfig
from gtool.geometry.bands import Band, band
from gtool.geometry.grid import ProcessGrid, as_grid
from gtool.geometry.layers import XYZ, ShardKey
from gtool.loader import (
    AdjacencyShard,
    RankData,
    load_feature_block,
    load_label_rows,
    load_layer_shard,
    read_node_ids,
    read_positions,
)
from gtool.store.reader import Store, StoreLike, as_store
from gtool.trainer.comm.groups import AxisGroup, GridComm, grid_comm
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.launch.environment import RankEnv, environment_rank
from gtool.trainer.launch.world import join_world
from gtool.trainer.nn.adjacency import BlockedAdjacency
from gtool.trainer.nn.loss import Targets
from gtool.trainer.nn.multilabel import MultiLabelTargets

BandKey = tuple[str, Band]
"""(node order 'r' or 'c', band): a band of positions in one order."""


@dataclass(frozen=True)
class Layout:
    """An activation block's layout: the roles of the operation it feeds, its node order and width."""

    roles: tuple[int, int, int]
    order: str
    width: int


@dataclass(frozen=True)
class Sample:
    """A mini-batch step's part of the graph on this rank: its number, each adjacency shard's sampled
    block (BlockedAdjacency) and each band's members (minibatch.cut.BandMembers), by key."""

    number: int
    adjacency: dict[ShardKey, Any]
    members: dict[BandKey, Any]


@dataclass(frozen=True)
class Step:
    """What the blocks run in: an epoch (which keys dropout masks) and a mini-batch's `batch` (None: the
    full graph)."""

    epoch: int = 0
    batch: Sample | None = None

    @property
    def number(self) -> int | None:
        return None if self.batch is None else self.batch.number


class Grid:
    """One rank's part of a grid of ranks training on a store: made by `Grid.join` on every rank (or by
    `gtool train` around the ranks it starts), shared by every block of a model."""

    def __init__(
        self,
        comm: GridComm,
        store: Store,
        dtype: torch.dtype,
        device: torch.device,
        seed: int,
        data: RankData | None = None,
        options: ModelConfig | None = None,
        features_from: str = "memory",
    ):
        self.comm = comm
        self.store = store
        self.dtype = dtype
        self.device = device
        self.seed = seed
        self.options = ModelConfig() if options is None else options
        """The run's model options (--hidden, --dropout, ...), for a user's model to follow."""
        self.agg_blocks = self.options.agg_blocks
        self.features_from = features_from
        """'memory': `features()` holds this rank's feature block; 'store': each mini-batch step's rows
        are read with its sample (`step_features`)."""
        self.num_nodes = store.num_nodes
        self.two_matrices = store.two_matrices
        self.step = Step()
        self.shards: dict[ShardKey, AdjacencyShard] = dict(data.shards) if data is not None else {}
        self.convs: dict[ShardKey, tuple[BandKey, BandKey]] = {}
        """The shards the model multiplies by, with the bands of their rows and columns."""
        self.bands: set[BandKey] = set()
        """Every band whose rows a block of the model needs in a mini-batch."""
        self._data = data
        self._blocked: dict[ShardKey, BlockedAdjacency] = {}
        self._features: torch.Tensor | None = None
        self._step_rows: torch.Tensor | None = None
        self._labels: dict[BandKey, tuple[torch.Tensor, torch.Tensor]] = {}
        self._keys = 0

    @classmethod
    def join(
        cls,
        store: StoreLike,
        shape: tuple[int, int, int],
        env: RankEnv | None = None,
        *,
        dtype: torch.dtype = torch.float32,
        seed: int = 0,
        backend: str = "gloo",
        timeout_s: float = 300,
    ) -> Grid:
        """Join the process group of `env` (a local launch's, `run_local`) or of torchrun/srun's environment
        (None) and make the groups of a `shape` grid over its ranks; CPU tensors of `dtype`."""
        env = environment_rank() if env is None else env
        if env is None:
            raise ValueError("Grid.join: no rank environment: start the ranks with run_local or torchrun")
        grid = as_grid(shape)
        if env.world_size != grid.size:
            raise ValueError(
                f"Grid.join: a {grid} grid needs {grid.size} ranks, the world has {env.world_size}"
            )
        join_world(env, backend, timedelta(seconds=timeout_s))
        device = torch.device("cpu")
        comm = grid_comm(grid, timeout_s, PhaseTimer(device), device)
        return cls(comm, as_store(store), dtype, device, seed)

    def close(self) -> None:
        """Leave the process group."""
        dist.destroy_process_group()

    def __enter__(self) -> Grid:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def grid(self) -> ProcessGrid:
        return self.comm.grid

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def coords(self) -> tuple[int, int, int]:
        return self.comm.coords

    @property
    def timer(self) -> PhaseTimer:
        return self.comm.timer

    @property
    def epoch(self) -> int:
        return self.step.epoch

    def axis(self, axis: int) -> AxisGroup:
        return self.comm.axes[axis]

    def node_band(self, axis: int) -> Band:
        """This rank's band of the nodes along grid axis `axis`."""
        return band(self.coords[axis], self.grid.dims[axis], self.num_nodes)

    def feature_band(self, axis: int, width: int) -> Band:
        """This rank's band of `width` columns along grid axis `axis`."""
        return band(self.coords[axis], self.grid.dims[axis], width)

    def next_key(self) -> int:
        """A block's own number, in construction order (every rank builds the same stack)."""
        self._keys += 1
        return self._keys - 1

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose dropout masks the blocks draw next (full graph)."""
        self.step = Step(epoch)

    def begin(self, step: Step, rows: torch.Tensor | None = None) -> None:
        """The step the blocks run in next, and its feature rows read from the store (`step_features`)."""
        self.step = step
        self._step_rows = rows

    @property
    def input(self) -> Layout:
        """The layout of the stored features (`features()`): roles (x, y, z), pc order."""
        return Layout(XYZ, "c", self.store.num_features)

    def other_order(self, order: str) -> str:
        """The node order after an adjacency product (the same one on a single-permuted store)."""
        if not self.two_matrices:
            return order
        return "c" if order == "r" else "r"

    def band_key(self, layout: Layout) -> BandKey:
        """The band of a block's rows, named as a mini-batch's members are (pr's on a one-matrix store)."""
        return (layout.order if self.two_matrices else "r", self.node_band(layout.roles[1]))

    def needs_rows(self, layout: Layout) -> BandKey:
        """Note that a block needs the rows of `layout`'s band in a mini-batch; returns its key."""
        key = self.band_key(layout)
        self.bands.add(key)
        return key

    def shard(self, key: ShardKey, loads: Any) -> AdjacencyShard:
        """The adjacency shard `key`, read once (`loads`: the layer geometry that reads it)."""
        if key not in self.shards:
            self.shards[key] = load_layer_shard(self.store, loads, self.device)
        return self.shards[key]

    def adjacency(self, key: ShardKey) -> BlockedAdjacency:
        """The current step's block of shard `key`: the whole shard, or the sample's block of it."""
        batch = self.step.batch
        if batch is not None:
            return batch.adjacency[key]
        if key not in self._blocked:
            self._blocked[key] = BlockedAdjacency.of(self.shards[key], self.agg_blocks, self.dtype)
        return self._blocked[key]

    def members(self, key: BandKey) -> Any:
        """The current sample's members of band `key` (BandMembers; None: the full graph, every row)."""
        batch = self.step.batch
        return None if batch is None else batch.members[key]

    @property
    def streams_features(self) -> bool:
        """Whether each step's feature rows come from the store with its sample (--features-from store)."""
        return self.features_from == "store"

    def feature_cols(self) -> Band:
        """This rank's band of the stored feature columns (of the layout `input`)."""
        return self.feature_band(XYZ[2], self.store.num_features)

    def step_features(self) -> torch.Tensor:
        """The current mini-batch step's feature rows: its members' rows of the block `features()` would
        hold, read from the store with the sample. Handed over once: the grid lets them go, so that the
        block's output (a dropout's copy) need not live beside them."""
        rows, self._step_rows = self._step_rows, None
        if rows is None:
            raise ValueError("a step's feature rows from the store are taken once, in a mini-batch step")
        return rows

    def features(self) -> torch.Tensor:
        """This rank's block of the stored features, in the layout `input` (read once)."""
        if self._features is None:
            rows, cols = self.node_band(XYZ[1]), self.feature_cols()
            data = self._data
            held = data.features if data is not None else None
            if (
                data is not None
                and held is not None
                and (data.feature_rows, data.feature_cols) == (rows, cols)
            ):
                block = held
            else:
                block = load_feature_block(self.store, rows, cols, self.device)
            self._features = block.to(self.device, self.dtype)
        return self._features

    def _label_rows(self, layout: Layout) -> tuple[torch.Tensor, torch.Tensor]:
        key = self.band_key(layout)
        if key not in self._labels:
            data, rows = self._data, key[1]
            same_order = not self.two_matrices or data is not None and data.label_order == key[0]
            if data is not None and data.label_rows == rows and same_order:
                self._labels[key] = (data.labels.to(self.device), data.split.to(self.device))
            else:
                self._labels[key] = load_label_rows(self.store, key[0], rows, self.device)
        return self._labels[key]

    def targets(self, layout: Layout, rows: torch.Tensor | None = None) -> Targets | MultiLabelTargets:
        """The labels and splits of the logits in `layout` (its width: the classes, or a multi-label
        store's tasks), or of their `rows` (a mini-batch's members)."""
        classes = self.store.num_classes
        if layout.width != classes:
            raise ValueError(
                f"logits need {classes} columns (the store's classes), the layout has {layout.width}"
            )
        labels, split = self._label_rows(layout)
        if rows is not None:
            labels, split = labels[rows], split[rows]
        _, b, c = layout.roles
        class_band = self.feature_band(c, classes)
        first = class_band.index * class_band.size
        real = max(0, min(class_band.size, classes - first))
        kind = MultiLabelTargets if self.store.meta.labels.multi_label else Targets
        return kind(labels, split, first, real, self.axis(b), self.axis(c), require_train=rows is None)

    def positions(self, order: str, rows: Band, other: str) -> torch.Tensor:
        """The positions in order `other` of the real rows of band `rows` in order `order`."""
        if order == other:
            found = np.arange(rows.start, rows.stop, dtype=np.int64)
        else:
            found = read_positions(self.store, other, read_node_ids(self.store, order, rows))
        return torch.from_numpy(found).to(self.device)
